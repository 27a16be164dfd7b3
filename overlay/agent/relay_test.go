package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/reach"
)

// relaySea is a sea of agents that check tokens and speak TLS, as the
// local provider starts them: what a relay requires.
type relaySea struct {
	t       testing.TB
	ca      *auth.Authority
	key     *auth.SigningKey
	trusted string
	conf    string
	tls     *tls.Config
}

func newRelaySea(t testing.TB) *relaySea {
	t.Helper()
	s := &relaySea{t: t, ca: testAuthority(t), key: mustKey(t)}
	dir := t.TempDir()
	s.trusted = filepath.Join(dir, auth.TrustedKeysFile)
	if err := auth.WritePublicKeys(s.trusted, s.key.Public()); err != nil {
		t.Fatal(err)
	}
	s.conf = filepath.Join(dir, "condor_config")
	// The jobs record their runs in the host's /tmp, not a private one
	// (MOUNT_UNDER_SCRATCH empty). A claim outlives 20 s without word
	// (ALIVE_INTERVAL x MAX_CLAIM_ALIVES_MISSED): a dropped tunnel must
	// not cost the running job its claim, however loaded the machine
	// that attaches it again.
	if err := os.WriteFile(s.conf, []byte("NEGOTIATOR_INTERVAL = 1\nNEGOTIATOR_MIN_INTERVAL = 0\nUPDATE_INTERVAL = 1\n"+
		"STARTER_POLL_INTERVAL = 0.1s\nNUM_CPUS = 1\nALIVE_INTERVAL = 2\nMAX_CLAIM_ALIVES_MISSED = 10\nMOUNT_UNDER_SCRATCH =\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if s.tls, err = auth.ClientTLS(s.ca.CAFile(), "", ""); err != nil {
		t.Fatal(err)
	}
	return s
}

// mint makes a token of the sea.
func (s *relaySea) mint(c auth.Claims) string {
	s.t.Helper()
	c.Issuer, c.Expires = "sea-1", time.Now().Add(time.Hour)
	c.ID = strconv.FormatInt(time.Now().UnixNano(), 36)
	tok, err := auth.Mint(s.key, c)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// config is the configuration of the agent name, with its certificate
// and its node token.
func (s *relaySea) config(cfg *Config) *Config {
	s.t.Helper()
	withCert(s.t, s.ca, cfg)
	tokenFile := filepath.Join(s.t.TempDir(), "node.token")
	tok := s.mint(auth.Claims{Subject: "node/" + cfg.Name, Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}})
	if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	cfg.TokenFile, cfg.TrustedKeys, cfg.TokenIssuer, cfg.ConfigFile = tokenFile, s.trusted, "sea-1", s.conf
	cfg.Bind, cfg.API, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", s.t.TempDir()
	// The local profile, not the fast one: a tunnel's reconnection is
	// not taken for a failure, as on a LAN.
	cfg.GossipProfile = "local"
	return cfg
}

// start runs an agent of the sea until the test ends.
func (s *relaySea) start(cfg *Config) *Agent {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := New(ctx, cfg, nil)
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	s.t.Cleanup(func() { cancel(); <-done })
	return a
}

// client is an API client of agent addr holding a token of scopes.
func (s *relaySea) client(addr string, scopes ...auth.Scope) *api.Client {
	return api.NewClient(addr).WithTLS(s.tls).WithToken(s.mint(auth.Claims{Subject: "tester", Scopes: scopes}))
}

// TestRelayedWorker runs a pool whose worker is reached only through its
// central manager: the sea sees the worker at the relay's addresses and
// says how it is reached, tree queries reach it, a job with an input
// file and an output runs on it, and when the relay drops the tunnel in
// the middle of a second job the worker attaches again and the job
// completes, run once.
func TestRelayedWorker(t *testing.T) {
	t.Parallel()
	sea := newRelaySea(t)
	cm := sea.start(sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"}))
	wcfg := sea.config(&Config{Name: "w1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr(), Reach: ReachRelay})
	wcfg.Join = []string{cm.Sea().GossipAddr()}
	w := sea.start(wcfg)
	ctx := t.Context()

	tun := w.Tunnel()
	if tun == nil || w.Reach() != "reverse" || w.RelayName() != "cm" {
		t.Fatalf("the worker's reach is %q, its relay %q", w.Reach(), w.RelayName())
	}
	addrs := tun.Addrs()
	if w.APIAddr() != addrs.API || w.Sea().GossipAddr() != addrs.Gossip || w.tree.Addr() != addrs.Tree {
		t.Errorf("the worker serves on %s, %s, %s; its relay addresses are %+v", w.APIAddr(), w.Sea().GossipAddr(), w.tree.Addr(), addrs)
	}
	if h := reach.Host(addrs.API); h != reach.Host(cm.APIAddr()) {
		t.Errorf("the relay serves the worker on host %s, its own API on %s", h, reach.Host(cm.APIAddr()))
	}
	reader := sea.client(cm.APIAddr(), auth.SeaRead)
	waitFor(t, 20*time.Second, "cm to see w1 alive behind the relay", func() error {
		ms, err := reader.Members(ctx, api.MembersFilter{})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Name == "w1" {
				if m.Status != api.StatusAlive || m.GossipAddr() != addrs.Gossip || m.Reach != "reverse" || m.Relay != "cm" ||
					api.Reach(m) != "reverse" || api.Relay(m) != "cm" || m.Tags[api.TagAPI] != addrs.API {
					return fmt.Errorf("w1 is %+v (%s, %s)", m, api.Reach(m), api.Relay(m))
				}
				return nil
			}
		}
		return fmt.Errorf("w1 not among %d members", len(ms))
	})
	// The worker's API answers through the relay, with TLS end to end.
	self, err := sea.client(addrs.API, auth.SeaRead).Self(ctx)
	if err != nil || self.Name != "w1" || self.Reach != "reverse" || self.Relay != "cm" {
		t.Fatalf("w1's /v1/self through the relay: %+v, %v", self, err)
	}
	// A tree query from the central manager reaches the worker.
	waitFor(t, 20*time.Second, "a tree query to match w1", func() error {
		ans, err := reader.Query(ctx, api.Query{Requirements: `PondReach == "reverse" && PondRelay == "cm"`})
		if err != nil {
			return err
		}
		if got := matchNames(ans); got != "w1" {
			return fmt.Errorf("matched %q", got)
		}
		return nil
	})

	owner := "root"
	if u, err := user.Current(); err == nil {
		owner = u.Username
	}
	sc := wire.NewClient(cm.APIAddr(), sea.mint(auth.Claims{Subject: owner, Scopes: []auth.Scope{auth.Write}})).WithTLS(sea.tls).Schedd()
	work := t.TempDir()
	os.Chmod(work, 0o777)
	if err := os.WriteFile(filepath.Join(work, "in.txt"), []byte("through the relay\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The job may run as another account (a startd running as root runs
	// it as nobody): it records its runs in a file all may write.
	runDir, err := os.MkdirTemp("", "relay-runs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	os.Chmod(runDir, 0o777)
	runs := filepath.Join(runDir, "runs")
	if err := os.WriteFile(runs, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(runs, 0o666)
	script := filepath.Join(work, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho run >> "+runs+"\nsleep \"$1\"\ncat in.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	submit := func(sleep, out string) int {
		t.Helper()
		nc, err := sc.NewCluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		job := wire.Ad{"Cmd": strconv.Quote(script), "Arguments": strconv.Quote(sleep), "Iwd": strconv.Quote(work),
			"TransferInput": `"in.txt"`, "ShouldTransferFiles": `"YES"`, "WhenToTransferOutput": `"ON_EXIT"`,
			"Out": strconv.Quote(out), "Err": strconv.Quote(out + ".err"), "RequestMemory": "16", "RequestCpus": "1", "RequestDisk": "1024",
			"Requirements": `PondReach == "reverse" && PondRelay == "cm"`, "JobUniverse": "5"}
		if _, err := sc.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{job}}); err != nil {
			t.Fatal(err)
		}
		return nc.Cluster
	}
	// waitDone waits for the job of cluster to complete and checks its
	// output.
	waitDone := func(cluster int, out string) {
		t.Helper()
		waitFor(t, 90*time.Second, fmt.Sprintf("job %d to complete", cluster), func() error {
			done, err := sc.History(ctx, &wire.QueryJobsRequest{Constraint: fmt.Sprintf("ClusterId == %d", cluster), Projection: []string{"JobStatus", "RemoteHost", "LastRemoteHost"}})
			if err != nil {
				return err
			}
			if len(done) != 1 {
				q, _ := sc.Queue(ctx, &wire.QueryJobsRequest{})
				return fmt.Errorf("history %v, queue %v", done, q)
			}
			if done[0].Ad["JobStatus"] != "4" {
				return fmt.Errorf("job %v", done[0].Ad)
			}
			return nil
		})
		b, err := os.ReadFile(filepath.Join(work, out))
		if err != nil || string(b) != "through the relay\n" {
			t.Errorf("job %d's output %q, %v; want its input file", cluster, b, err)
		}
	}
	waitDone(submit("0", "first.out"), "first.out")
	if b, err := os.ReadFile(runs); err != nil || string(b) != "run\n" {
		e, _ := os.ReadFile(filepath.Join(work, "first.out.err"))
		t.Fatalf("after the first job, runs: %q, %v; the job's stderr %q", b, err, e)
	}

	// The relay drops the tunnel while the second job runs.
	cluster := submit("6", "second.out")
	waitFor(t, 60*time.Second, "the second job to start", func() error {
		b, _ := os.ReadFile(runs)
		if strings.Count(string(b), "run") < 2 {
			return fmt.Errorf("runs %q", b)
		}
		return nil
	})
	before := tun.Attaches()
	// The relay lists the worker; an administrator drops its tunnel, as a
	// network fault would.
	ws, err := reader.RelayWorkers(ctx)
	if err != nil || len(ws) != 1 || ws[0].Name != "w1" || !ws[0].Connected || ws[0].Addrs != addrs {
		t.Fatalf("the relay's workers: %+v, %v", ws, err)
	}
	if err := reader.RelayDrop(ctx, "w1"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a drop with SEA_READ: %v, want 403", err)
	}
	if err := sea.client(cm.APIAddr(), auth.SeaAdmin).RelayDrop(ctx, "w1"); err != nil {
		t.Fatalf("the relay had no tunnel of w1 to drop: %v", err)
	}
	waitFor(t, 10*time.Second, "w1 to attach again", func() error {
		if tun.Attaches() <= before || !tun.Connected() {
			return fmt.Errorf("attaches %d, connected %v", tun.Attaches(), tun.Connected())
		}
		return nil
	})
	if tun.Addrs() != addrs {
		t.Errorf("after reconnecting the worker has %+v, want %+v", tun.Addrs(), addrs)
	}
	waitDone(cluster, "second.out")
	if b, _ := os.ReadFile(runs); strings.Count(string(b), "run") != 2 {
		t.Errorf("the jobs ran %d times, want 2 (once each): %q", strings.Count(string(b), "run"), b)
	}
	ms, err := reader.Members(ctx, api.MembersFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == "w1" && m.Status != api.StatusAlive {
			t.Errorf("after the reconnection cm sees w1 %s", m.Status)
		}
	}
}

// TestRelayedFreeNodeJoinsAPond invites a free node reached through a
// relay into a pond and releases it, through its relay address.
func TestRelayedFreeNodeJoinsAPond(t *testing.T) {
	t.Parallel()
	sea := newRelaySea(t)
	cm := sea.start(sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"}))
	// ReachReverse, the name the sea shows, is a synonym of ReachRelay.
	wcfg := sea.config(&Config{Name: "free", Role: "node", Relay: cm.APIAddr(), Reach: api.ReachReverse})
	wcfg.Join = []string{cm.Sea().GossipAddr()}
	w := sea.start(wcfg)
	ctx := t.Context()
	if w.Reach() != "reverse" || w.RelayName() != "cm" {
		t.Fatalf("reach %q, relay %q", w.Reach(), w.RelayName())
	}
	grant := sea.mint(auth.Claims{Subject: "pondctl", Scopes: []auth.Scope{auth.SeaWrite}, CentralManager: cm.APIAddr(), PondID: "p1"})
	c := api.NewClient(w.APIAddr()).WithTLS(sea.tls).WithToken(grant)
	reply, err := c.Invite(ctx, api.Invitation{Pond: "burst", PondID: "p1", CentralManager: cm.APIAddr()})
	if err != nil || !reply.Accepted {
		t.Fatalf("invitation through the relay: %+v, %v", reply, err)
	}
	if w.CondorHost() != cm.APIAddr() || w.members.Current() == nil {
		t.Fatalf("after the invitation: CONDOR_HOST %s, membership %+v", w.CondorHost(), w.members.Current())
	}
	res, err := c.Release(ctx, "p1", api.Drain{Mode: api.DrainEvict})
	if err != nil || !res.Released {
		t.Fatalf("release through the relay: %+v, %v", res, err)
	}
	if w.members.Current() != nil {
		t.Errorf("still a member after the release: %+v", w.members.Current())
	}
}

// listeningSockets lists the listening TCP sockets and the UDP sockets
// the process pid holds, from /proc.
func listeningSockets(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, proto))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			if strings.HasPrefix(proto, "udp") || f[3] == "0A" {
				out = append(out, proto+" "+f[1])
			}
		}
	}
	return out
}

// TestRelayedWorkerListensNowhere runs a worker in relay mode as a process
// of its own: it holds no listening TCP socket and no UDP socket, yet its
// API answers at its address on the relay. The same look at this test's
// own process, which hosts the relay, finds its listeners.
func TestRelayedWorkerListensNowhere(t *testing.T) {
	sea := newRelaySea(t)
	cm := sea.start(sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"}))
	if got := listeningSockets(t, os.Getpid()); len(got) < 3 {
		t.Fatalf("this process, which serves a central manager, shows listeners %v", got)
	}
	wcfg := sea.config(&Config{Name: "w1"})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-name", "w1", "-pool", "campus", "-condor-host", cm.APIAddr(), "-reach", "relay",
		"-join", cm.Sea().GossipAddr(), "-data-dir", wcfg.DataDir, "-config", wcfg.ConfigFile, "-gossip-profile", "local",
		"-trusted-keys", wcfg.TrustedKeys, "-token-issuer", wcfg.TokenIssuer, "-token-file", wcfg.TokenFile,
		"-tls-cert", wcfg.TLSCert, "-tls-key", wcfg.TLSKey, "-tls-ca", wcfg.TLSCA)
	cmd.Env = append(os.Environ(), execEnv+"=1")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("w1's log:\n%s", log.String())
		}
	})
	var self *api.Self
	waitFor(t, 30*time.Second, "w1 to answer through the relay", func() error {
		info, err := api.ReadInfo(wcfg.DataDir)
		if err != nil {
			return err
		}
		self, err = sea.client(info.API, auth.SeaRead).Self(t.Context())
		return err
	})
	if self.Name != "w1" || self.Reach != "reverse" || self.Relay != "cm" || reach.Host(self.API) != reach.Host(cm.APIAddr()) {
		t.Fatalf("w1 says %+v", self)
	}
	if got := listeningSockets(t, cmd.Process.Pid); len(got) != 0 {
		t.Errorf("the relayed worker holds listening sockets %v", got)
	}
}

