package acceptance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/overlay/api"
	"golang.org/x/sys/unix"
)

// This file builds sites out of Linux network namespaces, as glideins and
// cloud nodes see the network: a hub namespace for the central manager, a
// router namespace, and site namespaces with worker agents behind it,
// routed plainly, behind a firewall or behind NAT (nftables in the router).
// Nothing of it touches the root namespace's network: every interface and
// rule lives in the lab's own namespaces, removed when the test ends.
//
// The addresses are fixed (each lab has namespaces of its own):
//
//	hub     10.250.0.1/24  (hub0)           router 10.250.0.254 (h0)
//	site N  10.250.N.2/24  (eth0)           router 10.250.N.1   (sN)
//
// A test builds the lab first, then the work directory whose pondctl and
// pools run in the hub, then starts workers in the sites by hand:
//
//	lab := newNetLab(t, siteRouted, siteNAT)
//	w := lab.workdir(t)
//	key := gossipKey(t, w)
//	w.write("main.pond.hcl", hubProvider(key)+`pool "p" { ... }`)
//	w.expect(0, "apply", "-auto-approve")
//	a := lab.Sites[1].startAgent(t, w, "w1", labAgentOptions{Pool: "p", CM: CM_API, Join: CM_GOSSIP, Key: key})
//	lab.Sites[1].Cut() // ... lab.Sites[1].Heal()
//
// The test process itself stays in the root namespace: it reaches the
// lab's agents through pondctl (workdir.run) or sockets made in a
// namespace (netLab.Dial, netLab.Listen, inNetns).

// labPrefix begins the name of every namespace a lab creates; the process
// id and a counter follow, so that concurrent runs never share one and a
// later run can tell the namespaces of a killed one.
const labPrefix = "pondlab"

// labHubAddr is the hub's address; labRouterHubAddr the router's address
// on the hub's link, from which a NAT site's connections come.
const (
	labHubAddr       = "10.250.0.1"
	labRouterHubAddr = "10.250.0.254"
)

// siteVariant is how the router treats traffic between the hub and a site.
type siteVariant int

const (
	// siteRouted is plain routing both ways: the hub reaches the site's
	// addresses and the site the hub's.
	siteRouted siteVariant = iota
	// siteFirewall routes both ways, but the router drops every new
	// connection into the site (nft `ct state new drop`): the site's
	// workers open connections out, and only their replies come in.
	siteFirewall
	// siteNAT masquerades the site behind the router's hub address, the
	// hub has no route to the site, and the router drops new connections
	// into it: nothing in the hub can open a connection to a site address.
	siteNAT
)

func (v siteVariant) String() string {
	switch v {
	case siteRouted:
		return "routed"
	case siteFirewall:
		return "firewall"
	case siteNAT:
		return "nat"
	}
	return fmt.Sprintf("siteVariant(%d)", int(v))
}

// netLab is a hub, a router and sites, each a network namespace.
type netLab struct {
	t testing.TB
	// Hub is the hub's namespace, where the central manager runs (see
	// netLab.workdir).
	Hub string
	// Router is the router's namespace, linked to the hub and every site.
	Router string
	// Sites are the lab's sites, in the order newNetLab was given them.
	Sites []*netSite
}

// netSite is one site namespace behind the lab's router.
type netSite struct {
	lab *netLab
	// NS is the site's namespace.
	NS string
	// Variant is how the router treats the site's traffic.
	Variant siteVariant
	// Addr is the site's address: its agents bind to it (each on ports
	// of its own).
	Addr string
	// link is the router's end of the site's link.
	link string
}

// labSeq numbers the labs of this process.
var labSeq atomic.Int64

// needNetns skips the test unless network namespaces can be built here
// (root, ip and nft present); with CI set it fails instead.
func needNetns(t testing.TB) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces need CAP_NET_ADMIN)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian packages iproute2 and nftables)", tool))
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "network-namespace sites need " + strings.Join(missing, ", ")
	testenv.SkipOrFail(t, msg)
}

