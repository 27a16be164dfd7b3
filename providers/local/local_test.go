package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"

	"github.com/hashicorp/hcl/v2"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// The test binary doubles as the agent binary (so the tests need no
// separately built pondctl) and as a pondctl that is killed mid-apply.
const roleEnv = "POND_LOCAL_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "agent":
		if len(os.Args) > 1 && os.Args[1] == "agent" {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := agent.Main(ctx, os.Args[2:], os.Stdout, os.Stderr, agent.Logging{})
			stop()
			os.Exit(code)
		}
	case "apply-child":
		os.Exit(applyChild())
	case "settle":
		os.Exit(settleChild())
	}
	os.Setenv(roleEnv, "agent")
	os.Exit(m.Run())
}

// applyChild creates a 3-node pool in $POND_TEST_WORKDIR and then hangs,
// waiting to be killed.
func applyChild() int {
	os.Setenv(roleEnv, "agent")
	ctx := context.Background()
	p := New()
	if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: providerConfig(), WorkDir: os.Getenv("POND_TEST_WORKDIR")}).Diagnostics); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(3)})
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: "pool.crash",
		Prior: cty.NullVal(cfg.Type()), Config: cfg, ProposedNew: cfg})
	if err := providers.Err(plan.Diagnostics); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pool", Address: "pool.crash",
		Prior: cty.NullVal(cfg.Type()), Planned: plan.Planned, Config: cfg})
	fmt.Println("applied")
	time.Sleep(time.Hour)
	return 0
}

// settleChild stands for a child forked by pondctl but not yet exec'd: it
// runs pondctl's binary with an argv that is not an agent's and no launch
// nonce, then after a while execs into a process that carries the nonce
// of $POND_TEST_NONCE but whose argv is not an agent's either.
func settleChild() int {
	time.Sleep(300 * time.Millisecond)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := append(os.Environ(), LaunchEnv+"="+os.Getenv("POND_TEST_NONCE"))
	fmt.Fprintln(os.Stderr, syscall.Exec(sleep, []string{"sleep", "60"}, env))
	return 1
}

func selfBinary() string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe
}

func providerConfig() cty.Value {
	v, err := providertest.Object(providerSchema().Provider, map[string]cty.Value{
		"binary":         cty.StringVal(selfBinary()),
		"gossip_profile": cty.StringVal("fast"),
	})
	if err != nil {
		panic(err)
	}
	return v
}

func poolConfig(attrs map[string]cty.Value) cty.Value {
	v, err := providertest.Object(providerSchema().Resources["pool"], attrs)
	if err != nil {
		panic(err)
	}
	return v
}

func configureReq(wd string) providers.ConfigureRequest {
	return providers.ConfigureRequest{Config: providerConfig(), WorkDir: wd}
}

