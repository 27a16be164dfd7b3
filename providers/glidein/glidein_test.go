package glidein

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/api"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/pond-htc/pond/overlay/glidein/kinds"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/local"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// The test binary doubles as the agent of the pool the glideins join, as
// the glideins themselves, and as a pondctl killed mid-apply.
const roleEnv = "POND_GLIDEIN_TEST_ROLE"

// Roles of the test binary.
const (
	roleAgent = "agent"   // pondctl agent (the pool's central manager)
	roleIdle  = "glidein" // a glidein that checks what it was given, then waits to be ended
	roleApply = "apply-child"
	roleJoin  = "join" // pondctl agent started as a glidein
)

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "" && len(os.Args) > 1 && os.Args[1] == "agent" {
		// A glidein a central manager's factory started on a Slurm
		// cluster, whose jobs get no environment of ours (sbatch
		// --export=NONE): `go test` never runs the binary so.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := agent.Main(ctx, os.Args[2:], os.Stdout, os.Stderr, agent.Logging{})
		stop()
		os.Exit(code)
	}
	switch os.Getenv(roleEnv) {
	case roleAgent:
		if len(os.Args) > 1 && os.Args[1] == "agent" {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := agent.Main(ctx, os.Args[2:], os.Stdout, os.Stderr, agent.Logging{})
			stop()
			os.Exit(code)
		}
	case roleJoin:
		if len(os.Args) > 1 && os.Args[1] == "agent" {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := agent.Main(ctx, os.Args[2:], os.Stdout, os.Stderr, agent.Logging{})
			stop()
			os.Exit(code)
		}
	case roleIdle:
		os.Exit(idleGlidein(os.Args[1:]))
	case roleApply:
		os.Exit(applyChild())
	}
	os.Setenv(roleEnv, roleAgent)
	// The tests that share moto run in parallel: they cannot set its
	// environment themselves (ec2test.Shared finds it set).
	for k, v := range ec2test.Env() {
		os.Setenv(k, v)
	}
	code := m.Run()
	// One moto and one Slurm cluster serve the package's tests.
	ec2test.StopShared()
	slurmtest.StopShared()
	os.Exit(code)
}