// newNetLab builds a lab with one site of each variant given (site N is
// variants[N-1]) and removes it when the test ends. Namespaces left by an
// earlier run that was killed are removed first. Call it before
// netLab.workdir, so that the work directory's cleanup (destroy) runs
// while the hub still exists.
func newNetLab(t testing.TB, variants ...siteVariant) *netLab {
	t.Helper()
	needNetns(t)
	removeStaleLabs(t)
	id := fmt.Sprintf("%s%dx%d", labPrefix, os.Getpid(), labSeq.Add(1))
	l := &netLab{t: t, Hub: id + "-hub", Router: id + "-r"}
	t.Cleanup(func() { removeLab(t, id) })
	if out, err := exec.Command("ip", "netns", "add", l.Hub).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("cannot create a network namespace here: ip netns add: %v: %s", err, bytes.TrimSpace(out))
		testenv.SkipOrFail(t, msg)
	}
	l.mustIP("netns", "add", l.Router)
	for _, ns := range []string{l.Hub, l.Router} {
		l.mustIP("-n", ns, "link", "set", "lo", "up")
	}
	l.mustIP("-n", l.Router, "link", "add", "h0", "type", "veth", "peer", "name", "hub0", "netns", l.Hub)
	l.mustIP("-n", l.Hub, "addr", "add", labHubAddr+"/24", "dev", "hub0")
	l.mustIP("-n", l.Hub, "link", "set", "hub0", "up")
	l.mustIP("-n", l.Router, "addr", "add", labRouterHubAddr+"/24", "dev", "h0")
	l.mustIP("-n", l.Router, "link", "set", "h0", "up")
	l.must("ip", "netns", "exec", l.Router, "sysctl", "-qw", "net.ipv4.ip_forward=1")

	var rules strings.Builder
	rules.WriteString("table inet pondlab {\n")
	rules.WriteString("  chain forward {\n    type filter hook forward priority 0; policy accept;\n")
	var nat strings.Builder
	for i, v := range variants {
		n := i + 1
		s := &netSite{lab: l, NS: fmt.Sprintf("%s-s%d", id, n), Variant: v,
			Addr: fmt.Sprintf("10.250.%d.2", n), link: fmt.Sprintf("s%d", n)}
		gw := fmt.Sprintf("10.250.%d.1", n)
		subnet := fmt.Sprintf("10.250.%d.0/24", n)
		l.mustIP("netns", "add", s.NS)
		l.mustIP("-n", s.NS, "link", "set", "lo", "up")
		l.mustIP("-n", l.Router, "link", "add", s.link, "type", "veth", "peer", "name", "eth0", "netns", s.NS)
		l.mustIP("-n", l.Router, "addr", "add", gw+"/24", "dev", s.link)
		l.mustIP("-n", l.Router, "link", "set", s.link, "up")
		l.mustIP("-n", s.NS, "addr", "add", s.Addr+"/24", "dev", "eth0")
		l.mustIP("-n", s.NS, "link", "set", "eth0", "up")
		l.mustIP("-n", s.NS, "route", "add", "default", "via", gw)
		switch v {
		case siteRouted:
			l.mustIP("-n", l.Hub, "route", "add", subnet, "via", labRouterHubAddr)
		case siteFirewall:
			l.mustIP("-n", l.Hub, "route", "add", subnet, "via", labRouterHubAddr)
			fmt.Fprintf(&rules, "    oifname %q ct state new drop\n", s.link)
		case siteNAT:
			fmt.Fprintf(&rules, "    oifname %q ct state new drop\n", s.link)
			fmt.Fprintf(&nat, "    oifname \"h0\" ip saddr %s masquerade\n", subnet)
		}
		l.Sites = append(l.Sites, s)
	}
	rules.WriteString("  }\n")
	if nat.Len() > 0 {
		rules.WriteString("  chain postrouting {\n    type nat hook postrouting priority 100; policy accept;\n")
		rules.WriteString(nat.String())
		rules.WriteString("  }\n")
	}
	rules.WriteString("}\n")
	cmd := exec.Command("ip", "netns", "exec", l.Router, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v\n%s\n%s", l.Router, err, out, rules.String())
	}
	return l
}

