package acceptance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// relayPool is a local pool whose workers are reached only through the
// central manager.
const relayPool = `
pool "hub" {
  nodes  = 2
  reach  = "relay"
  config = { NEGOTIATOR_INTERVAL = "1", NEGOTIATOR_MIN_INTERVAL = "0", UPDATE_INTERVAL = "2" }
}

output "cm" {
  value = pool.hub.central_manager
}
`

// relaySubmit runs jobs with an input file on the relayed worker only.
const relaySubmit = `
executable           = /bin/sh
arguments            = "-c 'cat in.txt; echo $(Process)'"
transfer_input_files = in.txt
output               = out.$(Process)
log                  = relay.log
requirements         = PondReach =?= "relay via hub-0"
queue 3
`

// seaMembersReach returns how pondctl sea members -json says each member
// is reached, and the Reach column of the table.
func seaMembersReach(t *testing.T, w *workdir, sea string) (map[string]string, string) {
	t.Helper()
	r := w.expect(0, "sea", "members", "-json", "-sea", sea, "-status", "alive")
	var ms []struct {
		Name  string `json:"name"`
		Reach string `json:"reach"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
		t.Fatalf("sea members -json: %v\n%s", err, r.stdout)
	}
	out := map[string]string{}
	for _, m := range ms {
		out[m.Name] = m.Reach
	}
	return out, w.expect(0, "sea", "members", "-sea", sea).stdout
}

// waitJobs waits until the queue of the pool at cm is empty and checks
// that each of n jobs wrote its input and its number once.
func waitJobs(t *testing.T, w *workdir, cm string, n int, input string) {
	t.Helper()
	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if left := strings.Count(r.stdout, "\n"); left > 0 {
			return fmt.Errorf("%d jobs still queued: %s", left, r.stdout)
		}
		return nil
	})
	counts := logEvents(t, filepath.Join(w.dir, "relay.log"))
	for p := range n {
		if got := readFile(t, filepath.Join(w.dir, fmt.Sprintf("out.%d", p))); got != fmt.Sprintf("%s%d\n", input, p) {
			t.Errorf("out.%d = %q", p, got)
		}
		if counts["005"][p] != 1 || counts["001"][p] != 1 {
			t.Errorf("job 1.%d: %d execute and %d terminate events, want one of each", p, counts["001"][p], counts["005"][p])
		}
	}
}

// TestRelayPool applies a pool whose worker is reached through its central
// manager (reach = "relay"): pondctl sea members says so, a tree query
// finds the worker by its PondReach, and jobs with an input file run on it.
func TestRelayPool(t *testing.T) {
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", relayPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	eventually(t, 30*time.Second, func() error {
		reach, table := seaMembersReach(t, w, cm)
		if reach["hub-0"] != "direct" || reach["hub-1"] != "relay via hub-0" {
			return fmt.Errorf("reach %v", reach)
		}
		if !strings.Contains(table, "relay via hub-0") || !strings.Contains(table, "Reach") {
			return fmt.Errorf("table:\n%s", table)
		}
		return nil
	})
	r := w.expect(0, "sea", "query", "-sea", cm, "-requirements", `PondReach =?= "relay via hub-0"`, "-json")
	if !strings.Contains(r.stdout, "hub-1") || strings.Contains(r.stdout, `"hub-0"`) {
		t.Errorf("tree query for the relayed worker:\n%s", r.stdout)
	}
	w.write("in.txt", "in ")
	w.write("relay.sub", relaySubmit)
	w.expect(0, "condor", "submit", "-pool", cm, "relay.sub")
	waitJobs(t, w, cm, 3, "in ")

	// The operator sees the central manager's tunnels and may drop one.
	if r := w.expect(0, "sea", "relays", "-sea", cm); !strings.Contains(r.stdout, "hub-1") || !strings.Contains(r.stdout, "attached") {
		t.Errorf("sea relays:\n%s", r)
	}
	if r := w.expect(0, "sea", "relays", "-sea", cm, "-drop", "hub-1"); !strings.Contains(r.stdout, "Dropped the tunnel of hub-1") {
		t.Errorf("sea relays -drop:\n%s", r)
	}
	if r := w.expect(1, "sea", "relays", "-sea", cm, "-drop", "nobody"); !strings.Contains(r.stderr, "holds no tunnel of nobody") {
		t.Errorf("sea relays -drop nobody:\n%s", r)
	}
	eventually(t, 15*time.Second, func() error {
		r := w.run("sea", "relays", "-json", "-sea", cm)
		var ws []api.RelayWorker
		if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || len(ws) != 1 || !ws[0].Connected {
			return fmt.Errorf("sea relays -json: %v\n%s", err, r)
		}
		return nil
	})
}

// site is a network namespace for workers that accept no inbound
// connection, reached from this namespace (where the central manager
// runs, on host) in one of two ways:
//
//   - "firewall": a veth pair links the site to this namespace; the site
//     takes in only established traffic and loopback (nft), so its workers
//     reach the central manager and nothing reaches them.
//   - "nat": the site sits behind a router namespace that masquerades it
//     (nft ... masquerade); this namespace has no route to the site at all.
//
// Workers bind peer.
type site struct {
	ns, host, peer string
}

// needRoot skips a test that needs root and system tools, or fails it
// under CI.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root (network namespaces, nftables)"
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil && why == "" {
			why = "needs " + tool + " (Debian packages iproute2 and nftables)"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI is set, so this is a failure", why)
	}
	t.Skip(why)
}

func sh(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// netns makes a namespace named name, with loopback up, and removes it when
// the test ends; in runs a command in it.
func netns(t *testing.T, name string) (in func(args ...string) string) {
	t.Helper()
	sh(t, "ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	in = func(args ...string) string { return sh(t, append([]string{"ip", "netns", "exec", name}, args...)...) }
	in("ip", "link", "set", "lo", "up")
	return in
}

// newSite makes a site of kind "firewall" or "nat" (see site).
func newSite(t *testing.T, kind string) *site {
	t.Helper()
	id := rand.IntN(200) + 20
	s := &site{ns: fmt.Sprintf("pondsite%d", id), host: fmt.Sprintf("10.231.%d.1", id)}
	hostIf, outIf := fmt.Sprintf("pvh%d", id), fmt.Sprintf("pvo%d", id)
	in := netns(t, s.ns)
	sh(t, "ip", "link", "add", hostIf, "type", "veth", "peer", "name", outIf)
	t.Cleanup(func() { exec.Command("ip", "link", "del", hostIf).Run() })
	sh(t, "ip", "addr", "add", s.host+"/24", "dev", hostIf)
	sh(t, "ip", "link", "set", hostIf, "up")
	outside := fmt.Sprintf("10.231.%d.2", id)
	switch kind {
	case "firewall":
		s.peer = outside
		sh(t, "ip", "link", "set", outIf, "netns", s.ns)
		in("ip", "addr", "add", s.peer+"/24", "dev", outIf)
		in("ip", "link", "set", outIf, "up")
		in("nft", "add", "table", "inet", "site")
		in("nft", "add", "chain", "inet", "site", "input", "{ type filter hook input priority 0 ; policy drop ; }")
		in("nft", "add", "rule", "inet", "site", "input", "iif", "lo", "accept")
		in("nft", "add", "rule", "inet", "site", "input", "ct", "state", "established,related", "accept")
	case "nat":
		router := fmt.Sprintf("pondrouter%d", id)
		rt := netns(t, router)
		sh(t, "ip", "link", "set", outIf, "netns", router)
		rt("ip", "addr", "add", outside+"/24", "dev", outIf)
		rt("ip", "link", "set", outIf, "up")
		inIf, siteIf := fmt.Sprintf("pvi%d", id), fmt.Sprintf("pvs%d", id)
		rt("ip", "link", "add", inIf, "type", "veth", "peer", "name", siteIf)
		rt("ip", "link", "set", siteIf, "netns", s.ns)
		gw := fmt.Sprintf("10.232.%d.1", id)
		s.peer = fmt.Sprintf("10.232.%d.2", id)
		rt("ip", "addr", "add", gw+"/24", "dev", inIf)
		rt("ip", "link", "set", inIf, "up")
		rt("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
		rt("nft", "add", "table", "ip", "nat")
		rt("nft", "add", "chain", "ip", "nat", "postrouting", "{ type nat hook postrouting priority 100 ; }")
		rt("nft", "add", "rule", "ip", "nat", "postrouting", "oifname", outIf, "masquerade")
		in("ip", "addr", "add", s.peer+"/24", "dev", siteIf)
		in("ip", "link", "set", siteIf, "up")
		in("ip", "route", "add", "default", "via", gw)
	default:
		t.Fatalf("site kind %q", kind)
	}
	return s
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestOutboundWorkers runs two worker agents in a site that accepts no
// inbound connection (behind a firewall, or behind NAT), each left to
// decide how it is reached (-reach auto): the central manager cannot
// connect back to them, so they go through it as their relay; the sea sees
// them so, a tree query reaches them, and jobs with input files run on
// them, each once (a hundred behind NAT); a tunnel dropped in the middle
// of a job costs the job nothing.
func TestOutboundWorkers(t *testing.T) {
	needRoot(t, "ip", "nft", "sysctl")
	for _, kind := range []string{"firewall", "nat"} {
		t.Run(kind, func(t *testing.T) { outboundWorkers(t, kind) })
	}
}

func outboundWorkers(t *testing.T, kind string) {
	s := newSite(t, kind)
	w := newWorkdir(t, "")
	key := strings.TrimSpace(w.expect(0, "sea", "keygen").stdout)
	w.write("main.pond.hcl", fmt.Sprintf(`
provider "local" {
  bind_address = %q
  encrypt      = %q
}
`, s.host, key)+strings.Replace(relayPool, "nodes  = 2\n  reach  = \"relay\"", "nodes  = 1", 1))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	// The central manager's trusted keys and issuer, from its command line.
	pids := agentPIDs(w.dir)
	if len(pids) != 1 {
		t.Fatalf("agents of the pool: %v", pids)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	cmArgs := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	flag := func(name string) string {
		for i, a := range cmArgs {
			if a == name && i+1 < len(cmArgs) {
				return cmArgs[i+1]
			}
		}
		t.Fatalf("the central manager has no %s: %v", name, cmArgs)
		return ""
	}
	var gossip string
	eventually(t, 10*time.Second, func() error {
		r := w.run("sea", "members", "-json", "-sea", cm)
		var ms []struct {
			Addr string `json:"addr"`
			Port int    `json:"port"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil || len(ms) != 1 {
			return fmt.Errorf("members %s: %v", r.stdout, err)
		}
		gossip = fmt.Sprintf("%s:%d", ms[0].Addr, ms[0].Port)
		return nil
	})

	workers := []string{"site-1", "site-2"}
	logs := map[string]*lockedBuffer{}
	for _, name := range workers {
		logs[name] = startSiteWorker(t, w, s, name, cm, gossip, key, flag("-trusted-keys"), flag("-token-issuer"))
	}
	eventually(t, 60*time.Second, func() error {
		reach, _ := seaMembersReach(t, w, cm)
		for _, name := range workers {
			if reach[name] != "relay via hub-0" {
				return fmt.Errorf("reach %v", reach)
			}
		}
		return nil
	})
	for _, name := range workers {
		if !strings.Contains(logs[name].String(), "cannot connect to this node's API address") {
			t.Errorf("%s did not say why it chose the relay:\n%s", name, logs[name].String())
		}
	}
	r := w.expect(0, "sea", "query", "-sea", cm, "-requirements", `PondReach =?= "relay via hub-0"`, "-json")
	for _, name := range workers {
		if !strings.Contains(r.stdout, name) {
			t.Errorf("tree query for the relayed workers misses %s:\n%s", name, r.stdout)
		}
	}
	// Behind NAT, as the target has it, a hundred jobs.
	jobs := 12
	if kind == "nat" {
		jobs = 100
	}
	w.write("in.txt", "from the site ")
	w.write("relay.sub", strings.Replace(relaySubmit, "queue 3", fmt.Sprintf("queue %d", jobs), 1))
	t0 := time.Now()
	w.expect(0, "condor", "submit", "-pool", cm, "relay.sub")
	waitJobs(t, w, cm, jobs, "from the site ")
	t.Logf("%d jobs with an input file on two workers behind a relay: %s", jobs, time.Since(t0).Round(time.Millisecond))

	// The relay closes a worker's tunnel in the middle of a job: the worker
	// attaches again, and the job completes, once, without a disconnection.
	w.write("drop.sub", `
executable   = /bin/sh
arguments    = "-c 'sleep 8; echo survived'"
output       = drop.out
log          = drop.log
requirements = PondReach =?= "relay via hub-0"
queue
`)
	w.expect(0, "condor", "submit", "-pool", cm, "drop.sub")
	var victim string
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-constraint", "JobStatus == 2", "-af", "RemoteHost")
		_, node, ok := strings.Cut(strings.Trim(strings.TrimSpace(r.stdout), `"`), "@")
		if !ok || node == "" {
			return fmt.Errorf("not running: %s", r)
		}
		victim = node
		return nil
	})
	cfg, err := auth.FindClientTLS(w.getenv, w.dir)
	if err != nil {
		t.Fatal(err)
	}
	admin := api.NewClient(cm).WithTLS(cfg).WithToken(w.token())
	time.Sleep(2 * time.Second)
	if err := admin.RelayDrop(t.Context(), victim); err != nil {
		t.Fatalf("dropping %s's tunnel: %v", victim, err)
	}
	t.Logf("dropped the tunnel of %s in the middle of its job", victim)
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId")
		if strings.TrimSpace(r.stdout) != "" || r.code != 0 {
			return fmt.Errorf("still queued: %s", r)
		}
		return nil
	})
	if got := readFile(t, filepath.Join(w.dir, "drop.out")); got != "survived\n" {
		t.Errorf("drop.out = %q", got)
	}
	counts := logEvents(t, filepath.Join(w.dir, "drop.log"))
	if counts["001"][0] != 1 || counts["005"][0] != 1 || total(counts["022"]) != 0 || total(counts["024"]) != 0 {
		t.Errorf("the job's events %v: want one execute, one terminate, no disconnection", counts)
	}
	ws, err := admin.RelayWorkers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, rw := range ws {
		if !rw.Connected {
			t.Errorf("%s is not attached again: %+v", rw.Name, ws)
		}
	}
}