// idleGlidein stands for `pondctl agent` started as a glidein: it checks
// its arguments and the files of its directory as the agent would read
// them (every credential in a file of mode 0600 in a directory of mode
// 0700, the token for node/ID), then runs until it is signalled.
func idleGlidein(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "glidein: "+format+"\n", a...)
		return 3
	}
	if len(args) == 0 || args[0] != "agent" {
		return fail("want `agent ...`, got %q", args)
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	str := map[string]*string{}
	for _, n := range []string{"config", "name", "bind", "api", "data-dir", "gossip-profile", "role", "pool", "condor-host",
		"trusted-keys", "token-issuer", "token-file", "tls-cert", "tls-key", "tls-ca",
		"glidein", "lifetime", "end-time", "idle-timeout", "cm-timeout", "max-jobs", "validate", "status-file"} {
		str[n] = fs.String(n, "", "")
	}
	var joins, attrs multi
	fs.Var(&joins, "join", "")
	fs.Var(&attrs, "attr", "")
	if err := fs.Parse(args[1:]); err != nil {
		return fail("%v", err)
	}
	id := os.Getenv(glideinIDEnv)
	if *str["glidein"] != id || *str["name"] != id {
		return fail("-glidein %q -name %q, want %q", *str["glidein"], *str["name"], id)
	}
	if len(joins) != 1 || *str["pool"] == "" || *str["condor-host"] == "" {
		return fail("-join %q -pool %q -condor-host %q", joins, *str["pool"], *str["condor-host"])
	}
	for _, n := range []string{"lifetime", "idle-timeout", "cm-timeout"} {
		if _, err := time.ParseDuration(*str[n]); err != nil {
			return fail("-%s: %v", n, err)
		}
	}
	if v := *str["end-time"]; v != "" {
		// The provider cannot know the batch system's end: the site
		// tells the glidein in its environment.
		return fail("-end-time %s given", v)
	}
	dir := *str["data-dir"]
	if *str["status-file"] != filepath.Join(dir, site.StatusFile) {
		return fail("-status-file %q, want %s", *str["status-file"], filepath.Join(dir, site.StatusFile))
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		return fail("data dir %s: %v %v", dir, fi, err)
	}
	for _, n := range []string{"config", "trusted-keys", "token-file", "tls-cert", "tls-key", "tls-ca"} {
		path := *str[n]
		if filepath.Dir(path) != dir {
			return fail("-%s %s is not in the glidein's directory %s", n, path, dir)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
			return fail("-%s %s: %v %v", n, path, fi, err)
		}
	}
	data, _ := os.ReadFile(*str["token-file"])
	c, err := auth.ReadClaims(strings.TrimSpace(string(data)))
	if err != nil || c.Subject != "node/"+id {
		return fail("token: %v subject %q", err, c.Subject)
	}
	for _, a := range os.Args {
		if strings.Contains(a, strings.TrimSpace(string(data))) {
			return fail("the token is on the command line")
		}
	}
	if v := *str["validate"]; v != "" {
		// As the agent's glidein runtime reads it: a JSON list of checks.
		data, err := os.ReadFile(v)
		if err != nil {
			return fail("-validate: %v", err)
		}
		checks, err := api.ParseValidationChecks(data)
		if err != nil || len(checks) == 0 {
			return fail("-validate %s: %v: %s", v, err, data)
		}
		for _, c := range checks {
			ok := (c.Type == "disk" || c.Type == "memory") && c.MinMB > 0 || c.Type == "command" && len(c.Command) > 0
			if !ok {
				return fail("-validate %s: bad check %+v", v, c)
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return 0
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// selfBinary is the test binary, which doubles as the agent and the
// glideins.
func selfBinary() string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe
}

// object completes attrs to a value of sc's type; an error is a mistake
// of the test.
func object(sc *providers.Schema, attrs map[string]cty.Value) cty.Value {
	v, err := providertest.Object(sc, attrs)
	if err != nil {
		panic(err)
	}
	return v
}

// startPool starts a pool of one node, its central manager, in wd with
// the local provider, and returns the central manager's API address. It
// is destroyed when the test ends.
func startPool(t *testing.T, wd string) string {
	t.Helper()
	return startPoolOn(t, wd, "127.0.0.1")
}

// startPoolOn is startPool with the local provider's bind_address.
func startPoolOn(t *testing.T, wd, bind string) string {
	t.Helper()
	ctx := context.Background()
	p := local.New()
	pc, err := providertest.Object(p.Schema().Provider, map[string]cty.Value{
		"binary": cty.StringVal(selfBinary()), "gossip_profile": cty.StringVal("fast"), "bind_address": cty.StringVal(bind)})
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: pc, WorkDir: wd}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	rs := p.Schema().Resources["pool"]
	cfg, err := providertest.Object(rs, map[string]cty.Value{"nodes": cty.NumberIntVal(1)})
	if err != nil {
		t.Fatal(err)
	}
	prior := cty.NullVal(rs.ImpliedType())
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: "pool.campus", Prior: prior, Config: cfg, ProposedNew: cfg})
	if err := providers.Err(plan.Diagnostics); err != nil {
		t.Fatal(err)
	}
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pool", Address: "pool.campus", Prior: prior, Planned: plan.Planned, Config: cfg})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.ApplyResourceChange(context.Background(), providers.ApplyRequest{TypeName: "pool", Address: "pool.campus",
			Prior: resp.New, Planned: cty.NullVal(resp.New.Type()), Config: cty.NullVal(resp.New.Type())})
	})
	return resp.New.GetAttr("central_manager").AsString()
}

// providerConfig is a slurm provider block for a site on this machine.
func providerConfig(extra map[string]cty.Value) cty.Value {
	attrs := map[string]cty.Value{
		"binary":         cty.StringVal(selfBinary()),
		"bind_address":   cty.StringVal("127.0.0.1"),
		"gossip_profile": cty.StringVal("fast"),
		"submit_grace":   cty.StringVal("1s"),
		"start_timeout":  cty.StringVal("20s"),
	}
	for k, v := range extra {
		attrs[k] = v
	}
	return object(providerBlockSchema(slurm.Kind()), attrs)
}

func glideinConfig(attrs map[string]cty.Value) cty.Value {
	return object(glideinSchema(), attrs)
}

// siteFactory is the provider of s's kind (slurm for a kind pondctl is
// not built with) whose site is s.
func siteFactory(s site.Site) providers.Factory {
	k, ok := kinds.Registry().Lookup(s.Kind())
	if !ok {
		k = slurm.Kind()
	}
	k.New = func(context.Context, json.RawMessage, site.KindEnv) (site.Site, error) { return s, nil }
	return Factory(k)
}

