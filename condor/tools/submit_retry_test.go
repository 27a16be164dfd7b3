package tools_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

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
		if rec.Code != http.StatusOK {
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

// TestSubmitGivesUpOnLostCommits checks that the retries end, with an
// error that names the cluster.
func TestSubmitGivesUpOnLostCommits(t *testing.T) {
	sc, commits := lossySchedd(t, 100)
	resp, err := submitTo(sc, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "committing cluster 1 (4 attempts)") {
		t.Fatalf("submit: %v", err)
	}
	if resp == nil || resp.Cluster != 1 || commits.Load() != 4 {
		t.Errorf("response %+v after %d commits", resp, commits.Load())
	}
}
