package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
)

// lossySchedd serves a real schedd whose first drop answers to a commit
// (schedd/submit) are lost: the schedd commits, then the connection is
// closed without an answer.
func lossySchedd(t *testing.T, drop int32) (*wire.Schedd, *atomic.Int32) {
	t.Helper()
	s, err := schedd.New(context.Background(), schedd.Options{Config: config.New(config.Options{}), Name: "schedd@submit",
		Address: "submit.example.org:9618", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	prefix := wire.PathPrefix + "schedd"
	h := http.StripPrefix(prefix, s.Handler())
	var commits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/submit") {
			h.ServeHTTP(w, r)
			return
		}
		if commits.Add(1) > drop {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		// A client that gave up meanwhile (its wait over) cancels the
		// commit it no longer waits for.
		if rec.Code != http.StatusOK && r.Context().Err() == nil {
			t.Errorf("commit: %d %s", rec.Code, rec.Body)
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(func() {
		srv.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return wire.NewSchedd(srv.Listener.Addr().String(), ""), &commits
}

func submitTo(sc *wire.Schedd, dir string) (*wire.SubmitResponse, error) {
	f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte("executable = /bin/true\nqueue 3\n"))
	if err != nil {
		return nil, err
	}
	return tools.SubmitFile(context.Background(), sc, f, submit.Options{Owner: "alice", SubmitDir: dir,
		Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }})
}

// TestSubmitRetriesLostCommit checks that condor_submit sends a commit
// whose answer was lost again, and that the schedd, which had committed
// it, queues the jobs once.
func TestSubmitRetriesLostCommit(t *testing.T) {
	sc, commits := lossySchedd(t, 2)
	resp, err := submitTo(sc, t.TempDir())
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if resp.Cluster != 1 || commits.Load() != 3 {
		t.Errorf("cluster %d after %d commits, want cluster 1 after 3", resp.Cluster, commits.Load())
	}
	jobs, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Errorf("%d jobs queued, want 3", len(jobs))
	}
}

// TestSubmitGivesUpOnLostCommits checks that the questions end once
// the wait has passed, with an error that says the outcome is unknown
// and how to learn it.
func TestSubmitGivesUpOnLostCommits(t *testing.T) {
	defer tools.SetCommitWait(time.Second)()
	sc, commits := lossySchedd(t, 1000)
	start := time.Now()
	resp, err := submitTo(sc, t.TempDir())
	var ce *tools.CommitError
	if !errors.As(err, &ce) || ce.NotCommitted || ce.Cluster != 1 {
		t.Fatalf("submit: %v", err)
	}
	for _, want := range []string{"outcome unknown", "did not answer", sc.Addr(), "condor q -pool " + sc.Addr() + " -constraint 'ClusterId == 1'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("gave up after %s, want about 1s", took)
	}
	// The last attempt is cut by the deadline: the schedd may not have
	// had it, or not yet.
	if n := int(commits.Load()); resp == nil || resp.Cluster != 1 || n < 3 || n > ce.Attempts || n < ce.Attempts-1 {
		t.Errorf("response %+v after %d commits, error says %d attempts", resp, n, ce.Attempts)
	}
}

// TestSubmitWaitsOutAnOutage checks that a submitter whose commit was
// committed but whose answer was lost, and whose schedd then does not
// answer for longer than a few quick retries (its agent being
// restarted), keeps asking and reports the cluster the schedd committed,
// once.
func TestSubmitWaitsOutAnOutage(t *testing.T) {
	sc, commits, down := outageSchedd(t, 6*time.Second)
	resp, err := submitTo(sc, t.TempDir())
	if err != nil {
		t.Fatalf("submit after a 6s outage: %v", err)
	}
	if resp.Cluster != 1 || resp.Jobs != 3 {
		t.Errorf("response %+v, want cluster 1 with 3 jobs", resp)
	}
	if commits.Load() != 2 || down.Load() < 2 {
		t.Errorf("%d commits reached the schedd, %d were turned away during the outage", commits.Load(), down.Load())
	}
	jobs, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Errorf("%d jobs queued, want 3", len(jobs))
	}
}

// TestSubmitRefusedIsNotCommitted checks that a refusal by the schedd,
// even after a lost answer, is reported as nothing committed.
func TestSubmitRefusedIsNotCommitted(t *testing.T) {
	s, err := schedd.New(context.Background(), schedd.Options{Config: config.New(config.Options{}), Name: "schedd@submit",
		Address: "submit.example.org:9618", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	prefix := wire.PathPrefix + "schedd"
	h := http.StripPrefix(prefix, s.Handler())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/submit") {
			// The schedd turns the jobs away: a submit of a cluster that
			// it never reserved.
			r2 := r.Clone(r.Context())
			body, _ := io.ReadAll(r.Body)
			var req wire.SubmitRequest
			if err := json.Unmarshal(body, &req); err != nil {
				t.Error(err)
			}
			req.Cluster = 99
			for _, j := range req.Jobs {
				delete(j, "ClusterId")
			}
			body, _ = json.Marshal(req)
			r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			h.ServeHTTP(w, r2)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	sc := wire.NewSchedd(srv.Listener.Addr().String(), "")
	_, err = submitTo(sc, t.TempDir())
	var ce *tools.CommitError
	if !errors.As(err, &ce) || !ce.NotCommitted || !strings.Contains(err.Error(), "not committed") ||
		!strings.Contains(err.Error(), "submitting again is safe") {
		t.Fatalf("submit: %v", err)
	}
	jobs, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 {
		t.Errorf("%d jobs queued after a refusal", len(jobs))
	}
}

// outageSchedd serves a real schedd that commits the first submit but
// loses its answer, then closes every connection for outage.
func outageSchedd(t *testing.T, outage time.Duration) (*wire.Schedd, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	s, err := schedd.New(context.Background(), schedd.Options{Config: config.New(config.Options{}), Name: "schedd@submit",
		Address: "submit.example.org:9618", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	prefix := wire.PathPrefix + "schedd"
	h := http.StripPrefix(prefix, s.Handler())
	var commits, down atomic.Int32
	var until atomic.Int64
	drop := func(w http.ResponseWriter) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().UnixNano() < until.Load() {
			down.Add(1)
			drop(w)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/submit") || commits.Add(1) > 1 {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		// A client that gave up meanwhile (its wait over) cancels the
		// commit it no longer waits for.
		if rec.Code != http.StatusOK && r.Context().Err() == nil {
			t.Errorf("commit: %d %s", rec.Code, rec.Body)
		}
		until.Store(time.Now().Add(outage).UnixNano())
		drop(w)
	}))
	t.Cleanup(func() {
		srv.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return wire.NewSchedd(srv.Listener.Addr().String(), ""), &commits, &down
}