// must runs a command and fails the test if it fails.
func (l *netLab) must(name string, args ...string) {
	l.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func (l *netLab) mustIP(args ...string) { l.t.Helper(); l.must("ip", args...) }

// removeLab kills what still runs in the namespaces of lab id and removes
// them.
func removeLab(t testing.TB, id string) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Errorf("ip netns list: %v", err)
		return
	}
	for _, ns := range labNamespaces(string(out)) {
		if ns != id && !strings.HasPrefix(ns, id+"-") {
			continue
		}
		if pids := netnsPIDs(ns); len(pids) > 0 {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("%d process(es) still ran in %s at its removal: %v", len(pids), ns, pids)
		}
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	}
}

// removeStaleLabs removes the namespaces of labs whose process is gone
// (a test run killed before its cleanup), with what still runs in them.
func removeStaleLabs(t testing.TB) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, ns := range labNamespaces(string(out)) {
		rest := strings.TrimPrefix(ns, labPrefix)
		pid, err := strconv.Atoi(rest[:strings.IndexByte(rest+"x", 'x')])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue // not ours, this run's, or its run still lives
		}
		for _, p := range netnsPIDs(ns) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Logf("removing stale namespace %s: %v\n%s", ns, err, out)
		} else {
			t.Logf("removed stale namespace %s of a killed run", ns)
		}
	}
}

// labNamespaces picks the lab namespaces out of `ip netns list`.
func labNamespaces(list string) []string {
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], labPrefix) {
			names = append(names, f[0])
		}
	}
	return names
}

// netnsPIDs lists the processes in namespace ns.
func netnsPIDs(ns string) []int {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		// This process has a socket or a thread there, not a process.
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() && !isZombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// workdir is an empty work directory whose pondctl runs in the hub (ip
// netns exec), as do the agents its applies start. Write its pools with
// hubProvider's provider block.
func (l *netLab) workdir(t testing.TB) *workdir {
	w := newWorkdir(t, "")
	w.netns = l.Hub
	return w
}

// hubProvider is the local provider block of a lab's work directory: its
// agents bind to the hub's address, gossip encrypted with key and with the
// LAN profile, as agents on separate hosts would.
func hubProvider(key string) string {
	return fmt.Sprintf(`
provider "local" {
  bind_address   = %q
  encrypt        = %q
  gossip_profile = "lan"
}
`, labHubAddr, key)
}

// gossipKey makes a gossip encryption key with `pondctl sea keygen`.
func gossipKey(t testing.TB, w *workdir) string {
	t.Helper()
	return strings.TrimSpace(w.expect(0, "sea", "keygen").stdout)
}

// labPool applies, in a new work directory of lab, the pool name of one
// node, its central manager, in the hub; body is what the pool block
// holds besides `nodes = 1` (slots, config). It returns the work
// directory, the central manager's API address and the options with
// which startAgent joins a worker to the pool.
func labPool(t testing.TB, lab *netLab, name, body string) (*workdir, string, labAgentOptions) {
	t.Helper()
	w := lab.workdir(t)
	key := gossipKey(t, w)
	w.write("main.pond.hcl", hubProvider(key)+fmt.Sprintf(`
pool %[1]q {
  nodes = 1
  %[2]s
}

output "cm" {
  value = pool.%[1]s.central_manager
}

output "gossip" {
  value = pool.%[1]s.node_details[0].gossip
}
`, name, body))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	return w, cm, labAgentOptions{Pool: name, CM: cm, Join: w.output("gossip"), Key: key}
}

// logOnFailure shows, if t fails, the jobs of the pool at cm and the end
// of the logs of the agents agents lists then.
func logOnFailure(t *testing.T, w *workdir, cm string, agents func() []*labAgent) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		describeJobs(t, w, cm)
		for _, a := range agents() {
			if a != nil {
				t.Logf("--- %s\n%s", a.Name, tail(filepath.Join(a.Dir, "agent.log")))
			}
		}
	})
}