func configured(t testing.TB, wd string, s site.Site, extra map[string]cty.Value) *Provider {
	t.Helper()
	p := siteFactory(s)().(*Provider)
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: providerConfig(extra), WorkDir: wd}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	return p
}

// applyConfig plans config over prior and applies it, with the progress
// lines in *lines when lines is not nil.
func applyConfig(t testing.TB, p *Provider, addr string, prior, config cty.Value, lines *[]string) (cty.Value, error) {
	t.Helper()
	ctx := context.Background()
	proposed := providertest.ProposedNew(glideinSchema(), prior, config)
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: ResourceType, Address: addr, Prior: prior, Config: config, ProposedNew: proposed})
	if err := providers.Err(plan.Diagnostics); err != nil {
		return cty.NilVal, err
	}
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ResourceType, Address: addr, Prior: prior, Planned: plan.Planned, Config: config,
		Progress: func(msg string) {
			if lines != nil {
				*lines = append(*lines, msg)
			}
		}})
	return resp.New, providers.Err(resp.Diagnostics)
}

func destroyAll(t testing.TB, p *Provider, addr string, prior cty.Value) {
	t.Helper()
	if prior == cty.NilVal || prior.IsNull() {
		return
	}
	resp := p.ApplyResourceChange(context.Background(), providers.ApplyRequest{TypeName: ResourceType, Address: addr,
		Prior: prior, Planned: cty.NullVal(prior.Type()), Config: cty.NullVal(prior.Type())})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Error(err)
	}
}

func ids(v cty.Value) []string {
	var out []string
	for _, x := range v.GetAttr("ids").AsValueSlice() {
		out = append(out, x.AsString())
	}
	return out
}

// running returns the IDs of the site's glidein processes, each once, and
// fails t when an ID has more than one process.
//
// A process that execs the glidein shows no environment for a moment, so
// /proc is read three times, 50 ms apart, and what any of them found
// counts.
func running(t testing.TB, s *procSite) []string {
	t.Helper()
	seen := map[string]bool{}
	for i := range 3 {
		if i > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		for id, pids := range s.procs() {
			if len(pids) != 1 {
				t.Errorf("glidein %s runs as %d processes: %v", id, len(pids), pids)
			}
			seen[id] = true
		}
	}
	out := slices.Collect(maps.Keys(seen))
	slices.Sort(out)
	return out
}

// endAll kills every process of the site, for a test's cleanup.
func endAll(s *procSite) {
	for _, pids := range s.procs() {
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// newSite makes a process site under a temporary directory whose glideins
// run in role, killed when the test ends.
func newSite(t *testing.T, role string) *procSite {
	s := newProcSite(t.TempDir(), role)
	t.Cleanup(func() { endAll(s) })
	return s
}

// TestLifecycle drives a glidein resource through create, refresh, a
// no-op plan, an update of its count, import and delete, with real
// processes as glideins, and checks that what runs is what the state says.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	cm := startPool(t, wd)
	s := newSite(t, roleIdle)
	check := func(t *testing.T, state cty.Value) {
		want := ids(state)
		slices.Sort(want)
		if got := running(t, s); !slices.Equal(got, want) {
			t.Errorf("running %v, state says %v", got, want)
		}
		n, _ := state.GetAttr("nodes").AsBigFloat().Int64()
		if len(want) != int(n) {
			t.Errorf("%d glideins in state, nodes = %d", len(want), n)
		}
		for _, id := range want {
			// A new glidein is new to the site: it need not look for an
			// earlier launch.
			if v, ok := s.fresh.Load(id); !ok || !v.(bool) {
				t.Errorf("%s: Submit had Request.New = %v (sent: %v), want true", id, v, ok)
			}
			if !strings.HasPrefix(id, state.GetAttr("id").AsString()) || !validID(id) {
				t.Errorf("id %q is not under the prefix %q", id, state.GetAttr("id").AsString())
			}
		}
	}
	providertest.Run(t, siteFactory(s), providertest.Case{
		TypeName:       ResourceType,
		Address:        "glidein.hpc",
		WorkDir:        wd,
		ProviderConfig: providerConfig(nil),
		Config:         glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(2), "lifetime": cty.StringVal("1h")}),
		Updated:        glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(3), "lifetime": cty.StringVal("1h")}),
		ImportID:       func(state cty.Value) string { return "slurm:" + state.GetAttr("id").AsString() },
		ImportVerify:   []string{"id", "ids"},
		Check:          check,
	})
	if got := running(t, s); len(got) != 0 {
		t.Errorf("after delete, still running: %v", got)
	}
	if recs, _ := os.ReadDir(filepath.Join(wd, ".pond", "glidein", "journal")); len(recs) != 0 {
		t.Errorf("after delete, the journal holds %d records", len(recs))
	}
}