func configured(t *testing.T, wd string) *Provider {
	t.Helper()
	p := New().(*Provider)
	if err := providers.Err(p.Configure(context.Background(), configureReq(wd)).Diagnostics); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPoolName(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"pool.campus", "campus"},
		{`pool.w["a"]`, "w-a"},
		{"pool.w[1]", "w-1"},
		{`module.m.pool.x`, "m-x"},
		{`pool.w["a b/c"]`, "w-a-b-c"},
		{"pool.pool", "pool"},
	} {
		if got := PoolName(tc.addr); got != tc.want {
			t.Errorf("PoolName(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	p := New()
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  string // substring of the error; "" for none
	}{
		{"defaults", nil, ""},
		{"ok", map[string]cty.Value{"nodes": cty.NumberIntVal(3), "slots": cty.NumberIntVal(2),
			"attributes": cty.ObjectVal(map[string]cty.Value{"HasMatlab": cty.True, "Site": cty.StringVal("campus"), "Mips": cty.NumberFloatVal(1.5)}),
			"config":     cty.MapVal(map[string]cty.Value{"NEGOTIATOR_INTERVAL": cty.StringVal("5")})}, ""},
		{"unknown nodes", map[string]cty.Value{"nodes": cty.UnknownVal(cty.Number)}, ""},
		{"zero nodes", map[string]cty.Value{"nodes": cty.NumberIntVal(0)}, "nodes: must be at least 1"},
		{"fractional slots", map[string]cty.Value{"slots": cty.NumberFloatVal(1.5)}, "slots: 1.5 is not a whole number"},
		{"bad attribute name", map[string]cty.Value{"attributes": cty.ObjectVal(map[string]cty.Value{"1st": cty.True})}, `"1st" is not a valid ClassAd attribute name`},
		{"list attribute", map[string]cty.Value{"attributes": cty.ObjectVal(map[string]cty.Value{"L": cty.ListVal([]cty.Value{cty.True})})}, "attributes.L: want a string, number or bool"},
		{"attributes not an object", map[string]cty.Value{"attributes": cty.StringVal("x")}, "attributes: want an object"},
		{"multi-line knob", map[string]cty.Value{"config": cty.MapVal(map[string]cty.Value{"A": cty.StringVal("1\nB = 2")})}, "config.A: value must be a single line"},
		{"bad knob name", map[string]cty.Value{"config": cty.MapVal(map[string]cty.Value{"A B": cty.StringVal("1")})}, `config: "A B" is not a valid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := providers.Err(p.ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: "pool", Config: poolConfig(tc.attrs)}).Diagnostics)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSchema(t *testing.T) {
	if err := providertest.CheckSchema(New().Schema()); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		config  map[string]cty.Value
		updated map[string]cty.Value
	}{
		{"pool", map[string]cty.Value{
			"nodes":      cty.NumberIntVal(2),
			"attributes": cty.ObjectVal(map[string]cty.Value{"HasMatlab": cty.True, "Site": cty.StringVal("campus")}),
		}, map[string]cty.Value{
			"nodes":      cty.NumberIntVal(3),
			"attributes": cty.ObjectVal(map[string]cty.Value{"HasMatlab": cty.False, "Site": cty.StringVal("campus")}),
			"config":     cty.MapVal(map[string]cty.Value{"NEGOTIATOR_INTERVAL": cty.StringVal("5")}),
		}},
		{"free", map[string]cty.Value{"nodes": cty.NumberIntVal(2), "free": cty.True},
			map[string]cty.Value{"nodes": cty.NumberIntVal(1), "free": cty.True}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := t.TempDir()
			providertest.Run(t, New, providertest.Case{
				WorkDir:        wd,
				TypeName:       "pool",
				Address:        "pool." + tc.name,
				ProviderConfig: providerConfig(),
				Config:         poolConfig(tc.config),
				Updated:        poolConfig(tc.updated),
				ImportID:       func(s cty.Value) string { return s.GetAttr("id").AsString() },
				ImportVerify:   []string{"id", "nodes", "slots", "attributes", "config", "members", "node_details", "central_manager", "condor_host"},
				Check: func(t *testing.T, s cty.Value) {
					checkPool(t, wd, s, tc.name == "free")
				},
			})
		})
	}
}

// nodeDir is the directory of the node of a node_details entry: its
// agent's working directory.
func nodeDir(t *testing.T, d cty.Value) string {
	t.Helper()
	dir, err := os.Readlink("/proc/" + d.GetAttr("pid").AsBigFloat().Text('f', 0) + "/cwd")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkPool asks the pool's agents who they are and checks roles, pools and
// central managers.
func checkPool(t *testing.T, wd string, s cty.Value, free bool) {
	t.Helper()
	cm := s.GetAttr("central_manager").AsString()
	// HTCondor's clients find the pool's collector at the central
	// manager's agent, which serves CEDAR on its API port.
	if ch := s.GetAttr("condor_host"); ch.IsNull() || ch.AsString() != cm {
		t.Errorf("condor_host %#v, want the central manager %q", ch, cm)
	}
	for i, d := range s.GetAttr("node_details").AsValueSlice() {
		self, err := testClient(t, wd, d.GetAttr("api").AsString()).Self(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// The agent speaks only TLS, with a certificate of its own.
		if _, err := api.NewClient(self.API).Health(context.Background()); !errors.Is(err, wire.ErrPlainToTLS) {
			t.Errorf("%s: a plain client: %v", self.Name, err)
		}
		if fi, err := os.Stat(filepath.Join(nodeDir(t, d), auth.NodeKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: key file: %v", self.Name, err)
		}
		wantRole, wantPool, wantCM := "node", s.GetAttr("id").AsString(), cm
		if free {
			wantPool, wantCM = "", self.API
		} else if i == 0 {
			wantRole = "cm"
		}
		if self.Role != wantRole || self.Pool != wantPool || self.CondorHost != wantCM {
			t.Errorf("%s: role %q pool %q condor_host %q; want %q %q %q", self.Name, self.Role, self.Pool, self.CondorHost, wantRole, wantPool, wantCM)
		}
	}
	if !free && s.GetAttr("node_details").LengthInt() > 0 {
		first := s.GetAttr("node_details").Index(cty.NumberIntVal(0))
		if got := first.GetAttr("api").AsString(); got != cm {
			t.Errorf("central_manager %q is not node 0's API %q", cm, got)
		}
	}
}

func pidsOf(s cty.Value) []int {
	var out []int
	for _, d := range s.GetAttr("node_details").AsValueSlice() {
		bf := d.GetAttr("pid").AsBigFloat()
		i, _ := bf.Int64()
		out = append(out, int(i))
	}
	return out
}

// running reports whether pid is a live (not zombie) process.
func running(pid int) bool {
	_, state, err := procStart(pid)
	return err == nil && state != 'Z' && state != 'X'
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		for running(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still running", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func create(t testing.TB, p *Provider, addr string, cfg cty.Value) cty.Value {
	t.Helper()
	ctx := context.Background()
	null := cty.NullVal(cfg.Type())
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: addr, Prior: null, Config: cfg, ProposedNew: cfg})
	if err := providers.Err(plan.Diagnostics); err != nil {
		t.Fatal(err)
	}
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pool", Address: addr, Prior: null, Planned: plan.Planned, Config: cfg})
	if err := providers.Err(resp.Diagnostics); err != nil {
		// A failed create returns the nodes it did start: stop them, so
		// that a failing test leaves no agent behind.
		if resp.New != cty.NilVal && !resp.New.IsNull() && resp.New.IsWhollyKnown() {
			p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pool", Address: addr,
				Prior: resp.New, Planned: cty.NullVal(resp.New.Type()), Config: cty.NullVal(resp.New.Type())})
		}
		t.Fatal(err)
	}
	return resp.New
}

func destroy(t testing.TB, p *Provider, addr string, s cty.Value) {
	t.Helper()
	resp := p.ApplyResourceChange(context.Background(), providers.ApplyRequest{TypeName: "pool", Address: addr,
		Prior: s, Planned: cty.NullVal(s.Type()), Config: cty.NullVal(s.Type())})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if !resp.New.IsNull() {
		t.Fatal("delete returned non-null state")
	}
}

func names(s cty.Value) []string {
	var out []string
	for _, v := range s.GetAttr("members").AsValueSlice() {
		out = append(out, v.AsString())
	}
	return out
}

func TestKilledNodeIsRelaunched(t *testing.T) {
	t.Parallel()
	for _, victim := range []int{1, 0} {
		t.Run(fmt.Sprintf("node%d", victim), func(t *testing.T) { testKilledNode(t, victim) })
	}
}

func testKilledNode(t *testing.T, victim int) {
	wd := t.TempDir()
	p := configured(t, wd)
	ctx := context.Background()
	cfg := poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(3)})
	s := create(t, p, "pool.campus", cfg)
	if got := strings.Join(names(s), ","); got != "campus-0,campus-1,campus-2" {
		t.Fatalf("members = %s", got)
	}
	pids := pidsOf(s)
	t.Cleanup(func() { destroy(t, p, "pool.campus", s); waitGone(t, pids) })

	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pids[victim:victim+1])
	rr := p.ReadResource(ctx, providers.ReadRequest{TypeName: "pool", Address: "pool.campus", Current: s})
	if err := providers.Err(rr.Diagnostics); err != nil {
		t.Fatal(err)
	}
	// The read warns of the node that is gone, naming its log.
	victimName := fmt.Sprintf("campus-%d", victim)
	if len(rr.Diagnostics) != 1 || rr.Diagnostics[0].Summary != "1 of the 3 nodes of pool.campus are gone" ||
		!strings.Contains(rr.Diagnostics[0].Detail, victimName+" (log: "+filepath.Join(".pond", "local", "nodes", victimName, LogFileName)+")") {
		t.Errorf("read after kill: diagnostics %v, want a warning naming %s and its log", rr.Diagnostics, victimName)
	}
	wantLeft := map[int]string{0: "campus-1,campus-2", 1: "campus-0,campus-2"}[victim]
	if got := strings.Join(names(rr.New), ","); got != wantLeft {
		t.Fatalf("after kill, members = %s, want %s", got, wantLeft)
	}
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: "pool.campus",
		Prior: rr.New, Config: cfg, ProposedNew: providertest.ProposedNew(providerSchema().Resources["pool"], rr.New, cfg)})
	if err := providers.Err(plan.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if plan.Planned.GetAttr("members").IsKnown() || len(plan.RequiresReplace) > 0 {
		t.Fatalf("plan after kill: members known or replace: %#v", plan.Planned.GetAttr("members"))
	}
	if got := plan.Planned.GetAttr("central_manager").IsKnown(); got != (victim != 0) {
		t.Errorf("central_manager known in plan = %v after killing node %d", got, victim)
	}
	if got := plan.Planned.GetAttr("condor_host").IsKnown(); got != (victim != 0) {
		t.Errorf("condor_host known in plan = %v after killing node %d", got, victim)
	}
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pool", Address: "pool.campus",
		Prior: rr.New, Planned: plan.Planned, Config: cfg})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	s = resp.New
	pids = append(pids, pidsOf(s)...)
	if got := strings.Join(names(s), ","); got != "campus-0,campus-1,campus-2" {
		t.Fatalf("after apply, members = %s", got)
	}
	checkPool(t, wd, s, false)

	// Shrink: surplus nodes stop, highest index first.
	cfg1 := poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(1)})
	plan = p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: "pool.campus",
		Prior: s, Config: cfg1, ProposedNew: providertest.ProposedNew(providerSchema().Resources["pool"], s, cfg1)})
	if err := providers.Err(plan.Diagnostics); err != nil {
		t.Fatal(err)
	}
	old := pidsOf(s)
	resp = p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pool", Address: "pool.campus",
		Prior: s, Planned: plan.Planned, Config: cfg1})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	s = resp.New
	if got := strings.Join(names(s), ","); got != "campus-0" {
		t.Fatalf("after shrink, members = %s", got)
	}
	waitGone(t, old[1:])
	for _, n := range []string{"campus-1", "campus-2"} {
		if _, err := os.Stat(filepath.Join(wd, ".pond", "local", "nodes", n)); !os.IsNotExist(err) {
			t.Errorf("data dir of %s not removed: %v", n, err)
		}
	}
}

func TestTwoPoolsShareOneSea(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	p := configured(t, wd)
	a := create(t, p, "pool.a", poolConfig(nil))
	t.Cleanup(func() { destroy(t, p, "pool.a", a) })
	b := create(t, p, `pool.w["b"]`, poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(2)}))
	t.Cleanup(func() { destroy(t, p, `pool.w["b"]`, b) })
	if got := strings.Join(names(b), ","); got != "w-b-0,w-b-1" {
		t.Fatalf("members = %s", got)
	}
	// Apply returns once pool a's first node sees b's nodes.
	ms, err := testClient(t, wd, a.GetAttr("sea").AsString()).Members(context.Background(), api.MembersFilter{Status: "alive"})
	if err != nil || len(ms) != 3 {
		t.Fatalf("sea has %d alive members, want 3: %+v, %v", len(ms), ms, err)
	}
	cm, err := testClient(t, wd, a.GetAttr("sea").AsString()).Members(context.Background(),
		api.MembersFilter{Tags: map[string]string{"role": "cm", "pool": "w-b"}})
	if err != nil || len(cm) != 1 || cm[0].Name != "w-b-0" {
		t.Fatalf("cm of w-b: %+v, %v", cm, err)
	}
}

func TestEncryptedPool(t *testing.T) {
	t.Parallel()
	key, err := api.GossipKeyGen()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := providertest.Object(providerSchema().Provider, map[string]cty.Value{
		"binary": cty.StringVal(selfBinary()), "gossip_profile": cty.StringVal("fast"), "encrypt": cty.StringVal(key)})
	if err != nil {
		t.Fatal(err)
	}
	p := New().(*Provider)
	wd := t.TempDir()
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: pc, WorkDir: wd}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	s := create(t, p, "pool.secret", poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(2)}))
	defer destroy(t, p, "pool.secret", s)
	for _, d := range s.GetAttr("node_details").AsValueSlice() {
		self, err := testClient(t, wd, d.GetAttr("api").AsString()).Self(context.Background())
		if err != nil || !self.Encrypted {
			t.Fatalf("%s: encrypted=%v, %v", d.GetAttr("name").AsString(), self != nil && self.Encrypted, err)
		}
		args, _ := os.ReadFile("/proc/" + d.GetAttr("pid").AsBigFloat().Text('f', 0) + "/cmdline")
		if strings.Contains(string(args), key) {
			t.Error("the key is visible on the command line")
		}
	}
}

// TestSeaKeyPool: a pool with no encrypt gossips encrypted with the
// working directory's sea key, made in .pond/auth the first time, kept off
// the command line: on an address other hosts reach, and on loopback too,
// where every user of the host reaches the gossip port.
func TestSeaKeyPool(t *testing.T) {
	t.Setenv("POND_AUTHORITY", "")
	ctx := context.Background()
	configure := func(wd string, attrs map[string]cty.Value) *Provider {
		attrs["binary"], attrs["gossip_profile"] = cty.StringVal(selfBinary()), cty.StringVal("fast")
		pc, err := providertest.Object(providerSchema().Provider, attrs)
		if err != nil {
			t.Fatal(err)
		}
		p := New().(*Provider)
		if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: pc, WorkDir: wd}).Diagnostics); err != nil {
			t.Fatal(err)
		}
		return p
	}

	wd := t.TempDir()
	p := configure(wd, map[string]cty.Value{"bind_address": cty.StringVal("0.0.0.0")})
	s := create(t, p, "pool.open", poolConfig(nil))
	pids := pidsOf(s)
	t.Cleanup(func() { destroy(t, p, "pool.open", s); waitGone(t, pids) })
	key, err := providers.ReadSeaKey(wd)
	if err != nil {
		t.Fatalf("after a pool on 0.0.0.0: %v", err)
	}
	for _, d := range s.GetAttr("node_details").AsValueSlice() {
		self, err := testClient(t, wd, d.GetAttr("api").AsString()).Self(ctx)
		if err != nil || !self.Encrypted {
			t.Fatalf("%s: encrypted=%v, %v", d.GetAttr("name").AsString(), self != nil && self.Encrypted, err)
		}
		name := d.GetAttr("name").AsString()
		conf, err := os.ReadFile(filepath.Join(wd, ".pond", "local", "nodes", name, ConfigFileName))
		if err != nil || !strings.Contains(string(conf), knobs.Encrypt+" = "+key+"\n") {
			t.Errorf("%s's configuration file does not hold the sea key (%v)", name, err)
		}
		args, _ := os.ReadFile("/proc/" + d.GetAttr("pid").AsBigFloat().Text('f', 0) + "/cmdline")
		if strings.Contains(string(args), key) {
			t.Error("the key is visible on the command line")
		}
	}
	// A second provider of the working directory takes the same key.
	p2 := configure(wd, map[string]cty.Value{"bind_address": cty.StringVal("0.0.0.0")})
	if got, err := p2.gossipKey(); err != nil || got != key {
		t.Errorf("another provider of the directory: %q, %v; want the sea key", got, err)
	}
	// An explicit encrypt wins.
	other, _ := api.GossipKeyGen()
	p3 := configure(wd, map[string]cty.Value{"bind_address": cty.StringVal("0.0.0.0"), "encrypt": cty.StringVal(other)})
	if got, err := p3.gossipKey(); err != nil || got != other {
		t.Errorf("with encrypt: %q, %v; want encrypt", got, err)
	}

	loop := t.TempDir()
	lp := configure(loop, map[string]cty.Value{})
	ls := create(t, lp, "pool.loop", poolConfig(nil))
	lpids := pidsOf(ls)
	t.Cleanup(func() { destroy(t, lp, "pool.loop", ls); waitGone(t, lpids) })
	d := ls.GetAttr("node_details").AsValueSlice()[0]
	if self, err := testClient(t, loop, d.GetAttr("api").AsString()).Self(ctx); err != nil || !self.Encrypted {
		t.Errorf("a pool on loopback: encrypted=%v, %v; want encrypted", self != nil && self.Encrypted, err)
	}
	if _, err := providers.ReadSeaKey(loop); err != nil {
		t.Errorf("a pool on loopback made no sea key: %v", err)
	}
}

func TestConfigureErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		wd    string
		want  string
	}{
		{"missing binary", map[string]cty.Value{"binary": cty.StringVal("/nonexistent/pondctl")}, "/tmp", "binary"},
		{"bad profile", map[string]cty.Value{"gossip_profile": cty.StringVal("campus")}, "/tmp", `gossip_profile "campus"`},
		{"bad key", map[string]cty.Value{"encrypt": cty.StringVal("short")}, "/tmp", "encrypt"},
		{"no workdir", nil, "", "no working directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := providertest.Object(providerSchema().Provider, tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			err = providers.Err(New().Configure(context.Background(), providers.ConfigureRequest{Config: pc, WorkDir: tc.wd}).Diagnostics)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPoolNameClash(t *testing.T) {
	p := configured(t, t.TempDir())
	a := create(t, p, "pool.w[1]", poolConfig(nil))
	defer destroy(t, p, "pool.w[1]", a)
	cfg := poolConfig(nil)
	plan := p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: "pool", Address: `pool.w["1"]`,
		Prior: cty.NullVal(cfg.Type()), Config: cfg, ProposedNew: cfg})
	if err := providers.Err(plan.Diagnostics); err != nil {
		t.Fatal(err)
	}
	err := providers.Err(p.ApplyResourceChange(context.Background(), providers.ApplyRequest{TypeName: "pool", Address: `pool.w["1"]`,
		Prior: cty.NullVal(cfg.Type()), Planned: plan.Planned, Config: cfg}).Diagnostics)
	if err == nil || !strings.Contains(err.Error(), `pool name "w-1" is already used by pool.w[1]`) {
		t.Fatalf("clash: %v", err)
	}
	if !running(pidsOf(a)[0]) {
		t.Fatal("the clash killed the other pool's node")
	}
}

func TestReadGonePool(t *testing.T) {
	p := configured(t, t.TempDir())
	cur := poolConfig(map[string]cty.Value{"id": cty.StringVal("nothing"), "nodes": cty.NumberIntVal(1)})
	rr := p.ReadResource(context.Background(), providers.ReadRequest{TypeName: "pool", Address: "pool.nothing", Current: cur})
	if len(rr.Diagnostics) > 0 {
		t.Fatal(rr.Diagnostics)
	}
	if !rr.New.IsNull() {
		t.Fatalf("read of a pool with no journal = %#v, want null", rr.New)
	}
	// Deleting an already-gone pool succeeds.
	destroy(t, p, "pool.nothing", cur)
	if err := providers.Err(p.ImportResource(context.Background(), providers.ImportRequest{TypeName: "pool", ID: "nothing"}).Diagnostics); err == nil {
		t.Fatal("import of a missing pool succeeded")
	}
}

// TestCrashMidApplyIsReapedOrAdopted kills an apply as soon as it has
// started a node: the next apply reaps what the dead one never saw ready,
// adopts what it did, and ends with the whole pool.
func TestCrashMidApplyIsReapedOrAdopted(t *testing.T) {
	wd := t.TempDir()
	cmd := exec.Command(selfBinary(), "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=apply-child", "POND_TEST_WORKDIR="+wd)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill the child as soon as some node has started.
	j := journal{dir: filepath.Join(wd, ".pond", "local", "journal")}
	deadline := time.Now().Add(30 * time.Second)
	var orphans []*entry
	for {
		es, _ := j.all()
		orphans = orphans[:0]
		for _, e := range es {
			if e.alive() {
				orphans = append(orphans, e)
			}
		}
		if len(orphans) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("child never started a node")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	var orphanPIDs []int
	for _, e := range orphans {
		orphanPIDs = append(orphanPIDs, e.PID)
	}
	// Give the (now parentless) apply's later nodes a moment to be forked,
	// if any were in flight.
	time.Sleep(200 * time.Millisecond)
	es, _ := j.all()
	for _, e := range es {
		if e.alive() && !contains(orphanPIDs, e.PID) {
			orphanPIDs = append(orphanPIDs, e.PID)
		}
	}
	for _, pid := range orphanPIDs {
		if !running(pid) {
			t.Fatalf("orphan %d died on its own; the test proves nothing", pid)
		}
	}

	p := configured(t, wd)
	s := create(t, p, "pool.crash", poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(3)}))
	// A node the dead apply saw ready is adopted, the same process now a
	// node of the pool; every other one is reaped.
	kept := pidsOf(s)
	var reaped []int
	for _, pid := range orphanPIDs {
		if !contains(kept, pid) {
			reaped = append(reaped, pid)
		}
	}
	waitGone(t, reaped)
	if got := strings.Join(names(s), ","); got != "crash-0,crash-1,crash-2" {
		t.Fatalf("members = %s", got)
	}
	destroy(t, p, "pool.crash", s)
	waitGone(t, pidsOf(s))
	if es, _ := j.all(); len(es) != 0 {
		t.Fatalf("journal not empty after destroy: %d entries", len(es))
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func FuzzPoolName(f *testing.F) {
	for _, s := range []string{"pool.campus", `pool.w["a"]`, "pool.w[1]", "module.m.pool.x", `pool.w["ünï/code"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		name := PoolName(addr)
		for _, r := range name {
			if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				t.Fatalf("PoolName(%q) = %q has %q", addr, name, r)
			}
		}
		if strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-") {
			t.Fatalf("PoolName(%q) = %q", addr, name)
		}
	})
}

