package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// TestNodeCredentials checks that every node of a pool trusts the working
// directory's authority and holds a token of its own (node.token, 0600)
// for node/NAME with DAEMON and SEA_READ, SEA_WRITE too for the central
// manager, lasting node_token_lifetime; that the token is not on the
// agent's command line; that the daemons' wire refuses a caller without a
// token and takes the working directory's; and that no pool password is
// made.
func TestNodeCredentials(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	cfg, err := providertest.Object(providerSchema().Provider, map[string]cty.Value{
		"binary":              cty.StringVal(selfBinary()),
		"gossip_profile":      cty.StringVal("fast"),
		"node_token_lifetime": cty.StringVal("2h"),
	})
	if err != nil {
		t.Fatal(err)
	}
	p := New().(*Provider)
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: cfg, WorkDir: wd}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	s := create(t, p, "pool.a", poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(2)}))
	defer destroy(t, p, "pool.a", s)

	a, err := auth.OpenAuthority(filepath.Join(wd, ".pond", "auth"))
	if err != nil {
		t.Fatal(err)
	}
	v := a.Verifier()
	for _, d := range s.GetAttr("node_details").AsValueSlice() {
		name := d.GetAttr("name").AsString()
		path := filepath.Join(p.dataDir(name), NodeTokenFile)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("%s: no node token: %v", name, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: node token has mode %04o, want 0600", name, fi.Mode().Perm())
		}
		data, _ := os.ReadFile(path)
		c, err := v.Verify(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("%s: node token: %v", name, err)
		}
		want, cm := []auth.Scope{auth.Daemon, auth.SeaRead}, ""
		if strings.HasSuffix(name, "-0") {
			// The central manager's token is a pond grant bound to
			// its own API address.
			want, cm = append(want, auth.SeaWrite), d.GetAttr("api").AsString()
		}
		if c.CentralManager != cm {
			t.Errorf("%s: token bound to central manager %q, want %q", name, c.CentralManager, cm)
		}
		if c.Subject != "node/"+name || !slices.Equal(c.Scopes, want) {
			t.Errorf("%s: token of %s with %v, want node/%s with %v", name, c.Subject, c.Scopes, name, want)
		}
		if life := c.Expires.Sub(c.IssuedAt); life != 2*time.Hour {
			t.Errorf("%s: token lasts %v, want node_token_lifetime's 2h", name, life)
		}
		args, _ := os.ReadFile("/proc/" + d.GetAttr("pid").AsBigFloat().Text('f', 0) + "/cmdline")
		argv := strings.Split(string(args), "\x00")
		for _, flag := range []string{"-trusted-keys", "-token-issuer", "-token-file", "-htcondor-key"} {
			if !slices.Contains(argv, flag) {
				t.Errorf("%s: agent started without %s: %q", name, flag, argv)
			}
		}
		if strings.Contains(string(args), strings.TrimSpace(string(data))) {
			t.Errorf("%s: the token is visible on the command line", name)
		}
		api := d.GetAttr("api").AsString()
		seaTLS, err := auth.FindClientTLS(func(string) string { return "" }, wd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.NewClient(api, "").WithTLS(seaTLS).Master().Info(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("%s: master info without a token: %v, want 401", name, err)
		}
		tok, err := auth.FindToken(func(string) string { return "" }, wd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.NewClient(api, tok).WithTLS(seaTLS).Master().Info(context.Background()); err != nil {
			t.Errorf("%s: master info with the working directory's token: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, ".pond", "pool_password")); err == nil {
		t.Error("the provider made a pool password")
	}
	issued, err := a.List()
	if err != nil || len(issued) != 3 {
		t.Errorf("the authority recorded %v, %v; want the 2 node tokens and the central manager's grant", issued, err)
	}
}

// TestNodeTokenLifetimeRefused checks that a node_token_lifetime that is
// no duration, or too short, is refused with a message that names it.
func TestNodeTokenLifetimeRefused(t *testing.T) {
	for _, bad := range []string{"30 days", "10s", "-1h"} {
		cfg, err := providertest.Object(providerSchema().Provider, map[string]cty.Value{
			"binary": cty.StringVal(selfBinary()), "node_token_lifetime": cty.StringVal(bad)})
		if err != nil {
			t.Fatal(err)
		}
		err = providers.Err(New().Configure(context.Background(), providers.ConfigureRequest{Config: cfg, WorkDir: t.TempDir()}).Diagnostics)
		if err == nil || !strings.Contains(err.Error(), "node_token_lifetime") {
			t.Errorf("node_token_lifetime %q: %v, want an error naming it", bad, err)
		}
	}
}

// TestGrantRestored checks that a central manager left with its interim
// token (pondctl killed between the node's start and its grant) gets its
// pond grant at the next apply.
func TestGrantRestored(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	cfg, err := providertest.Object(providerSchema().Provider, map[string]cty.Value{
		"binary": cty.StringVal(selfBinary()), "gossip_profile": cty.StringVal("fast")})
	if err != nil {
		t.Fatal(err)
	}
	p := New().(*Provider)
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: cfg, WorkDir: wd}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	pc := poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(1)})
	s := create(t, p, "pool.a", pc)
	defer destroy(t, p, "pool.a", s)
	d := s.GetAttr("node_details").AsValueSlice()[0]
	path := filepath.Join(p.dataDir(d.GetAttr("name").AsString()), NodeTokenFile)
	a, err := p.authority()
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := a.Issue("node/a-0", nodeScopes(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := writePrivate(path, tok+"\n"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: "pool.a", Prior: s, Config: pc, ProposedNew: pc})
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pool", Address: "pool.a", Prior: s, Planned: plan.Planned, Config: pc})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	c, err := a.Verifier().Verify(strings.TrimSpace(string(data)))
	if err != nil || c.CentralManager != d.GetAttr("api").AsString() {
		t.Fatalf("central manager's token after apply: %+v, %v; want a grant bound to %s", c, err, d.GetAttr("api").AsString())
	}
}

// TestTokensRenewedByApply checks that a plan shows a pool whose nodes'
// tokens are within a week of their expiry as updated, and that the apply
// writes each node a new token (a grant for the central manager, a node
// token for the worker) with no restart.
func TestTokensRenewedByApply(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	cfg, err := providertest.Object(providerSchema().Provider, map[string]cty.Value{
		"binary": cty.StringVal(selfBinary()), "gossip_profile": cty.StringVal("fast")})
	if err != nil {
		t.Fatal(err)
	}
	p := New().(*Provider)
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: cfg, WorkDir: wd}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	pc := poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(2)})
	s := create(t, p, "pool.r", pc)
	defer destroy(t, p, "pool.r", s)
	a, err := p.authority()
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) *auth.Claims {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(p.dataDir(name), NodeTokenFile))
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.Verifier().Verify(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("%s's token: %v", name, err)
		}
		return c
	}
	names := []string{nodeName("r", 0), nodeName("r", 1)}
	before := map[string]*auth.Claims{}
	for _, n := range names {
		before[n] = read(n)
	}
	ctx := context.Background()
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: "pool.r", Prior: s, Config: pc, ProposedNew: pc})
	if err := providers.Err(plan.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if !plan.Planned.GetAttr("node_details").IsKnown() {
		t.Fatal("fresh tokens: the plan shows the pool updated")
	}
	// 25 days on, the 30-day tokens have 5 days left.
	p.now = func() time.Time { return time.Now().Add(25 * 24 * time.Hour) }
	plan = p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "pool", Address: "pool.r", Prior: s, Config: pc, ProposedNew: pc})
	if plan.Planned.GetAttr("node_details").IsKnown() {
		t.Fatal("tokens within a week of their expiry: the plan shows no update")
	}
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pool", Address: "pool.r", Prior: s, Planned: plan.Planned, Config: pc})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	s = resp.New
	for _, n := range names {
		c := read(n)
		if c.ID == before[n].ID || c.Expires.Before(before[n].Expires) || c.Subject != "node/"+n {
			t.Fatalf("%s: token after apply %+v, before %+v: want a new one", n, c, before[n])
		}
	}
	if cm := read(names[0]); cm.CentralManager == "" {
		t.Fatalf("the central manager's renewed token is no pond grant: %+v", cm)
	}
	for i, d := range s.GetAttr("node_details").AsValueSlice() {
		if pid := d.GetAttr("pid"); !pid.IsKnown() || pid.IsNull() {
			t.Fatalf("node %d: no pid after apply", i)
		}
	}
}
