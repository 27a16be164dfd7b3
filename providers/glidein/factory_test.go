package glidein

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/local"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// startFactoryPool starts pool campus of one node in wd with the local
// provider told that a glidein's factory block grows it, and returns its
// central manager's API address.
func startFactoryPool(t *testing.T, wd string) string {
	t.Helper()
	return startLocalPool(t, wd, []string{"campus"})
}

// startLocalPool starts pool campus of one node in wd with the local provider
// told that glideins' factory blocks grow factoryPools, and returns its
// central manager's API address.
func startLocalPool(t *testing.T, wd string, factoryPools []string) string {
	t.Helper()
	ctx := context.Background()
	p := local.New()
	pc, err := providertest.Object(p.Schema().Provider, map[string]cty.Value{
		"binary": cty.StringVal(selfBinary()), "gossip_profile": cty.StringVal("fast")})
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: pc, WorkDir: wd, FactoryPools: factoryPools}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	rs := p.Schema().Resources["pool"]
	cfg, err := providertest.Object(rs, map[string]cty.Value{"nodes": cty.NumberIntVal(1),
		"config": cty.MapVal(map[string]cty.Value{"NEGOTIATOR_INTERVAL": cty.StringVal("1"), "POND_FACTORY_INTERVAL": cty.StringVal("1s")})})
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

// factoryFixture starts a Slurm cluster and pool campus, whose central
// manager runs a factory with credentials, and returns them with a slurm
// provider of that cluster, and a function that lists the jobs squeue
// shows queued or running.
func factoryFixture(t *testing.T) (*slurmtest.Cluster, string, string, *Provider, func() []string) {
	t.Helper()
	slurmtest.Require(t)
	c := slurmtest.Shared(t, 1) // a node of 2 CPUs and 2000 MB
	for _, kv := range c.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // for the central manager's factory too
	}
	wd := t.TempDir()
	cm := startFactoryPool(t, wd)
	sl, err := slurm.New(slurm.Config{WorkDir: filepath.Join(t.TempDir(), "work"), Partition: c.Partitions[0]})
	if err != nil {
		t.Fatal(err)
	}
	p := configured(t, wd, sl, nil)
	queued := func() []string {
		return strings.Fields(c.Run(t, "squeue", "-h", "-t", "PD,R,CF", "-o", "%j"))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("squeue:\n%s\nslurm:\n%s", c.Run(t, "squeue", "-h", "-t", "all", "-o", "%i %j %T %r"), c.Logs())
		}
	})
	return c, wd, cm, p, queued
}

// submitFor queues n jobs of secs seconds at the pool's central manager
// cm that only a glidein with Site = "hpc" runs.
func submitFor(t *testing.T, wd, cm string, n, secs int) {
	t.Helper()
	sub := filepath.Join(wd, "job.sub")
	os.WriteFile(sub, []byte(fmt.Sprintf("executable = /bin/sleep\narguments = %d\ntransfer_executable = false\nrequirements = Site == \"hpc\"\nrequest_memory = 16\nqueue %d\n", secs, n)), 0o600)
	var out, errOut strings.Builder
	if code := tools.Submit(context.Background(), []string{"-pool", cm, sub}, &out, &errOut, []string{"PWD=" + wd}); code != 0 {
		t.Fatalf("submit: %s%s", out.String(), errOut.String())
	}
}

// factoryBlock is a glidein resource's factory block.
func factoryBlock(attrs map[string]cty.Value) cty.Value {
	return object(&glideinSchema().BlockTypes["factory"].Block, attrs)
}