// TestIntentEntryFindsItsProcess covers pondctl dying between starting an
// agent and recording its pid: the journal entry holds only the intent, and
// the process is still found, by its data directory, and stopped.
func TestIntentEntryFindsItsProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "agent", "-name", "intent-0", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0",
		"-data-dir", dir, "-gossip-profile", "fast")
	cmd.Env = append(os.Environ(), roleEnv+"=agent")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e := &entry{Node: "intent-0", DataDir: dir}
	if !e.alive() {
		t.Fatal("the intent entry did not find its running agent")
	}
	if e.PID != cmd.Process.Pid {
		t.Fatalf("resolved pid %d, want %d", e.PID, cmd.Process.Pid)
	}
	(&entry{Node: "intent-0", DataDir: dir}).stop(10 * time.Second)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("stopping the intent entry did not stop its agent")
	}
	if (&entry{Node: "other", DataDir: t.TempDir()}).alive() {
		t.Fatal("an entry with no process claims to be alive")
	}
}

// TestUnexecdChildIsReaped covers pondctl killed after forking a node's
// process but before the child exec'd the agent: the child's argv is still
// pondctl's. The journal entry finds it once it has exec'd, by the nonce
// in its environment whatever its argv, and stops it.
func TestUnexecdChildIsReaped(t *testing.T) {
	const nonce = "unexecd-child-nonce"
	cmd := exec.Command(selfBinary(), "settling")
	cmd.Env = append(os.Environ(), roleEnv+"=settle", "POND_TEST_NONCE="+nonce)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() { _ = cmd.Process.Kill() }()
	parentStart, _, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	newEntry := func() *entry {
		return &entry{Node: "settle-0", DataDir: t.TempDir(), Nonce: nonce,
			Bin: selfBinary(), Parent: os.Getpid(), ParentStart: parentStart}
	}
	e := newEntry()
	if !e.alive() {
		t.Fatal("the intent entry did not find its child that had not yet exec'd")
	}
	if e.PID != cmd.Process.Pid {
		t.Fatalf("resolved pid %d, want %d", e.PID, cmd.Process.Pid)
	}
	newEntry().stop(10 * time.Second)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("stopping the intent entry did not stop the child")
	}
	if newEntry().alive() {
		t.Fatal("an entry whose process is gone claims to be alive")
	}
}