// serve accepts connections on ln until ln is closed, hands each to
// handle (when not nil) and closes it.
func serve(ln net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if handle != nil {
				handle(c)
			}
			c.Close()
		}
	}()
}

// Command is cmd run in namespace ns with `ip netns exec` (which execs
// it: the process is cmd's own, not a wrapper's).
func (l *netLab) Command(ns, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// inNetns runs f on a thread that has entered namespace ns, then returns
// the thread to the namespace it came from (a thread that cannot return is
// left locked, so that it ends with its goroutine). Sockets f creates stay
// in ns for their life, whichever thread uses them later.
func inNetns(ns string, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- err
			return
		}
		defer home.Close()
		target, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			done <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		err = f()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// Dial opens a TCP connection to addr from namespace ns, giving up after
// timeout. A function of this shape serves as an http.Transport's
// DialContext for clients in a namespace.
func (l *netLab) Dial(ns, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return c, err
}

// Listen listens on TCP addr in namespace ns; the listener is closed when
// the test ends.
func (l *netLab) Listen(ns, addr string) net.Listener {
	l.t.Helper()
	var ln net.Listener
	if err := inNetns(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { ln.Close() })
	return ln
}

// Cut takes the site's link down at the router: the site and the rest of
// the lab no longer reach each other, and the site's agents keep running.
func (s *netSite) Cut() {
	s.lab.t.Helper()
	s.lab.mustIP("-n", s.lab.Router, "link", "set", s.link, "down")
}

// Heal brings the site's link up again after Cut.
func (s *netSite) Heal() {
	s.lab.t.Helper()
	s.lab.mustIP("-n", s.lab.Router, "link", "set", s.link, "up")
}

// labAgent is a worker agent started by hand in a site, as an operator
// starts one on a node the local provider does not manage.
type labAgent struct {
	// Name is the node's name in the sea.
	Name string
	// Dir is its data directory (inside the work directory, so that the
	// work directory's cleanup finds an agent that outlived the test).
	Dir string
	// Info is what the agent recorded of its addresses once it was up.
	Info *api.Info
	cmd  *exec.Cmd
	done chan struct{}
}

// labAgentOptions is how startAgent starts an agent.
type labAgentOptions struct {
	// Pool is the pool the agent joins; CM is its central manager's API
	// address and Join a gossip address of the sea.
	Pool, CM, Join string
	// Key is the sea's gossip key.
	Key string
	// Knobs are written to the agent's configuration file (NUM_SLOTS,
	// UPDATE_INTERVAL, ...).
	Knobs map[string]string
	// Args are more arguments of `pondctl agent`.
	Args []string
}

// startAgent starts `pondctl agent` (POND_BIN) named name in site s for
// test t, with the credentials an operator gives a node by hand, made in
// the work directory w: a node token (`pondctl token create -subject
// node/NAME -scope DAEMON,SEA_READ`), a certificate of the sea's CA
// (`pondctl cert create -pool`), the authority's trusted keys and issuer. It
// waits until the agent is up, and stops it when t ends (before w's
// destroy, since it is started after w was made). The agent binds the
// site's address and decides how it is reached (-reach auto, unless
// o.Args says otherwise): in a routed site directly; in a firewalled or
// NAT site, which the hub cannot connect into, through its central
// manager as its relay, whose addresses it then advertises.
func (s *netSite) startAgent(t testing.TB, w *workdir, name string, o labAgentOptions) *labAgent {
	t.Helper()
	dir := filepath.Join(w.dir, "sites", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Token  string `json:"token"`
		Issuer string `json:"issuer"`
	}
	r := w.expect(0, "token", "create", "-subject", "node/"+name, "-scope", "DAEMON,SEA_READ", "-lifetime", "2h", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil {
		t.Fatalf("token create -json: %v\n%s", err, r.stdout)
	}
	tokenFile := filepath.Join(dir, "node.token")
	if err := os.WriteFile(tokenFile, []byte(tok.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsFlags := strings.Fields(w.expect(0, "cert", "create", "-name", name, "-pool", o.Pool, "-host", s.Addr, "-dir", dir).stdout)
	var conf bytes.Buffer
	for k, v := range o.Knobs {
		fmt.Fprintf(&conf, "%s = %s\n", k, v)
	}
	confFile := filepath.Join(dir, "condor_config")
	if err := os.WriteFile(confFile, conf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"agent",
		"-name", name,
		"-config", confFile,
		"-data-dir", dir,
		"-bind", net.JoinHostPort(s.Addr, "0"),
		"-api", net.JoinHostPort(s.Addr, "0"),
		"-join", o.Join,
		"-encrypt", o.Key,
		"-gossip-profile", "lan",
		"-pool", o.Pool,
		"-condor-host", o.CM,
		"-role", api.RoleNode,
		"-trusted-keys", filepath.Join(w.dir, ".pond", "auth", auth.TrustedKeysFile),
		"-token-issuer", tok.Issuer,
		"-token-file", tokenFile,
	}
	args = append(append(args, tlsFlags...), o.Args...)
	logf, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := s.lab.Command(s.NS, pondBin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting agent %s in %s: %v", name, s.NS, err)
	}
	a := &labAgent{Name: name, Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	t.Cleanup(a.stop)
	deadline := time.Now().Add(30 * time.Second)
	for a.Info == nil {
		select {
		case <-a.done:
			t.Fatalf("agent %s exited: %s\n%s", name, cmd.ProcessState, tail(filepath.Join(dir, "agent.log")))
		case <-time.After(100 * time.Millisecond):
		}
		if info, err := api.ReadInfo(dir); err == nil && info.PID == cmd.Process.Pid {
			a.Info = info
		} else if time.Now().After(deadline) {
			t.Fatalf("agent %s not up after 30 s\n%s", name, tail(filepath.Join(dir, "agent.log")))
		}
	}
	return a
}

// PID is the agent's process id.
func (a *labAgent) PID() int { return a.cmd.Process.Pid }

// stop stops the agent (SIGTERM, SIGKILL after 15 s) and waits for it.
func (a *labAgent) stop() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	}
}

// tail is the end of a log file, for a failure's message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// descendants lists the live processes descending from pid (a worker
// agent's jobs and what they started).
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		for _, c := range children[p] {
			out = append(out, c)
			todo = append(todo, c)
		}
	}
	return out
}

// TestNetnsSites proves that each variant of site does what it says: a
// site reaches the hub; the hub reaches a routed site, but opens no
// connection into a firewalled or NAT site; the hub sees a NAT site's
// connections come from the router; a cut link stops the traffic and a
// healed one lets it through again.
func TestNetnsSites(t *testing.T) {
	t.Parallel()
	lab := newNetLab(t, siteRouted, siteFirewall, siteNAT)
	hubLn := lab.Listen(lab.Hub, net.JoinHostPort(labHubAddr, "0"))
	var mu sync.Mutex
	var peers []string
	serve(hubLn, func(c net.Conn) {
		mu.Lock()
		peers = append(peers, c.RemoteAddr().(*net.TCPAddr).IP.String())
		mu.Unlock()
		// The reply must come back through the router (ct state
		// established, or NAT's reverse translation).
		c.Write([]byte("hub\n"))
	})
	for _, s := range lab.Sites {
		t.Run(s.Variant.String(), func(t *testing.T) {
			siteLn := lab.Listen(s.NS, net.JoinHostPort(s.Addr, "0"))
			serve(siteLn, nil)
			// Out of the site: always.
			c, err := lab.Dial(s.NS, hubLn.Addr().String(), 3*time.Second)
			if err != nil {
				t.Fatalf("the site cannot reach the hub: %v", err)
			}
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, 4)
			if _, err := c.Read(buf); err != nil || string(buf) != "hub\n" {
				t.Errorf("the hub's reply did not reach the site: %q %v", buf, err)
			}
			c.Close()
			mu.Lock()
			from := peers[len(peers)-1]
			mu.Unlock()
			wantFrom := s.Addr
			if s.Variant == siteNAT {
				wantFrom = labRouterHubAddr
			}
			if from != wantFrom {
				t.Errorf("the hub saw the site's connection come from %s, want %s", from, wantFrom)
			}

			// Into the site: only when routed.
			c, err = lab.Dial(lab.Hub, siteLn.Addr().String(), 2*time.Second)
			if c != nil {
				c.Close()
			}
			if reached := err == nil; reached != (s.Variant == siteRouted) {
				t.Errorf("the hub connecting to the site's %s: err %v", siteLn.Addr(), err)
			}
			// A cut link stops even the site's own connections out.
			s.Cut()
			if c, err := lab.Dial(s.NS, hubLn.Addr().String(), 2*time.Second); err == nil {
				c.Close()
				t.Error("the site reached the hub through a cut link")
			}
			s.Heal()
			eventually(t, 10*time.Second, func() error {
				c, err := lab.Dial(s.NS, hubLn.Addr().String(), 2*time.Second)
				if err != nil {
					return fmt.Errorf("the site does not reach the hub after the heal: %w", err)
				}
				c.Close()
				return nil
			})
		})
	}
}