// TestReachAuto: an agent left to decide asks its central manager to
// connect back to its API address, and is reached directly when it can
// and through the relay when it cannot.
func TestReachAuto(t *testing.T) {
	t.Parallel()
	sea := newRelaySea(t)
	cm := sea.start(sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"}))
	wcfg := sea.config(&Config{Name: "w1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr(), Reach: ReachAuto})
	wcfg.Join = []string{cm.Sea().GossipAddr()}
	w := sea.start(wcfg)
	if w.Reach() != ReachDirect || w.Tunnel() != nil {
		t.Fatalf("an agent the relay reaches is %q", w.Reach())
	}
	// The check tested the tree and gossip ports it serves on, besides
	// its API port.
	if w.treeLn == nil || w.tree.Addr() != w.treeLn.Addr().String() {
		t.Errorf("w1 serves tree queries on %s, not on the port the check tested (%v)", w.tree.Addr(), w.treeLn)
	}
	if w.gossipBind == "" || w.Sea().GossipAddr() != w.gossipBind {
		t.Errorf("w1 gossips at %s, not at the port the check tested (%q)", w.Sea().GossipAddr(), w.gossipBind)
	}
	// probe asks as w1 would, without touching the running agent.
	probe := w.reachConfig()
	// An address nothing listens on any more: the relay cannot connect.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	got, l := probe.Choose(t.Context(), ln)
	if got != ReachRelay {
		t.Errorf("with an API address the relay cannot reach: %q, want relay", got)
	}
	if l.Tree != nil {
		l.Tree.Close()
	}
	// Without a token to ask with, or without a relay, direct.
	for _, cfg := range []*Config{
		{Name: "w2", Role: "node", CondorHost: cm.APIAddr()},
		{Name: "w3", Role: "node", TokenFile: wcfg.TokenFile},
		{Name: "cm2", Role: "cm", CondorHost: cm.APIAddr(), TokenFile: wcfg.TokenFile},
	} {
		a := &Agent{cfg: cfg, logger: w.logger, token: w.token, clientTLS: w.clientTLS}
		if got, _ := a.reachConfig().Choose(t.Context(), ln); got != ReachDirect {
			t.Errorf("%s: %q, want direct", cfg.Name, got)
		}
	}
	// Another node's token may not ask about w1.
	d := w.reachConfig().Dialer()
	d.Name = "w9"
	if _, err := d.Check(t.Context(), ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a check about w9 with w1's token: %v, want 403", err)
	}
}

// TestRelayRestarts restarts the central manager under a worker it relays
// for: the worker attaches again to the new relay process, which binds the
// same addresses for it, and the sea sees the worker alive at them, with
// no join of the worker's address by the restarted manager.
func TestRelayRestarts(t *testing.T) {
	t.Parallel()
	sea := newRelaySea(t)
	cmCfg := sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"})
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := New(ctx, cmCfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { cm.Run(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	wcfg := sea.config(&Config{Name: "w1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr(), Reach: ReachRelay})
	wcfg.Join = []string{cm.Sea().GossipAddr()}
	w := sea.start(wcfg)
	tun := w.Tunnel()
	addrs := tun.Addrs()

	cancel()
	<-stopped
	waitFor(t, 15*time.Second, "w1 to lose its tunnel", func() error {
		if tun.Connected() {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	before := tun.Attaches()
	again := *cmCfg
	// As a restarted agent does: it joins no one but the nodes of its
	// snapshot, whose rejoin it tries before w1 is attached again; w1
	// joins it again through its tunnel.
	again.API, again.Bind, again.Join = cm.APIAddr(), cm.Sea().GossipAddr(), nil
	cm2 := sea.start(&again)
	waitFor(t, 30*time.Second, "w1 to attach to the new relay", func() error {
		if tun.Attaches() <= before || !tun.Connected() {
			return fmt.Errorf("attaches %d, connected %v", tun.Attaches(), tun.Connected())
		}
		return nil
	})
	if tun.Addrs() != addrs {
		t.Errorf("after the relay's restart the worker has %+v, want %+v", tun.Addrs(), addrs)
	}
	reader := sea.client(cm2.APIAddr(), auth.SeaRead)
	waitFor(t, 30*time.Second, "the new central manager to see w1 alive", func() error {
		ms, err := reader.Members(t.Context(), api.MembersFilter{})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Name == "w1" && m.Status == api.StatusAlive && m.GossipAddr() == addrs.Gossip {
				return nil
			}
		}
		return fmt.Errorf("members %v", ms)
	})
	if self, err := sea.client(addrs.API, auth.SeaRead).Self(t.Context()); err != nil || self.Name != "w1" {
		t.Errorf("w1 through the new relay: %+v, %v", self, err)
	}
}

// TestRelayedWorkerTakesKeyRotation rotates the encrypted sea's gossip key
// from the central manager: the relayed worker answers each step through
// its tunnel, and keeps gossiping with the new key once the old one is
// removed.
func TestRelayedWorkerTakesKeyRotation(t *testing.T) {
	t.Parallel()
	sea := newRelaySea(t)
	oldKey, err := api.GossipKeyGen()
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := api.GossipKeyGen()
	if err != nil {
		t.Fatal(err)
	}
	cmCfg := sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"})
	cmCfg.Encrypt = oldKey
	cm := sea.start(cmCfg)
	wcfg := sea.config(&Config{Name: "w1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr(), Reach: ReachRelay})
	wcfg.Encrypt, wcfg.Join = oldKey, []string{cm.Sea().GossipAddr()}
	w := sea.start(wcfg)
	waitFor(t, 20*time.Second, "cm to see w1", func() error {
		for _, m := range cm.Sea().Members() {
			if m.Name == "w1" && m.Status == api.StatusAlive {
				return nil
			}
		}
		return fmt.Errorf("members %v", cm.Sea().Members())
	})
	for _, step := range []struct {
		name string
		op   func(string) (*api.KeyResult, error)
		key  string
	}{
		{"install", cm.Sea().InstallKey, newKey},
		{"use", cm.Sea().UseKey, newKey},
		{"remove", cm.Sea().RemoveKey, oldKey},
	} {
		res, err := step.op(step.key)
		if err != nil || res.NumNodes != 2 || res.NumResp != 2 || res.NumErr != 0 {
			t.Fatalf("%s: %+v, %v; want both nodes to answer", step.name, res, err)
		}
	}
	// Gossip with the new key only: a tag the worker sets reaches cm.
	if err := w.SetTags(map[string]string{"rotated": "yes"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "cm to see w1's new tag", func() error {
		for _, m := range cm.Sea().Members() {
			if m.Name == "w1" && m.Tags["rotated"] == "yes" && m.Status == api.StatusAlive {
				return nil
			}
		}
		return fmt.Errorf("members %v", cm.Sea().Members())
	})
}