// TestFactoryEntryLifecycle drives a glidein resource with a factory block
// on a real Slurm cluster: a resource that kept a glidein of its own
// (nodes) switched to a factory block cancels it, and apply installs the
// entry in the pool's central manager (no glidein yet: no job waits); idle jobs make the factory
// submit glideins, which refresh shows with the entry's funnel; the entry
// removed behind pond's back is drift that refresh reports and plan turns
// into a change, which apply repairs; a change of the block changes the
// entry; destroy removes the entry and cancels every glidein of it, which
// leaves squeue empty.
func TestFactoryEntryLifecycle(t *testing.T) {
	_, wd, cm, p, queued := factoryFixture(t)
	cfg := func(maxQueued int) cty.Value {
		return glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "lifetime": cty.StringVal("10m"),
			"idle_timeout": cty.StringVal("20s"), "memory": cty.StringVal("500MB"),
			"attributes": cty.ObjectVal(map[string]cty.Value{"Site": cty.StringVal("hpc")}),
			"factory": factoryBlock(map[string]cty.Value{"max_queued": cty.NumberIntVal(int64(maxQueued)),
				"max_running": cty.NumberIntVal(2), "ramp": cty.StringVal("none")})})
	}
	const addr = "glidein.hpc"
	// First a glidein of its own (nodes), then the factory's: its glidein
	// is cancelled.
	nodes := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(1),
		"lifetime": cty.StringVal("10m"), "idle_timeout": cty.StringVal("5m"), "memory": cty.StringVal("500MB")})
	state, err := applyConfig(t, p, addr, cty.NullVal(nodes.Type()), nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	own := ids(state)
	if q := queued(); len(own) != 1 || len(q) != 1 || q[0] != own[0] {
		t.Fatalf("with nodes = 1, the state lists %v and squeue %v", own, q)
	}
	state, err = applyConfig(t, p, addr, state, cfg(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if q := queued(); len(q) != 0 {
		t.Fatalf("after the switch to a factory block, squeue shows %v (the resource's own glidein was %v)", q, own)
	}
	prefix := api.FactoryPrefix("campus") + "hpc-"
	if got := state.GetAttr("id").AsString(); got != prefix || state.GetAttr("entry").AsString() != "hpc" {
		t.Fatalf("id %q entry %#v, want %q and hpc", got, state.GetAttr("entry"), prefix)
	}
	if !state.GetAttr("nodes").IsNull() {
		t.Errorf("nodes %#v with a factory block", state.GetAttr("nodes"))
	}
	admin, err := p.adminClient(cm)
	if err != nil {
		t.Fatal(err)
	}
	entry := func() *api.FactoryEntrySpec {
		t.Helper()
		st, err := admin.Factory(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range st.Entries {
			if e.Name == "hpc" {
				data, _ := json.Marshal(e.Config)
				got, err := api.ParseFactoryEntry(data)
				if err != nil {
					t.Fatal(err)
				}
				return &got
			}
		}
		return nil
	}
	e := entry()
	if e == nil || e.Site.Kind != "slurm" || e.Limits.MaxQueued != 2 || e.Template.MemoryMB != 500 ||
		e.Template.Attributes["Site"] != `"hpc"` || time.Duration(e.Template.IdleTimeout) != 20*time.Second {
		t.Fatalf("the central manager's entry: %+v", e)
	}
	time.Sleep(3 * time.Second)
	if q := queued(); len(q) != 0 {
		t.Fatalf("with no job waiting, squeue shows %v", q)
	}

	// Jobs wait: the factory submits glideins, at most max_running.
	submitFor(t, wd, cm, 3, 30)
	deadline := time.Now().Add(40 * time.Second)
	for len(queued()) == 0 {
		if time.Now().After(deadline) {
			st, _ := admin.Factory(context.Background())
			t.Fatalf("no glidein submitted for the waiting jobs: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	resp := p.ReadResource(context.Background(), providers.ReadRequest{TypeName: ResourceType, Address: addr, Current: state})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	state = resp.New
	f := state.GetAttr("funnel")
	if f.IsNull() || f.GetAttr("requested").AsBigFloat().Sign() == 0 || len(ids(state)) == 0 || len(ids(state)) > 2 {
		t.Fatalf("after refresh: funnel %#v, ids %v", f, ids(state))
	}
	for _, id := range ids(state) {
		if !strings.HasPrefix(id, prefix) {
			t.Errorf("glidein %s is not under %s", id, prefix)
		}
	}

	// Removed behind pond's back.
	if err := admin.RemoveFactoryEntry(context.Background(), "hpc"); err != nil {
		t.Fatal(err)
	}
	resp = p.ReadResource(context.Background(), providers.ReadRequest{TypeName: ResourceType, Address: addr, Current: state})
	if !resp.New.GetAttr("entry").IsNull() || len(resp.Diagnostics) == 0 || !strings.Contains(resp.Diagnostics[0].Detail, "removed behind pond's back") {
		t.Fatalf("refresh of a removed entry: entry %#v, %v", resp.New.GetAttr("entry"), resp.Diagnostics)
	}
	state = resp.New
	plan := p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: ResourceType, Address: addr, Prior: state,
		Config: cfg(2), ProposedNew: providertest.ProposedNew(glideinSchema(), state, cfg(2))})
	if err := providers.Err(plan.Diagnostics); err != nil || plan.Planned.GetAttr("entry").IsKnown() {
		t.Fatalf("plan after the entry was removed: entry %#v, %v", plan.Planned.GetAttr("entry"), err)
	}
	// Repaired, and changed.
	if state, err = applyConfig(t, p, addr, state, cfg(1), nil); err != nil {
		t.Fatal(err)
	}
	if e := entry(); e == nil || e.Limits.MaxQueued != 1 {
		t.Fatalf("after apply, the entry is %+v", e)
	}
	resp = p.ReadResource(context.Background(), providers.ReadRequest{TypeName: ResourceType, Address: addr, Current: state})
	if err := providers.Err(resp.Diagnostics); err != nil || resp.New.GetAttr("entry").IsNull() {
		t.Fatalf("refresh after the repair: entry %#v, %v", resp.New.GetAttr("entry"), resp.Diagnostics)
	}
	state = resp.New
	// Changed behind pond's back.
	e = entry()
	e.Limits.MaxRunning = 9
	raw, _ := json.Marshal(e)
	if err := admin.SetFactoryEntry(context.Background(), "hpc", raw); err != nil {
		t.Fatal(err)
	}
	resp = p.ReadResource(context.Background(), providers.ReadRequest{TypeName: ResourceType, Address: addr, Current: state})
	if !resp.New.GetAttr("entry").IsNull() || len(resp.Diagnostics) == 0 || !strings.Contains(resp.Diagnostics[0].Detail, "changed behind pond's back") {
		t.Fatalf("refresh of a changed entry: entry %#v, %v", resp.New.GetAttr("entry"), resp.Diagnostics)
	}
	if state, err = applyConfig(t, p, addr, resp.New, cfg(1), nil); err != nil {
		t.Fatal(err)
	}
	if e := entry(); e == nil || e.Limits.MaxRunning != 2 {
		t.Fatalf("after apply, the entry is %+v", e)
	}

	destroyAll(t, p, addr, state)
	if e := entry(); e != nil {
		t.Errorf("after destroy the central manager still has the entry %+v", e)
	}
	if q := queued(); len(q) != 0 {
		t.Errorf("after destroy squeue shows %v", q)
	}
	if recs, _ := p.journal.list(prefix); len(recs) != 0 {
		t.Errorf("after destroy the journal holds %d records", len(recs))
	}
	time.Sleep(3 * time.Second)
	if q := queued(); len(q) != 0 {
		t.Errorf("after destroy, with jobs still waiting, squeue shows %v", q)
	}
}

// TestEntryName checks the names of factory entries: readable, lower-case
// letters and digits only (no '-', so that no entry's prefix begins
// another's), distinct for addresses that clean to the same name, and
// short enough for the factory's glidein IDs.
func TestEntryName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ address, want string }{
		{"glidein.hpc", "hpc"},
		{"glidein.gpu2", "gpu2"},
		{"glidein.HPC", "hpc" + hashOf("glidein.HPC")},
		{`glidein.w["a"]`, "wa" + hashOf(`glidein.w["a"]`)},
		{"glidein.w_a", "wa" + hashOf("glidein.w_a")},
		{"glidein.averyveryverylongname", "averyv" + hashOf("glidein.averyveryverylongname")},
		{"module.m.glidein.x", "mx" + hashOf("module.m.glidein.x")},
	} {
		got := EntryName(tc.address)
		if got != tc.want {
			t.Errorf("EntryName(%s) = %q, want %q", tc.address, got, tc.want)
		}
		if len(got) > maxEntryName || strings.ContainsAny(got, "-_.") {
			t.Errorf("EntryName(%s) = %q: too long or not letters and digits", tc.address, got)
		}
		id := api.FactoryPrefix("a_pool_with_a_long_name") + got + "-12345-abcdef12"
		if len(id) > 64 {
			t.Errorf("a glidein ID of entry %q is %d characters: %s", got, len(id), id)
		}
	}
}

func hashOf(address string) string {
	sum := sha256.Sum256([]byte(address))
	return hex.EncodeToString(sum[:3])
}

// TestFactoryBreakerInFunnel starts, through a glidein resource with a
// factory block, glideins on a real Slurm cluster that fail their
// validation: the entry's breaker opens, and the resource's funnel, after
// a refresh, says so and why, with the failures counted.
func TestFactoryBreakerInFunnel(t *testing.T) {
	_, wd, cm, p, queued := factoryFixture(t)
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "lifetime": cty.StringVal("10m"),
		"idle_timeout": cty.StringVal("20s"), "memory": cty.StringVal("500MB"),
		"attributes": cty.ObjectVal(map[string]cty.Value{"Site": cty.StringVal("hpc")}),
		"validate": cty.ObjectVal(map[string]cty.Value{"disk": cty.NullVal(cty.String), "memory": cty.NullVal(cty.String),
			"command": cty.ListVal([]cty.Value{cty.StringVal("/bin/false")})}),
		"factory": factoryBlock(map[string]cty.Value{"max_queued": cty.NumberIntVal(1), "max_running": cty.NumberIntVal(1),
			"breaker_failures": cty.NumberIntVal(1), "breaker_backoff": cty.StringVal("1h")})})
	const addr = "glidein.hpc"
	state, err := applyConfig(t, p, addr, cty.NullVal(cfg.Type()), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer destroyAll(t, p, addr, state)
	submitFor(t, wd, cm, 1, 5)
	var f cty.Value
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp := p.ReadResource(context.Background(), providers.ReadRequest{TypeName: ResourceType, Address: addr, Current: state})
		if err := providers.Err(resp.Diagnostics); err != nil {
			t.Fatal(err)
		}
		state = resp.New
		f = state.GetAttr("funnel")
		if !f.IsNull() && f.GetAttr("breaker_open").True() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the breaker did not open: funnel %#v", f)
		}
		time.Sleep(time.Second)
	}
	// squeue says only that the job failed; sacct gives its exit code,
	// the glidein's for a failed validation, and its status file why.
	if why := f.GetAttr("breaker_reason").AsString(); !strings.Contains(why, "glideins failed within") ||
		!strings.Contains(why, "exit code 3: validation failed: check command /bin/false: exit status 1") ||
		f.GetAttr("failed").AsBigFloat().Sign() == 0 || f.GetAttr("validated").AsBigFloat().Sign() != 0 ||
		f.GetAttr("breaker_until").AsString() == "" {
		t.Errorf("funnel with the breaker open: %#v", f)
	}
	requested := f.GetAttr("requested")
	time.Sleep(3 * time.Second)
	if q := queued(); len(q) != 0 {
		t.Errorf("with the breaker open, squeue shows %v", q)
	}
	resp := p.ReadResource(context.Background(), providers.ReadRequest{TypeName: ResourceType, Address: addr, Current: state})
	if got := resp.New.GetAttr("funnel").GetAttr("requested"); !got.RawEquals(requested) {
		t.Errorf("submitted with the breaker open: requested %#v, then %#v", requested, got)
	}
}

