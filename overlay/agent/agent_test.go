package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
)

// The test binary doubles as the agent: with execEnv set it runs Main.
const execEnv = "POND_AGENT_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr, Logging{})
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

type proc struct {
	cmd    *exec.Cmd
	dir    string
	info   *api.Info
	client *api.Client
	log    *bytes.Buffer
	done   chan struct{}
}

func (p *proc) exitCode() int { return p.cmd.ProcessState.ExitCode() }

// startAgent runs an agent named name with its data dir under base and
// waits until its API answers.
func startAgent(t *testing.T, base, name string, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, name)
	all := append([]string{"-name", name, "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0",
		"-data-dir", dir, "-gossip-profile", "fast", "-log-level", "debug"}, args...)
	if !slices.Contains(args, "-trusted-keys") {
		all = append(all, "-insecure-api")
	}
	cmd := exec.Command(exe, all...)
	cmd.Env = append(os.Environ(), execEnv+"=1")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, dir: dir, log: &log, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, log.String())
		}
	})
	waitFor(t, 15*time.Second, name+" ready", func() error {
		select {
		case <-p.done:
			t.Fatalf("%s exited: %s", name, log.String())
		default:
		}
		info, err := api.ReadInfo(dir)
		if err != nil {
			return err
		}
		if info.PID != cmd.Process.Pid {
			return fmt.Errorf("stale agent.json (pid %d)", info.PID)
		}
		p.info, p.client = info, api.NewClient(info.API)
		_, err = p.client.Health(context.Background())
		return err
	})
	return p
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// statusOf returns how observer sees member name ("" when unknown).
func statusOf(t *testing.T, observer *proc, name string) string {
	t.Helper()
	ms, err := observer.client.Members(context.Background(), api.MembersFilter{})
	if err != nil {
		return "error: " + err.Error()
	}
	for _, m := range ms {
		if m.Name == name {
			return m.Status
		}
	}
	return ""
}