// startSiteWorker starts the worker name in site s, with credentials the
// working directory's authority issues, as an operator starts a node by
// hand, and stops it when the test ends; it returns the worker's log.
func startSiteWorker(t *testing.T, w *workdir, s *site, name, cm, gossip, key, trusted, issuer string) *lockedBuffer {
	t.Helper()
	dir := filepath.Join(w.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(w.expect(0, "token", "create", "-subject", "node/"+name, "-scope", "DAEMON,SEA_READ").stdout)
	if err := os.WriteFile(filepath.Join(dir, "node.token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.expect(0, "cert", "create", "-name", name, "-dir", dir)
	if err := os.WriteFile(filepath.Join(dir, "condor_config"), []byte("NUM_CPUS = 2\nUPDATE_INTERVAL = 2\nSTARTER_POLL_INTERVAL = 0.2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	cmd := exec.Command("ip", "netns", "exec", s.ns, pondBin, "agent", "-name", name, "-pool", "hub", "-condor-host", cm,
		"-join", gossip, "-bind", s.peer+":0", "-api", s.peer+":0", "-encrypt", key, "-gossip-profile", "local",
		"-data-dir", filepath.Join(dir, "data"), "-config", filepath.Join(dir, "condor_config"),
		"-trusted-keys", trusted, "-token-issuer", issuer, "-token-file", filepath.Join(dir, "node.token"),
		"-tls-cert", filepath.Join(dir, "tls.crt"), "-tls-key", filepath.Join(dir, "tls.key"), "-tls-ca", filepath.Join(dir, "ca.pem"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, log.String())
		}
	})
	return log
}
