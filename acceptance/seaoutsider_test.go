package acceptance

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// TestSerfWithoutKeyCannotJoinTheSea has a plain serf agent, as any user
// of the host could start, try to join the default sea (the local
// provider on loopback, no encrypt) without the sea's key: the sea gossips
// encrypted with the working directory's sea key, so the agent never
// becomes a member.
func TestSerfWithoutKeyCannotJoinTheSea(t *testing.T) {
	t.Parallel()
	serfBin, err := exec.LookPath("serf")
	if err != nil {
		testenv.SkipOrFail(t, "serf is not installed (apt-get install serf); .ci/run installs it")
	}
	w := newWorkdir(t, "sea")
	w.expect(0, "apply", "-auto-approve")
	seaAPI := w.outputs()["sea"].(string)
	gossip := gossipOf(t, w.expect(0, "sea", "members", "-json", "-sea", seaAPI).stdout, seaAPI)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, serfBin, "agent", "-node", "outsider", "-bind", "127.0.0.1:0", "-rpc-addr", "127.0.0.1:0",
		"-retry-join", gossip, "-retry-interval", "1s")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range w.seaMembers(seaAPI) {
			if m.Name == "outsider" {
				t.Fatalf("a serf agent without the sea's key joined the sea (status %s); serf said:\n%s", m.Status, out.String())
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	w.expect(0, "destroy", "-auto-approve")
}

// outsider is a plain serf agent that holds the sea's key and a
// certificate of the sea's CA (as a free node of the sea does: issued by
// the authority, for no pool), and serves TLS with that certificate at
// api, counting the HTTP requests that reach it.
type outsider struct {
	t        *testing.T
	serf     string
	rpc      string
	api      string
	requests atomic.Int64
	paths    sync.Map
}

// startOutsider starts the outsider in w's sea (it joins the agent whose
// API is seaAPI) with the serf tags tags, api set to its TLS server.
func startOutsider(t *testing.T, w *workdir, seaAPI string, tags map[string]string) *outsider {
	t.Helper()
	serfBin, err := exec.LookPath("serf")
	if err != nil {
		testenv.SkipOrFail(t, "serf is not installed (apt-get install serf); .ci/run installs it")
	}
	certDir := t.TempDir()
	w.expect(0, "cert", "create", "-name", "outsider", "-dir", certDir)
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	o := &outsider{t: t, serf: serfBin}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		o.requests.Add(1)
		o.paths.Store(r.Method+" "+r.URL.Path, true)
		http.Error(rw, "no", http.StatusServiceUnavailable)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	o.api = ln.Addr().String()

	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.rpc = rl.Addr().String()
	rl.Close()
	key := strings.TrimSpace(readFile(t, filepath.Join(w.dir, ".pond", "auth", "gossip.key")))
	gossip := gossipOf(t, w.expect(0, "sea", "members", "-json", "-sea", seaAPI).stdout, seaAPI)
	args := []string{"agent", "-node", "outsider", "-bind", "127.0.0.1:0", "-rpc-addr", o.rpc, "-encrypt", key, "-join", gossip, "-tag", "api=" + o.api}
	for k, v := range tags {
		args = append(args, "-tag", k+"="+v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, serfBin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	eventually(t, 30*time.Second, func() error {
		for _, m := range w.seaMembers(seaAPI) {
			if m.Name == "outsider" {
				return nil
			}
		}
		return fmt.Errorf("the outsider is not in the sea yet; serf said:\n%s", out.String())
	})
	return o
}

// setTags sets the outsider's serf tags.
func (o *outsider) setTags(tags map[string]string) {
	args := []string{"tags", "-rpc-addr", o.rpc}
	for k, v := range tags {
		args = append(args, "-set", k+"="+v)
	}
	if out, err := exec.Command(o.serf, args...).CombinedOutput(); err != nil {
		o.t.Errorf("serf tags: %v\n%s", err, out)
	}
}

// reached lists the requests that reached the outsider's API.
func (o *outsider) reached() []string {
	var out []string
	o.paths.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	return out
}

// TestOutsiderCannotTakeThePool has an outsider that holds the sea's key
// and a certificate of the sea (but none for the pool) claim pool fo at an
// ever higher epoch, with its API as the manager's, for as long as the
// pool's jobs take: no member ever follows it (each member's
// /v1/failover names fo-0), nothing of the pool calls its API, and the
// jobs run.
func TestOutsiderCannotTakeThePool(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", failoverPool)
	w.expect(0, "apply", "-auto-approve")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	cm := w.output("cm")
	apis := map[string]string{}
	for _, d := range w.outputs()["nodes"].([]any) {
		m := d.(map[string]any)
		apis[m["name"].(string)] = m["api"].(string)
	}
	eventually(t, 30*time.Second, func() error {
		if m, err := actingManagers(w, cm); err != nil || m["fo-0"] != 1 || len(m) != 1 {
			return fmt.Errorf("acting managers %v (%v), want fo-0 at epoch 1", m, err)
		}
		return nil
	})
	o := startOutsider(t, w, cm, map[string]string{"pool": "fo", "role": "node", "epoch": "99"})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for e := 100; ; e++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			o.setTags(map[string]string{"pool": "fo", "epoch": strconv.Itoa(e)})
		}
	})
	defer func() { close(stop); wg.Wait() }()

	submit := apis["fo-3"]
	w.write("a.sub", failoverSubmit(0, 4))
	w.expect(0, "condor", "submit", "-pool", submit, "a.sub")
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		for name, api := range apis {
			var st struct {
				Manager    string `json:"manager"`
				ManagerAPI string `json:"manager_api"`
			}
			if err := w.getJSON(api, "/v1/failover", &st); err != nil {
				t.Fatalf("%s: GET /v1/failover: %v", name, err)
			}
			if st.Manager == "outsider" || st.ManagerAPI == o.api {
				t.Fatalf("%s follows the outsider: %+v", name, st)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	waitQueueEmpty(t, w, submit)
	if n := outputsDone(w, "out.0."); n != 4 {
		t.Errorf("%d jobs wrote their output, want 4", n)
	}
	if n := o.requests.Load(); n != 0 {
		t.Errorf("the pool called the outsider's API %d times: %v", n, o.reached())
	}
	if m, err := actingManagers(w, cm); err != nil || m["fo-0"] != 1 {
		t.Errorf("acting managers %v (%v), want fo-0 at epoch 1", m, err)
	}
}

// flockAnyPool is a pool of one slot that may flock its jobs to any pool
// of the sea.
const flockAnyPool = `
pool "busy" {
  nodes  = 1
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "2", FLOCK_IDLE_TIME = "2" }
}

flock "any" {
  from = [pool.busy.central_manager]
}

output "busy" {
  value = pool.busy.central_manager
}
`

// TestOutsiderCannotAnnounceAPool has an outsider that holds the sea's
// key and a certificate of the sea announce a pool, evilpool, with idle
// slots, to a pool that may flock anywhere and has more jobs than slots:
// sea flock never lists evilpool, its API is never called, and the jobs
// run in their own pool.
func TestOutsiderCannotAnnounceAPool(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", flockAnyPool)
	w.expect(0, "apply", "-auto-approve")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	busy := w.output("busy")
	spare := func() string {
		return fmt.Sprintf("1:8:8:16384:0:%d", time.Now().Add(time.Hour).Unix())
	}
	o := startOutsider(t, w, busy, map[string]string{"pool": "evilpool", "role": "cm", "flk": spare()})
	w.write("a.sub", `
executable = /bin/sh
arguments  = "-c 'sleep 3; echo done $(Process)'"
output     = out.0.$(Process)
queue 4
`)
	w.expect(0, "condor", "submit", "-pool", busy, "a.sub")
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		r := w.expect(0, "sea", "flock", "-sea", busy)
		if strings.Contains(r.stdout, "evilpool") {
			t.Fatalf("sea flock lists the outsider's pool:\n%s", r.stdout)
		}
		time.Sleep(time.Second)
	}
	waitQueueEmpty(t, w, busy)
	if n := outputsDone(w, "out.0."); n != 4 {
		t.Errorf("%d jobs wrote their output, want 4", n)
	}
	if n := o.requests.Load(); n != 0 {
		t.Errorf("the pool called the outsider's API %d times: %v", n, o.reached())
	}
}

// outputsDone counts the files of w's directory named prefix* that say
// their job is done.
func outputsDone(w *workdir, prefix string) int {
	ents, _ := os.ReadDir(w.dir)
	n := 0
	for _, e := range ents {
		if data, err := os.ReadFile(filepath.Join(w.dir, e.Name())); err == nil && strings.HasPrefix(e.Name(), prefix) && strings.Contains(string(data), "done") {
			n++
		}
	}
	return n
}
