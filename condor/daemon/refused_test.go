package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/wire"
)

// releasingProxy is a proxy in front of a startd that has the startd
// release the claim of the first activation it sees just before passing
// the activation on, as a startd that took an idle claim for forgotten
// does: the startd refuses it (unknown claim id). It answers the next
// activations late, once their job (which ends at once) has ended and
// reported.
type releasingProxy struct {
	proxy   *httputil.ReverseProxy
	release func(claimID string) error
	late    time.Duration
	mu      sync.Mutex
	// answers are the startd's answers to the activations, in order.
	answers []int
}

func (p *releasingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "startd/activate") {
		p.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req wire.ActivateRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	first := len(p.answers) == 0
	p.mu.Unlock()
	if first {
		if err := p.release(req.ClaimID); err != nil {
			http.Error(w, "releasing the claim: "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	rec := httptest.NewRecorder()
	p.proxy.ServeHTTP(rec, r)
	p.mu.Lock()
	p.answers = append(p.answers, rec.Code)
	p.mu.Unlock()
	if !first {
		time.Sleep(p.late)
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// TestRefusedActivationLogsNoExecute runs a job whose first activation
// the startd refuses (it released the claim just before). The job goes
// back to the queue, runs on another claim and ends: its log has the
// refusal's shadow exception, and one Execute event, of the run that
// happened, before its end, although that run's activation was answered
// after the job had ended. A refused activation logs no Execute event.
func TestRefusedActivationLogsNoExecute(t *testing.T) {
	if testing.Short() {
		t.Skip("answers an activation seconds late")
	}
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"}, leaseKnobs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := ln.Addr().String()
	cfg := testpool.Config(t, testpool.FastKnobs(), leaseKnobs, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr,
		"NUM_CPUS": "1", "CLAIM_IDLE_TIMEOUT": "60"})
	exec, err := testpool.StartWith("exec", "", t.TempDir(), nil, cfg, func(o *daemon.Options) { o.Address = front })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Stop)
	target, _ := url.Parse("http://" + exec.Addr)
	startd := exec.Client().Startd()
	p := &releasingProxy{proxy: httputil.NewSingleHostReverseProxy(target), late: 2 * time.Second,
		release: func(id string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return startd.Release(ctx, &wire.ReleaseRequest{ClaimID: id})
		}}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	sc := cm.Client().Schedd()
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	submitText(t, sc, jobDir, jobOwner(t), "executable = /bin/true\nlog = job.log\nqueue\n")
	waitQueueEmpty(t, sc, jobDir)
	f, err := os.Open(filepath.Join(jobDir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := joblog.ReadAll(f, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	var got []joblog.EventType
	for _, ev := range evs {
		if ev.Type != joblog.FileTransfer && ev.Type != joblog.ImageSize {
			got = append(got, ev.Type)
		}
	}
	want := []joblog.EventType{joblog.Submit, joblog.ShadowException, joblog.Execute, joblog.Terminated}
	if !slices.Equal(got, want) {
		t.Errorf("the job's events (but file transfers and image sizes) are %v, want %v", got, want)
	}
	for _, ev := range evs {
		if ev.Type == joblog.ShadowException && !strings.Contains(ev.Message, "REFUSED") {
			t.Errorf("the shadow exception is not the refusal: %q", ev.Message)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.answers) != 2 || p.answers[0] != http.StatusNotFound || p.answers[1] != http.StatusOK {
		t.Errorf("the startd answered the activations %v, want a refusal (404) then an acceptance", p.answers)
	}
}
