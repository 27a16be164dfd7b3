package daemon_test

import (
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

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
)

// lostAnswers is a proxy in front of a startd that passes the first
// activation on to the startd, which takes the job, and loses the
// startd's answer: it closes the schedd's connection, or answers 502 Bad
// Gateway, as a relay whose tunnel to the worker dropped does. With
// unsent, the activation is lost on its way and never reaches the
// startd.
type lostAnswers struct {
	proxy *httputil.ReverseProxy
	// gateway: answer 502; else close the connection.
	gateway     bool
	unsent      bool
	mu          sync.Mutex
	activations int
}

func (p *lostAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "startd/activate") {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.activations++
	first := p.activations == 1
	p.mu.Unlock()
	if !first {
		p.proxy.ServeHTTP(w, r)
		return
	}
	if !p.unsent {
		p.proxy.ServeHTTP(httptest.NewRecorder(), r)
	}
	if p.gateway {
		http.Error(w, "the worker's tunnel was dropped", http.StatusBadGateway)
		return
	}
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	conn.Close()
}

// TestUnansweredActivationRunsOnce runs a job whose activation the startd
// takes but whose answer the schedd never gets. The schedd does not give
// the job to another slot while the startd may run it: it asks the
// startd, learns that the job runs, and the job runs once and completes,
// its log a plain run's (no shadow exception, one Execute event). An
// activation lost before it reached the startd has the startd answer
// that its claim runs nothing: the job is requeued as for a failed
// activation (a shadow exception), and runs once, activated again.
func TestUnansweredActivationRunsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		gateway, unsent bool
		events          []joblog.EventType
		activations     int
	}{
		{name: "connection closed", events: []joblog.EventType{joblog.Submit, joblog.Execute, joblog.Terminated}, activations: 1},
		{name: "bad gateway", gateway: true, events: []joblog.EventType{joblog.Submit, joblog.Execute, joblog.Terminated}, activations: 1},
		{name: "lost on its way", unsent: true, events: []joblog.EventType{joblog.Submit, joblog.ShadowException, joblog.Execute, joblog.Terminated}, activations: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &lostAnswers{gateway: tc.gateway, unsent: tc.unsent}
			cm, _ := proxiedExec(t, func(target *url.URL, exec *testpool.Node) http.Handler {
				p.proxy = httputil.NewSingleHostReverseProxy(target)
				return p
			}, testpool.Knobs{"MOUNT_UNDER_SCRATCH": ""}) // the job's runs go to the host's /tmp
			jobDir := t.TempDir()
			os.Chmod(jobDir, 0o777)
			// The job may run as another account: it records its runs
			// in a file all may write, in a directory all may enter.
			runDir := sharedDir(t, "unanswered-runs")
			runs := filepath.Join(runDir, "runs")
			if err := os.WriteFile(runs, nil, 0o666); err != nil {
				t.Fatal(err)
			}
			os.Chmod(runs, 0o666)
			script := filepath.Join(jobDir, "job.sh")
			if err := os.WriteFile(script, []byte("#!/bin/sh\necho run >> "+runs+"\nsleep 2\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			sc := cm.Client().Schedd()
			submitText(t, sc, jobDir, jobOwner(t), "executable = job.sh\nlog = job.log\nqueue\n")
			waitQueueEmpty(t, sc, jobDir)

			if b, err := os.ReadFile(runs); err != nil || string(b) != "run\n" {
				t.Errorf("the job's runs: %q, %v; want one", b, err)
			}
			var got []joblog.EventType
			for _, ev := range jobLogEvents(t, jobDir) {
				if ev.Type != joblog.FileTransfer && ev.Type != joblog.ImageSize {
					got = append(got, ev.Type)
				}
				if ev.Type == joblog.Terminated && (!ev.TerminatedNormally || ev.ReturnValue != 0) {
					t.Errorf("the job ended %+v, want exit 0", ev)
				}
			}
			if !slices.Equal(got, tc.events) {
				t.Errorf("the job's events (but file transfers and image sizes) are %v, want %v", got, tc.events)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.activations != tc.activations {
				t.Errorf("the startd was asked to activate %d times, want %d", p.activations, tc.activations)
			}
		})
	}
}