// TestPondPolicyBlock checks that the pool's pond_policy block becomes the
// nodes' POND_POLICY_* knobs, and that bad values are refused with where
// and why.
func TestPondPolicyBlock(t *testing.T) {
	block := func(attrs map[string]cty.Value) map[string]cty.Value {
		v, err := providertest.Object(&providerSchema().Resources["pool"].BlockTypes["pond_policy"].Block, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]cty.Value{"pond_policy": v}
	}
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  map[string]string
		err   string
	}{
		{name: "no block", attrs: nil, want: nil},
		{name: "empty block turns the policy on", attrs: block(nil), want: map[string]string{"POND_POLICY": "true"}},
		{name: "every argument", attrs: block(map[string]cty.Value{
			"max_members": cty.NumberIntVal(3), "max_ponds": cty.NumberIntVal(2), "query_interval": cty.StringVal("1s"),
			"grace": cty.StringVal("30"), "check_interval": cty.StringVal("500ms"), "negotiator_min_interval": cty.StringVal("0"),
			"requirements": cty.StringVal(`Site == "sea"`)}),
			want: map[string]string{"POND_POLICY": "true", "POND_POLICY_MAX_MEMBERS": "3", "POND_POLICY_MAX_PONDS": "2",
				"POND_POLICY_QUERY_INTERVAL": "1s", "POND_POLICY_GRACE": "30s", "POND_POLICY_CHECK_INTERVAL": "500ms",
				"POND_POLICY_NEGOTIATOR_MIN_INTERVAL": "0s", "POND_POLICY_REQUIREMENTS": `Site == "sea"`}},
		{name: "disabled", attrs: block(map[string]cty.Value{"enabled": cty.False}), want: map[string]string{"POND_POLICY": "false"}},
		{name: "zero members", attrs: block(map[string]cty.Value{"max_members": cty.NumberIntVal(0)}), err: "pond_policy.max_members: must be at least 1"},
		{name: "fractional ponds", attrs: block(map[string]cty.Value{"max_ponds": cty.NumberFloatVal(1.5)}), err: "pond_policy.max_ponds: 1.5 is not a whole number"},
		{name: "bad grace", attrs: block(map[string]cty.Value{"grace": cty.StringVal("later")}), err: `pond_policy.grace = "later": want a duration`},
		{name: "zero check interval", attrs: block(map[string]cty.Value{"check_interval": cty.StringVal("0s")}), err: "pond_policy.check_interval: must be more than zero"},
		{name: "bad requirements", attrs: block(map[string]cty.Value{"requirements": cty.StringVal("Memory >")}), err: "pond_policy.requirements"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := poolConfig(tc.attrs)
			verr := providers.Err(New().ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: "pool", Config: cfg}).Diagnostics)
			sp, err := specOf(cfg)
			if tc.err != "" {
				for _, e := range []error{verr, err} {
					if e == nil || !strings.Contains(e.Error(), tc.err) {
						t.Fatalf("error = %v, want one containing %q", e, tc.err)
					}
				}
				return
			}
			if verr != nil || err != nil {
				t.Fatalf("unexpected errors: %v, %v", verr, err)
			}
			if len(sp.Policy) != len(tc.want) {
				t.Fatalf("knobs %v, want %v", sp.Policy, tc.want)
			}
			for k, v := range tc.want {
				if sp.Policy[k] != v {
					t.Errorf("%s = %q, want %q", k, sp.Policy[k], v)
				}
			}
		})
	}
}