// TestGlideinsJoinPool starts glideins that run the real agent, with the
// arguments and files the provider gives them, and checks that they join
// the pool whose central manager the configuration names: their tokens,
// certificates and gossip work, and they run as glideins (validated, their
// machine ads IsGlidein with their IDs). Destroy ends them. Neither
// provider has encrypt: a pool, on loopback or on every address, and its
// glideins gossip encrypted with the working directory's sea key.
func TestGlideinsJoinPool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agents")
	}
	for _, tc := range []struct {
		name, poolBind string
		glideinBind    cty.Value
		encrypted      bool
	}{
		{"loopback", "127.0.0.1", cty.StringVal("127.0.0.1"), true},
		{"loopback pool, no bind_address", "127.0.0.1", cty.NullVal(cty.String), true},
		{"sea key", "0.0.0.0", cty.NullVal(cty.String), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POND_AUTHORITY", "")
			wd := t.TempDir()
			cm := startPoolOn(t, wd, tc.poolBind)
			s := newSite(t, roleJoin)
			p := configured(t, wd, s, map[string]cty.Value{"bind_address": tc.glideinBind})
			glideinsJoinPool(t, wd, cm, s, p, tc.encrypted)
		})
	}
}

// glideinsJoinPool starts two glideins of p on s, checks that they join
// the pool at cm, their gossip encrypted or not, and destroys them.
func glideinsJoinPool(t *testing.T, wd, cm string, s *procSite, p *Provider, encrypted bool) {
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(2), "slots": cty.NumberIntVal(2),
		"cpus": cty.NumberIntVal(4), "memory": cty.StringVal("3GB"),
		"attributes": cty.ObjectVal(map[string]cty.Value{"Site": cty.StringVal("hpc")}),
		"validate": cty.ObjectVal(map[string]cty.Value{"disk": cty.StringVal("1MB"), "memory": cty.NullVal(cty.String),
			"command": cty.ListVal([]cty.Value{cty.StringVal("/bin/true")})})})
	state, err := applyConfig(t, p, "glidein.join", cty.NullVal(cfg.Type()), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := ids(state)
	c, err := p.client(cm)
	if err != nil {
		t.Fatal(err)
	}
	// The glideins know the central manager by an address they reach
	// it at: cm, unless that is a wildcard.
	poolSelf, err := c.Self(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reach, _, err := reachOf(cm, poolSelf.Gossip, "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(40 * time.Second)
	for {
		ms, err := c.Members(context.Background(), api.MembersFilter{Status: api.StatusAlive})
		joined := 0
		for _, m := range ms {
			if slices.Contains(want, m.Name) && m.Tags[api.TagPool] == "campus" && m.Tags[api.TagCM] == reach {
				joined++
				gc, cerr := p.client(m.Tags[api.TagAPI])
				if cerr != nil {
					t.Fatal(cerr)
				}
				self, serr := gc.Self(context.Background())
				if serr != nil || self.Encrypted != encrypted {
					t.Fatalf("glidein %s: encrypted = %v, %v; want %v", m.Name, self != nil && self.Encrypted, serr, encrypted)
				}
				if h, _, _ := net.SplitHostPort(self.Gossip); !encrypted && !api.IsLoopback(h) {
					t.Errorf("glidein %s gossips in the clear at %s", m.Name, self.Gossip)
				}
			}
		}
		if err == nil && joined == len(want) {
			break
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, id := range want {
				data, _ := os.ReadFile(filepath.Join(s.dir, id, "log"))
				fmt.Fprintf(&logs, "\n%s:\n%s", id, lastLines(string(data), 15))
			}
			t.Fatalf("%d of the glideins %v joined pool campus at %s (%v)%s", joined, want, cm, err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Their startds advertise to the pool's collector with their own
	// tokens, over the sea's TLS: each glidein's slots are in the pool.
	for {
		var out, errOut strings.Builder
		code := tools.Status(context.Background(), []string{"-pool", cm, "-af", "Name", "IsGlidein", "GlideinID", "Cpus", "Memory"}, &out, &errOut, []string{"PWD=" + wd})
		found := 0
		for _, id := range want {
			// The runtime's flags reached the agent: its slots say
			// they are the glidein's, and offer what it was given
			// (4 CPUs, 3 GB) divided between its two slots, not the
			// machine's.
			if strings.Count(out.String(), "@"+id+" true "+id+" 2 1500\n") == 2 {
				found++
			}
		}
		if code == 0 && found == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool's collector shows the slots of %d of the glideins %v (exit %d):\n%s%s", found, want, code, out.String(), errOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	destroyAll(t, p, "glidein.join", state)
	if got := running(t, s); len(got) != 0 {
		t.Errorf("after destroy, still running: %v", got)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestGossipOf: how the glideins of a pool gossip, for every combination
// of the provider's encrypt and bind_address and the pool's gossip.
func TestGossipOf(t *testing.T) {
	t.Setenv("POND_AUTHORITY", "")
	withKey, noKey := t.TempDir(), t.TempDir()
	seaKey, err := providers.SeaKey(withKey)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := api.GossipKeyGen()
	loopPool := poolInfo{cm: "127.0.0.1:9000", gossip: "127.0.0.1:7946"}
	loop6Pool := poolInfo{cm: "[::1]:9000", gossip: "[::1]:7946"}
	encPool := poolInfo{cm: "192.0.2.2:9000", gossip: "192.0.2.2:7946", encrypted: true}
	encLoopPool := poolInfo{cm: "127.0.0.1:9000", gossip: "127.0.0.1:7946", encrypted: true}
	for _, tc := range []struct {
		name     string
		wd       string
		encrypt  string
		bind     string // "" leaves bind_address out
		pool     poolInfo
		key      string
		wantBind string
		err      string
	}{
		{"loopback pool, no bind_address", withKey, "", "", loopPool, "", "127.0.0.1", ""},
		{"IPv6 loopback pool, no bind_address", withKey, "", "", loop6Pool, "", "::1", ""},
		{"loopback pool, loopback bind_address", withKey, "", "127.0.0.5", loopPool, "", "127.0.0.5", ""},
		{"loopback pool, bind_address of every address", withKey, "", "0.0.0.0", loopPool, "", "",
			`bind_address "0.0.0.0": the pool's central manager at 127.0.0.1:9000 gossips unencrypted`},
		{"encrypted pool, the sea key", withKey, "", "", encPool, seaKey, "0.0.0.0", ""},
		{"encrypted loopback pool, the sea key", withKey, "", "", encLoopPool, seaKey, "127.0.0.1", ""},
		{"encrypted loopback pool, bind_address", withKey, "", "0.0.0.0", encLoopPool, seaKey, "0.0.0.0", ""},
		{"encrypted pool, the sea key, bind_address", withKey, "", "10.1.2.3", encPool, seaKey, "10.1.2.3", ""},
		{"encrypted pool, no sea key", noKey, "", "", encPool, "", "", "gossips encrypted, with a key this working directory does not have"},
		{"encrypt wins", withKey, own, "", encPool, own, "0.0.0.0", ""},
		{"encrypt, pool in the clear", withKey, own, "127.0.0.1", loopPool, "", "", "encrypt is set, but the pool's central manager at 127.0.0.1:9000 gossips unencrypted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]cty.Value{"bind_address": cty.NullVal(cty.String)}
			if tc.bind != "" {
				extra["bind_address"] = cty.StringVal(tc.bind)
			}
			if tc.encrypt != "" {
				extra["encrypt"] = cty.StringVal(tc.encrypt)
			}
			p := configured(t, tc.wd, newProcSite(t.TempDir(), roleIdle), extra)
			key, bind, err := p.gossipOf(tc.pool)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("gossipOf: %q, %q, %v; want an error with %q", key, bind, err, tc.err)
				}
				return
			}
			if err != nil || key != tc.key || bind != tc.wantBind {
				t.Fatalf("gossipOf: key %q, bind %q, %v; want %q, %q", key, bind, err, tc.key, tc.wantBind)
			}
		})
	}
	if _, err := providers.ReadSeaKey(noKey); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the glidein provider made a sea key for a pool encrypted with another: %v", err)
	}
}