// TestNATSiteAgent starts a worker agent by hand in a NAT site and leaves
// it to decide how it is reached (-reach auto, the default): its central
// manager cannot connect back to the worker's own address in the site, so
// the worker goes through it as its relay and advertises the relay's
// addresses. Nothing in the hub can open a connection to the worker's own
// address, the sea says it is reached in reverse through its relay
// (pondctl sea members, PondReach, PondRelay), and jobs run on it.
func TestNATSiteAgent(t *testing.T) {
	t.Parallel()
	lab := newNetLab(t, siteNAT)
	site := lab.Sites[0]
	w, cm, opts := labPool(t, lab, "nat", relayPoolConfig)
	opts.Knobs = map[string]string{"NUM_SLOTS": "2", "UPDATE_INTERVAL": "2"}
	a := site.startAgent(t, w, "nat-w1", opts)

	// The worker tried its own address in the site, and the hub could not
	// connect to it.
	own := relayCheckAddr(t, a)
	if host, _, _ := net.SplitHostPort(own); host != site.Addr {
		t.Errorf("the worker's connect-back check was for %s, want an address of the site (%s)", own, site.Addr)
	}
	for _, addr := range []string{a.Info.API, a.Info.Gossip} {
		if host, _, _ := net.SplitHostPort(addr); host != labHubAddr {
			t.Errorf("the relayed worker advertises %s, want an address of its relay in the hub (%s)", addr, labHubAddr)
		}
	}
	// In relay mode the worker listens on nothing of its own: a listener
	// on its address in the site takes that place, reached from the site
	// and from nowhere in the hub.
	serve(lab.Listen(site.NS, own), nil)
	if c, err := lab.Dial(site.NS, own, 2*time.Second); err != nil {
		t.Errorf("the site cannot connect to %s itself: %v", own, err)
	} else {
		c.Close()
	}
	if c, err := lab.Dial(lab.Hub, own, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("the hub opened a connection to the NAT worker's own address %s", own)
	}

	expectRelayed(t, w, cm, "nat-0", "nat-w1")
	runRelayedJobs(t, w, cm, "nat", `PondReach =?= "reverse" && PondRelay =?= "nat-0"`, 2)
}

// relayCheckAddr is the address of its own that agent a asked its relay
// candidate to connect back to, and that the candidate could not reach,
// as a's log says.
func relayCheckAddr(t *testing.T, a *labAgent) string {
	t.Helper()
	log := readFile(t, filepath.Join(a.Dir, "agent.log"))
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "cannot connect to this node") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if addr, ok := strings.CutPrefix(f, "api="); ok {
				return addr
			}
		}
	}
	t.Fatalf("%s's log does not say the relay candidate could not connect back to it:\n%s", a.Name, tail(filepath.Join(a.Dir, "agent.log")))
	return ""
}