// TestPondDirIsPrivate checks that nothing the provider and its agents
// write under .pond is open to the group or others: directories 0700,
// files 0600. The encrypted pool puts a keyring in each node's data
// directory too.
func TestPondDirIsPrivate(t *testing.T) {
	t.Parallel()
	key, err := api.GossipKeyGen()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := providertest.Object(providerSchema().Provider, map[string]cty.Value{
		"binary": cty.StringVal(selfBinary()), "gossip_profile": cty.StringVal("fast"), "encrypt": cty.StringVal(key)})
	if err != nil {
		t.Fatal(err)
	}
	wd := t.TempDir()
	p := New().(*Provider)
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: pc, WorkDir: wd}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	s := create(t, p, "pool.private", poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(2)}))
	pids := pidsOf(s)
	t.Cleanup(func() { destroy(t, p, "pool.private", s); waitGone(t, pids) })
	root := filepath.Join(wd, ".pond")
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // a file renamed under us
				return nil
			}
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 || fi.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		n++
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %v is open to the group or others", path, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("walked only %d entries under %s", n, root)
	}
}

// TestReachSynonymNoReplace: changing a pool's reach replaces it, except
// between relay and its synonym reverse, which mean the same.
func TestReachSynonymNoReplace(t *testing.T) {
	p := configured(t, t.TempDir())
	for _, tc := range []struct {
		from, to string
		replace  bool
	}{
		{"relay", "reverse", false},
		{"reverse", "relay", false},
		{"relay", "relay", false},
		{"relay", "direct", true},
		{"reverse", "auto", true},
	} {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			prior := poolConfig(map[string]cty.Value{"id": cty.StringVal("campus"), "nodes": cty.NumberIntVal(1),
				"slots": cty.NumberIntVal(1), "reach": cty.StringVal(tc.from)})
			cfg := poolConfig(map[string]cty.Value{"reach": cty.StringVal(tc.to)})
			plan := p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: "pool", Address: "pool.campus",
				Prior: prior, Config: cfg, ProposedNew: providertest.ProposedNew(providerSchema().Resources["pool"], prior, cfg)})
			if err := providers.Err(plan.Diagnostics); err != nil {
				t.Fatal(err)
			}
			if got := len(plan.RequiresReplace) > 0; got != tc.replace {
				t.Errorf("replace = %v (%v), want %v", got, plan.RequiresReplace, tc.replace)
			}
		})
	}
}