func waitStatus(t *testing.T, observer *proc, name, want string) {
	t.Helper()
	waitFor(t, 15*time.Second, fmt.Sprintf("%s to see %s %s", observer.info.Name, name, want), func() error {
		if got := statusOf(t, observer, name); got != want {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
}

func TestMembership(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	a := startAgent(t, base, "a", "-role", "cm", "-pool", "campus", "-attr", "HasMatlab=true", "-attr", "Site=campus")
	b := startAgent(t, base, "b", "-join", a.info.Gossip, "-pool", "campus", "-condor-host", a.info.API)
	c := startAgent(t, base, "c", "-join", a.info.Gossip, "-join", b.info.Gossip)
	for _, obs := range []*proc{a, b, c} {
		for _, n := range []string{"a", "b", "c"} {
			waitStatus(t, obs, n, api.StatusAlive)
		}
	}
	ctx := context.Background()

	self, err := a.client.Self(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if self.Name != "a" || self.Role != "cm" || self.Pool != "campus" || self.CondorHost != a.info.API ||
		self.API != a.info.API || self.Gossip != a.info.Gossip || self.PID != a.cmd.Process.Pid {
		t.Errorf("self = %+v", self)
	}
	if self.Attributes["HasMatlab"] != true || self.Attributes["Site"] != "campus" || self.Attributes["Name"] != "a" {
		t.Errorf("attributes = %v", self.Attributes)
	}
	bs, err := b.client.Self(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bs.Role != "node" || bs.CondorHost != a.info.API || bs.Tags[api.TagCM] != a.info.API {
		t.Errorf("b: role %q condor_host %q tags %v", bs.Role, bs.CondorHost, bs.Tags)
	}

	for _, tc := range []struct {
		filter api.MembersFilter
		want   string
	}{
		{api.MembersFilter{}, "a,b,c"},
		{api.MembersFilter{Status: "alive"}, "a,b,c"},
		{api.MembersFilter{Tags: map[string]string{"role": "cm"}}, "a"},
		{api.MembersFilter{Tags: map[string]string{"pool": "campus"}}, "a,b"},
		{api.MembersFilter{Tags: map[string]string{"pool": ""}}, "c"},
		{api.MembersFilter{Tags: map[string]string{"pool": "campus", "role": "node"}}, "b"},
		{api.MembersFilter{Status: "failed"}, ""},
	} {
		ms, err := c.client.Members(ctx, tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("Members(%+v) = %s, want %s", tc.filter, got, tc.want)
		}
	}

	// Graceful leave: the others see "left" and the agent exits 0.
	if err := c.client.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		t.Fatal("c did not exit after leave")
	}
	if c.exitCode() != 0 {
		t.Errorf("c exit code %d", c.exitCode())
	}
	if _, err := os.Stat(filepath.Join(c.dir, api.InfoFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("agent.json left behind: %v", err)
	}
	waitStatus(t, a, "c", api.StatusLeft)

	// kill -9: the others see "failed".
	b.cmd.Process.Signal(syscall.SIGKILL)
	waitStatus(t, a, "b", api.StatusFailed)
}

func TestSignalLeavesAndRestartRejoins(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	a := startAgent(t, base, "a")
	b := startAgent(t, base, "b", "-join", a.info.Gossip)
	// Both ends see the join through: serf drops the leave intent of a
	// node whose own join intent, newer, is still on its way (the node
	// then shows failed), which a node signalled a few hundred
	// milliseconds after it started may meet.
	waitStatus(t, a, "b", api.StatusAlive)
	waitStatus(t, b, "a", api.StatusAlive)
	b.cmd.Process.Signal(syscall.SIGTERM)
	<-b.done
	if b.exitCode() != 0 {
		t.Errorf("exit code after SIGTERM = %d", b.exitCode())
	}
	waitStatus(t, a, "b", api.StatusLeft)
	if _, err := os.Stat(filepath.Join(b.dir, gossip.SnapshotFile)); err != nil {
		t.Fatalf("no snapshot: %v", err)
	}
	// Restarted without -join, b finds a again through its snapshot.
	b2 := startAgent(t, base, "b")
	waitStatus(t, a, "b", api.StatusAlive)
	waitStatus(t, b2, "a", api.StatusAlive)
}

func TestEncryptedSea(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	k1, _ := api.GossipKeyGen()
	k2, _ := api.GossipKeyGen()
	k3, _ := api.GossipKeyGen()
	a := startAgent(t, base, "a", "-encrypt", k1)
	b := startAgent(t, base, "b", "-encrypt", k1, "-join", a.info.Gossip)
	waitStatus(t, a, "b", api.StatusAlive)
	self, err := a.client.Self(context.Background())
	if err != nil || !self.Encrypted {
		t.Fatalf("self: %+v, %v", self, err)
	}

	// Wrong key: never a member; a plain-text agent neither.
	wrong := startAgent(t, base, "wrong", "-encrypt", k2, "-join", a.info.Gossip)
	plain := startAgent(t, base, "plain", "-join", a.info.Gossip)
	time.Sleep(2 * time.Second)
	for _, n := range []string{"wrong", "plain"} {
		if got := statusOf(t, a, n); got != "" {
			t.Errorf("a sees %s as %q", n, got)
		}
	}
	if got := statusOf(t, wrong, "a"); got != "" {
		t.Errorf("wrong sees a as %q", got)
	}
	_ = plain

	// Rotation: install k3, make it primary, remove k1. Removing k1
	// while nodes still encrypt with it is refused.
	ctx := context.Background()
	for _, step := range []func() (*api.KeyResult, error){
		func() (*api.KeyResult, error) { return a.client.InstallKey(ctx, k3) },
		func() (*api.KeyResult, error) {
			if _, err := a.client.RemoveKey(ctx, k1); err == nil || !strings.Contains(err.Error(), "2 of 2 nodes still encrypt with it") {
				t.Errorf("removing the primary key: error %v", err)
			}
			return a.client.UseKey(ctx, k3)
		},
		func() (*api.KeyResult, error) { return a.client.RemoveKey(ctx, k1) },
	} {
		r, err := step()
		if err != nil {
			t.Fatal(err)
		}
		if r.NumErr != 0 || r.NumResp != 2 {
			t.Fatalf("key op: %+v", r)
		}
	}
	r, err := b.client.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Keys) != 1 || r.Keys[k3] != 2 || r.PrimaryKeys[k3] != 2 {
		t.Fatalf("keys after rotation: %+v", r)
	}
	if _, err := a.client.InstallKey(ctx, "not-base64"); err == nil {
		t.Error("installing a malformed key succeeded")
	}
	// The keyring file follows the rotation, so a restart keeps the new key.
	data, err := os.ReadFile(filepath.Join(b.dir, gossip.KeyringFile))
	if err != nil || !strings.Contains(string(data), k3) || strings.Contains(string(data), k1) {
		t.Fatalf("keyring file after rotation: %s, %v", data, err)
	}
	waitStatus(t, a, "b", api.StatusAlive)
}

func TestMainErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.cfg")
	os.WriteFile(bad, []byte("A = 1\nthis is not a knob\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad attr", []string{"-attr", "NoEquals"}, `-attr "NoEquals": want NAME=VALUE`},
		{"bad attr name", []string{"-attr", "1x=2"}, `"1x" is not a valid ClassAd attribute name`},
		{"bad role", []string{"-role", "boss"}, `-role "boss": want cm or node`},
		{"trusted keys without an issuer", []string{"-trusted-keys", "/nonexistent.pem"}, "name the tokens' issuer with -token-issuer"},
		{"bad profile", []string{"-gossip-profile", "campus"}, `-gossip-profile "campus"`},
		{"certificate without its key", []string{"-tls-cert", "/tls.crt", "-tls-ca", "/ca.pem"}, "give all three"},
		{"missing certificate", []string{"-name", "x", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0",
			"-tls-cert", filepath.Join(dir, "tls.crt"), "-tls-key", filepath.Join(dir, "tls.key"), "-tls-ca", filepath.Join(dir, "ca.pem"), "-insecure-api"}, "-tls-cert: TLS certificate"},
		{"bad key", []string{"-name", "x", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-encrypt", "c2hvcnQ=", "-insecure-api"}, "encryption key is 5 bytes"},
		{"stray argument", []string{"extra"}, `unexpected argument "extra"`},
		{"missing config", []string{"-config", filepath.Join(dir, "nope")}, "reading configuration"},
		{"bad config", []string{"-config", bad}, "bad.cfg"},
		{"bad bind", []string{"-name", "x", "-bind", "127.0.0.1:notaport", "-api", "127.0.0.1:0", "-insecure-api"}, "bind address"},
		{"bad log level", []string{"-log-level", "loud"}, "-log-level"},
		{"bad compress", []string{"-gossip-compress=maybe"}, "-gossip-compress"},
		{"bad reach", []string{"-reach", "tunnel"}, `-reach "tunnel": want auto, direct or relay (or its synonym reverse)`},
		{"relay mode without a relay", []string{"-reach", "relay"}, "name the relay with -relay ADDR"},
		{"reverse, relay's synonym, without a relay", []string{"-reach", "reverse"}, "name the relay with -relay ADDR"},
		{"relay unreachable", []string{"-name", "x", "-api", "127.0.0.1:0", "-reach", "relay", "-relay", "127.0.0.1:1", "-insecure-api"},
			"-reach relay: opening a tunnel to relay 127.0.0.1:1"},
		{"reverse, relay's synonym, unreachable", []string{"-name", "x", "-api", "127.0.0.1:0", "-reach", "reverse", "-relay", "127.0.0.1:1", "-insecure-api"},
			"-reach relay: opening a tunnel to relay 127.0.0.1:1"},
		{"an API open to anyone", []string{"-name", "x", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0"},
			"give it -trusted-keys FILE and -token-issuer ISS"},
		{"unencrypted on all addresses", []string{"-name", "x", "-bind", "0.0.0.0:0", "-api", "127.0.0.1:0", "-insecure-api"},
			"make a key with `pondctl sea keygen` and pass it with -encrypt KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			code := Main(ctx, tc.args, &stdout, &stderr, Logging{})
			if code != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("code %d, stderr %q; want 1 and %q", code, stderr.String(), tc.want)
			}
		})
	}
}

func TestParseArgsConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "condor_config")
	os.WriteFile(cfgPath, []byte(`# a node
CONDOR_HOST = 10.0.0.1:7947
POND_POOL = campus
DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR
STARTD_ATTRS = $(STARTD_ATTRS) HasMatlab, Site
HasMatlab = True
Site = "campus"
POND_JOIN = 10.0.0.2:7946, 10.0.0.3:7946
`), 0o644)
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, c *Config)
	}{
		{"file", []string{"-config", cfgPath}, func(t *testing.T, c *Config) {
			if c.CondorHost != "10.0.0.1:7947" || c.Pool != "campus" || c.Role != "cm" {
				t.Errorf("condor host %q pool %q role %q", c.CondorHost, c.Pool, c.Role)
			}
			if c.Attrs["HasMatlab"] != true || c.Attrs["Site"] != "campus" {
				t.Errorf("attrs %v", c.Attrs)
			}
			if strings.Join(c.Join, " ") != "10.0.0.2:7946 10.0.0.3:7946" {
				t.Errorf("join %v", c.Join)
			}
			if c.Condor == nil || c.Knobs["POND_POOL"] != "campus" {
				t.Errorf("knobs %v", c.Knobs)
			}
		}},
		{"flags override", []string{"-config", cfgPath, "-pool", "other", "-role", "node", "-condor-host", "h:1", "-attr", "Site=x"},
			func(t *testing.T, c *Config) {
				if c.Pool != "other" || c.Role != "node" || c.CondorHost != "h:1" || c.Attrs["Site"] != "x" {
					t.Errorf("%+v", c)
				}
			}},
		{"insecure gossip", []string{"-insecure-gossip"}, func(t *testing.T, c *Config) {
			if !c.InsecureGossip {
				t.Errorf("-insecure-gossip left InsecureGossip off")
			}
		}},
		{"no compression", []string{"-gossip-compress=false"}, func(t *testing.T, c *Config) {
			if !c.NoGossipCompression {
				t.Errorf("-gossip-compress=false left compression on")
			}
		}},
		{"defaults", nil, func(t *testing.T, c *Config) {
			if c.Bind != "127.0.0.1:7946" || c.API != DefaultAPI || c.Role != "node" || c.Name == "" || c.NoGossipCompression || c.InsecureGossip {
				t.Errorf("%+v", c)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseArgs(tc.args, new(bytes.Buffer))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}
