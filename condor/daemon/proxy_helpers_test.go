package daemon_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
)

// peekJSON decodes the JSON body of r into v and leaves the body whole,
// to be forwarded.
func peekJSON(r *http.Request, v any) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, json.Unmarshal(body, v)
}

// proxiedExec starts a central manager and an execute node of one slot
// whose startd is reached only through the handler front makes of the
// startd's own address (its advertised address is the handler's), with
// the claim lease of leaseKnobs, and the execute node's knobs.
func proxiedExec(t *testing.T, front func(target *url.URL, exec *testpool.Node) http.Handler, knobs ...testpool.Knobs) (cm, exec *testpool.Node) {
	t.Helper()
	cm = testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"}, leaseKnobs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testpool.Config(t, append([]testpool.Knobs{testpool.FastKnobs(), leaseKnobs, {"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr,
		"NUM_CPUS": "1", "CLAIM_IDLE_TIMEOUT": "60"}}, knobs...)...)
	exec, err = testpool.StartWith("exec", "", t.TempDir(), nil, cfg, func(o *daemon.Options) { o.Address = ln.Addr().String() })
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(exec.Stop)
	target, _ := url.Parse("http://" + exec.Addr)
	srv := &http.Server{Handler: front(target, exec), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return cm, exec
}

// jobLogEvents reads the events of dir/job.log.
func jobLogEvents(t *testing.T, dir string) []joblog.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := joblog.ReadAll(f, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// sharedDir makes a directory of the host's /tmp that every account may
// enter and write, removed with the test: a job, which may run as another
// account in a private /tmp of its own, leaves its traces there.
func sharedDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}