// TestLimits checks that plan refuses a pool beyond the provider's limits,
// by default and as the provider block sets them, and says how many agent
// processes it starts.
func TestLimits(t *testing.T) {
	ctx := context.Background()
	plan := func(p *Provider, attrs map[string]cty.Value) hcl.Diagnostics {
		cfg := poolConfig(attrs)
		return p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: "pool.big",
			Prior: cty.NullVal(cfg.Type()), Config: cfg, ProposedNew: cfg}).Diagnostics
	}
	def := configured(t, t.TempDir())
	pc, err := providertest.Object(providerSchema().Provider, map[string]cty.Value{
		"binary": cty.StringVal(selfBinary()), "max_nodes": cty.NumberIntVal(4), "max_slots_per_node": cty.NumberIntVal(8)})
	if err != nil {
		t.Fatal(err)
	}
	small := New().(*Provider)
	if err := providers.Err(small.Configure(ctx, providers.ConfigureRequest{Config: pc, WorkDir: t.TempDir()}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		p     *Provider
		attrs map[string]cty.Value
		want  string // substring of the error; "" for none
		warn  string // substring of the warning
	}{
		{"default nodes", def, map[string]cty.Value{"nodes": cty.NumberIntVal(100000)},
			`pool.big: nodes = 100000 is more than the local provider allows (max_nodes = 64)`, ""},
		{"default slots", def, map[string]cty.Value{"slots": cty.NumberIntVal(1000000)},
			`pool.big: slots = 1000000 is more than the local provider allows (max_slots_per_node = 256)`, ""},
		{"default ok", def, map[string]cty.Value{"nodes": cty.NumberIntVal(64), "slots": cty.NumberIntVal(256)},
			"", "pool.big will start 64 pondctl agent processes"},
		{"max_nodes", small, map[string]cty.Value{"nodes": cty.NumberIntVal(5)},
			`nodes = 5 is more than the local provider allows (max_nodes = 4)`, ""},
		{"max_slots_per_node", small, map[string]cty.Value{"slots": cty.NumberIntVal(9)},
			`slots = 9 is more than the local provider allows (max_slots_per_node = 8)`, ""},
		{"within", small, map[string]cty.Value{"nodes": cty.NumberIntVal(4), "slots": cty.NumberIntVal(8)},
			"", "Will start 4 agent processes"},
		{"one", small, nil, "", "Will start 1 agent process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags := plan(tc.p, tc.attrs)
			err := providers.Err(diags)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if tc.warn != "" {
				var ws []string
				for _, d := range diags {
					if d.Severity == hcl.DiagWarning {
						ws = append(ws, d.Summary+": "+d.Detail)
					}
				}
				if !strings.Contains(strings.Join(ws, "\n"), tc.warn) {
					t.Fatalf("warnings %q, want %q", ws, tc.warn)
				}
			}
		})
	}
	pc, err = providertest.Object(providerSchema().Provider, map[string]cty.Value{
		"binary": cty.StringVal(selfBinary()), "max_nodes": cty.NumberIntVal(0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.Err(New().Configure(ctx, providers.ConfigureRequest{Config: pc, WorkDir: t.TempDir()}).Diagnostics); err == nil || !strings.Contains(err.Error(), "max_nodes and max_slots_per_node must be at least 1") {
		t.Fatalf("max_nodes = 0: %v", err)
	}
}

// testClient is a client of the agent API at addr presenting the token of
// the working directory wd, as pondctl run there does.
func testClient(t *testing.T, wd, addr string) *api.Client {
	t.Helper()
	tok, err := auth.FindToken(func(string) string { return "" }, wd)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := auth.FindClientTLS(func(string) string { return "" }, wd)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(addr).WithTLS(cfg).WithToken(tok)
}

// TestReachArgument checks the pool's reach: the three modes pass to the
// spec, anything else and a free pool in relay mode are refused at
// validation with the argument's name.
func TestReachArgument(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  string
		err   string
	}{
		{"unset", nil, "", ""},
		{"relay", map[string]cty.Value{"reach": cty.StringVal("relay")}, "relay", ""},
		{"direct", map[string]cty.Value{"reach": cty.StringVal("direct")}, "direct", ""},
		{"auto", map[string]cty.Value{"reach": cty.StringVal("auto")}, "auto", ""},
		{"reverse, relay's synonym", map[string]cty.Value{"reach": cty.StringVal("reverse")}, "reverse", ""},
		{"unknown mode", map[string]cty.Value{"reach": cty.StringVal("tunnel")}, "", `reach = "tunnel": want auto, direct or relay (or its synonym reverse)`},
		{"free pool", map[string]cty.Value{"reach": cty.StringVal("relay"), "free": cty.True}, "", "free pool have no central manager"},
		{"free pool, reverse", map[string]cty.Value{"reach": cty.StringVal("reverse"), "free": cty.True}, "", `reach = "reverse": the workers of a free pool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := poolConfig(tc.attrs)
			verr := providers.Err(New().ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: "pool", Config: cfg}).Diagnostics)
			sp, err := specOf(cfg)
			if tc.err != "" {
				for _, e := range []error{verr, err} {
					if e == nil || !strings.Contains(e.Error(), tc.err) {
						t.Fatalf("error = %v, want one containing %q", e, tc.err)
					}
				}
				return
			}
			if verr != nil || err != nil || sp.Reach != tc.want {
				t.Fatalf("reach %q, errors %v, %v; want %q", sp.Reach, verr, err, tc.want)
			}
		})
	}
}

// TestReplicasArgument checks the pool's replicas: a number of other
// members passes to the spec and to the nodes' configuration
// (POND_CM_REPLICAS); a negative one, one that leaves no room for the
// central manager and one of a free pool are refused at validation with
// the argument's name.
func TestReplicasArgument(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  int
		err   string
	}{
		{"unset", nil, 0, ""},
		{"two of four", map[string]cty.Value{"nodes": cty.NumberIntVal(4), "replicas": cty.NumberIntVal(2)}, 2, ""},
		{"all others", map[string]cty.Value{"nodes": cty.NumberIntVal(3), "replicas": cty.NumberIntVal(2)}, 2, ""},
		{"negative", map[string]cty.Value{"nodes": cty.NumberIntVal(3), "replicas": cty.NumberIntVal(-1)}, 0, "replicas = -1: want 0 or more"},
		{"as many as nodes", map[string]cty.Value{"nodes": cty.NumberIntVal(2), "replicas": cty.NumberIntVal(2)}, 0, "replicas = 2: the pool has 2 nodes"},
		{"not whole", map[string]cty.Value{"nodes": cty.NumberIntVal(4), "replicas": cty.NumberFloatVal(1.5)}, 0, "replicas: 1.5 is not a whole number"},
		{"free pool", map[string]cty.Value{"nodes": cty.NumberIntVal(3), "replicas": cty.NumberIntVal(1), "free": cty.True}, 0, "a free pool has no central manager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := poolConfig(tc.attrs)
			verr := providers.Err(New().ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: "pool", Config: cfg}).Diagnostics)
			sp, err := specOf(cfg)
			if tc.err != "" {
				for _, e := range []error{verr, err} {
					if e == nil || !strings.Contains(e.Error(), tc.err) {
						t.Fatalf("error = %v, want one containing %q", e, tc.err)
					}
				}
				return
			}
			if verr != nil || err != nil || sp.Replicas != tc.want {
				t.Fatalf("replicas %d, errors %v, %v; want %d", sp.Replicas, verr, err, tc.want)
			}
			dir := t.TempDir()
			// A pool on loopback: no gossip key.
			p := &Provider{gossipKey: func() (string, error) { return "", nil }}
			if err := p.writeNodeConfig(dir, launchReq{spec: sp, address: "pool.p"}); err != nil {
				t.Fatal(err)
			}
			conf := readTestFile(t, filepath.Join(dir, ConfigFileName))
			if has := strings.Contains(conf, fmt.Sprintf("POND_CM_REPLICAS = %d\n", tc.want)); has != (tc.want > 0) {
				t.Errorf("configuration file:\n%s\nwant POND_CM_REPLICAS = %d: %v", conf, tc.want, tc.want > 0)
			}
		})
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConfigChangeWrittenBeforeStopping changes a pool's configuration
// while one node's new configuration file cannot be written: the apply
// fails before any node stops, every agent runs on, the provider returns
// no state (the prior is kept, not tainted); once the file can be
// written, the same change restarts the nodes.
func TestConfigChangeWrittenBeforeStopping(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	p := configured(t, wd)
	cfg := func(interval string) cty.Value {
		return poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(2),
			"config": cty.MapVal(map[string]cty.Value{"NEGOTIATOR_INTERVAL": cty.StringVal(interval)})})
	}
	s := create(t, p, "pool.cfg", cfg("5"))
	t.Cleanup(func() { destroy(t, p, "pool.cfg", s) })
	before := pidsOf(s)
	update := func(c cty.Value) providers.ApplyResponse {
		plan := p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: "pool", Address: "pool.cfg", Prior: s, Config: c, ProposedNew: c})
		if err := providers.Err(plan.Diagnostics); err != nil {
			t.Fatal(err)
		}
		return p.ApplyResourceChange(context.Background(), providers.ApplyRequest{TypeName: "pool", Address: "pool.cfg", Prior: s, Planned: plan.Planned, Config: c})
	}
	// A directory where the node's new file is first written.
	details := s.GetAttr("node_details").AsValueSlice()
	blocker := filepath.Join(nodeDir(t, details[1]), ConfigFileName+".tmp")
	if err := os.Mkdir(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	resp := update(cfg("7"))
	err := providers.Err(resp.Diagnostics)
	if err == nil || !strings.Contains(err.Error(), "before any node stopped") {
		t.Fatalf("the apply with a node's file unwritable: %v", err)
	}
	if resp.New != cty.NilVal {
		t.Errorf("the failed apply returned a state: %#v", resp.New)
	}
	for _, pid := range before {
		if !running(pid) {
			t.Errorf("agent %d stopped though the apply failed before any change", pid)
		}
	}
	// (The failed write took its leftover, the blocker, away.)
	if err := os.Remove(blocker); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	resp = update(cfg("7"))
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	s = resp.New
	waitGone(t, before)
	if got := pidsOf(s); len(got) != 2 || contains(before, got[0]) || contains(before, got[1]) {
		t.Errorf("agents %v after the change, before %v: want both restarted", got, before)
	}
}