// TestFactoryNeedsDescribedSite checks that plan refuses a factory block
// for a site a central manager cannot make again (one that does not
// describe itself), at the block, before anything is set.
func TestFactoryNeedsDescribedSite(t *testing.T) {
	t.Parallel()
	p := configured(t, t.TempDir(), newSite(t, roleIdle), nil)
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:1"),
		"factory": factoryBlock(map[string]cty.Value{"max_queued": cty.NumberIntVal(1), "max_running": cty.NumberIntVal(1)})})
	null := cty.NullVal(cfg.Type())
	plan := p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: ResourceType, Address: "glidein.hpc",
		Prior: null, Config: cfg, ProposedNew: providertest.ProposedNew(glideinSchema(), null, cfg)})
	err := providers.Err(plan.Diagnostics)
	if err == nil || !strings.Contains(err.Error(), "cannot be kept by a pilot factory") ||
		plan.Diagnostics[0].Extra != providers.AttributeRef("factory") {
		t.Fatalf("plan of a factory block on a site that does not describe itself: %v", plan.Diagnostics)
	}
}

// TestFactoryAddedToRunningPool starts a pool whose configuration has no
// factory, so that its central manager holds no factory credentials, and
// then applies a glidein with a factory block in it, as a user who adds
// the block to a configuration does: apply gives the running central
// manager the delegated key and CA, and its factory, with no restart,
// signs and certifies a glidein that Slurm queues for a waiting job.
func TestFactoryAddedToRunningPool(t *testing.T) {
	slurmtest.Require(t)
	c := slurmtest.Shared(t, 1) // a node of 2 CPUs and 2000 MB
	for _, kv := range c.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	wd := t.TempDir()
	cm := startLocalPool(t, wd, nil)
	sl, err := slurm.New(slurm.Config{WorkDir: filepath.Join(t.TempDir(), "work"), Partition: c.Partitions[0]})
	if err != nil {
		t.Fatal(err)
	}
	p := configured(t, wd, sl, nil)
	admin, err := p.adminClient(cm)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := admin.Factory(t.Context()); err != nil || st.Credentials != nil {
		t.Fatalf("a pool started with no factory: %+v, %v", st, err)
	}
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "lifetime": cty.StringVal("10m"),
		"idle_timeout": cty.StringVal("20s"), "memory": cty.StringVal("500MB"),
		"attributes": cty.ObjectVal(map[string]cty.Value{"Site": cty.StringVal("hpc")}),
		"factory": factoryBlock(map[string]cty.Value{"max_queued": cty.NumberIntVal(1),
			"max_running": cty.NumberIntVal(1), "ramp": cty.StringVal("none")})})
	const addr = "glidein.hpc"
	var lines []string
	state, err := applyConfig(t, p, addr, cty.NullVal(cfg.Type()), cfg, &lines)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroyAll(t, p, addr, state) })
	st, err := admin.Factory(t.Context())
	if err != nil || st.Credentials == nil || st.Credentials.Prefix != api.FactoryPrefix("campus") || st.Credentials.CAExpires.IsZero() {
		t.Fatalf("the factory's credentials after apply: %+v, %v (apply said %q)", st, err, lines)
	}
	submitFor(t, wd, cm, 1, 5)
	deadline := time.Now().Add(40 * time.Second)
	for len(strings.Fields(c.Run(t, "squeue", "-h", "-t", "PD,R,CF", "-o", "%j"))) == 0 {
		if time.Now().After(deadline) {
			st, _ := admin.Factory(context.Background())
			t.Fatalf("no glidein submitted for the waiting job: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
