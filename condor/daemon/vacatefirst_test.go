package daemon_test

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/wire"
)

// vacateFirst is a proxy in front of a startd that holds the first
// activation until a vacate has passed it: the vacate of a job removed
// while its activation is on its way reaches the startd first, as it
// may when the two go over different connections. answered is closed
// once the startd has answered the activation, claim is its claim id.
type vacateFirst struct {
	proxy                      *httputil.ReverseProxy
	arrived, vacated, answered chan struct{}
	arrive, vacate             sync.Once
	claim                      string
}

func (p *vacateFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "startd/vacate"):
		p.proxy.ServeHTTP(w, r)
		p.vacate.Do(func() { close(p.vacated) })
	case strings.HasSuffix(r.URL.Path, "startd/activate"):
		var req wire.ActivateRequest
		if _, err := peekJSON(r, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		first := false
		p.arrive.Do(func() { first = true; p.claim = req.ClaimID; close(p.arrived) })
		if !first {
			p.proxy.ServeHTTP(w, r)
			return
		}
		select {
		case <-p.vacated:
		case <-time.After(30 * time.Second):
		case <-r.Context().Done():
		}
		p.proxy.ServeHTTP(w, r)
		close(p.answered)
	default:
		p.proxy.ServeHTTP(w, r)
	}
}

// TestRemovedWhileActivatingStops removes a job while its activation is
// on its way to the startd, whose vacate gets there first and finds
// nothing to stop: the job is stopped once the startd has taken it, and
// its claim runs nothing, rather than the removed job running on with its
// slot busy.
func TestRemovedWhileActivatingStops(t *testing.T) {
	t.Parallel()
	p := &vacateFirst{arrived: make(chan struct{}), vacated: make(chan struct{}), answered: make(chan struct{})}
	cm, exec := proxiedExec(t, func(target *url.URL, exec *testpool.Node) http.Handler {
		p.proxy = httputil.NewSingleHostReverseProxy(target)
		return p
	}, testpool.Knobs{
		"MOUNT_UNDER_SCRATCH": "",    // the job's beats go to the host's /tmp
		"ALIVE_INTERVAL":      "300", // no claim's keep-alive stops the job meanwhile
	})
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o777)
	// The job may run as another account: it beats in a file all may
	// write, in a directory all may enter.
	beat := filepath.Join(sharedDir(t, "vacatefirst"), "beat")
	script := filepath.Join(jobDir, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nwhile :; do date +%s > "+beat+"; sleep 0.1; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sc := cm.Client().Schedd()
	resp := submitText(t, sc, jobDir, jobOwner(t), "executable = job.sh\nlog = job.log\nqueue\n")
	select {
	case <-p.arrived:
	case <-time.After(2 * time.Minute):
		t.Fatal("the job's activation never came")
	}
	ctx := context.Background()
	if changed, err := sc.Act(ctx, &wire.ActRequest{Action: wire.ActRemove, Args: []string{strconv.Itoa(resp.Cluster)}}); err != nil || changed.Count != 1 {
		t.Fatalf("condor_rm of the job being activated: %+v, %v", changed, err)
	}
	select {
	case <-p.answered:
	case <-time.After(time.Minute):
		t.Fatal("the startd never answered the activation")
	}
	answered := time.Now()
	startd := exec.Client().Startd()
	testpool.Eventually(t, time.Minute, "the removed job to stop", func() bool {
		info, err := startd.ClaimInfo(ctx, &wire.ClaimInfoRequest{ClaimID: p.claim})
		if err != nil || info.Active {
			return false
		}
		b, err := os.ReadFile(beat)
		if err != nil {
			return true // stopped before it beat
		}
		last, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Since(time.Unix(last, 0)) > 2*time.Second
	})
	t.Logf("the job stopped %s after its activation was answered", time.Since(answered).Round(time.Millisecond))
}
