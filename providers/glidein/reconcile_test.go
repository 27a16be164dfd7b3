package glidein

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// TestDriftReplaced kills a glidein behind pond's back: refresh shows it
// ended, with a warning naming it, the next plan changes the resource and
// apply replaces it, keeping the count.
func TestDriftReplaced(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	cm := startPool(t, wd)
	s := newSite(t, roleIdle)
	p := configured(t, wd, s, nil)
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(2)})
	state, err := applyConfig(t, p, "glidein.d", cty.NullVal(cfg.Type()), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroyAll(t, p, "glidein.d", state) })
	victim := ids(state)[0]
	for _, pid := range s.procs()[victim] {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	// Gone in three listings in a row: one listing of /proc may be cut
	// short by a process that ends while it is read.
	for deadline, gone := time.Now().Add(30*time.Second), 0; gone < 3; {
		if len(s.procs()[victim]) > 0 {
			gone = 0
		} else {
			gone++
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs 30 s after SIGKILL: %v", victim, s.procs()[victim])
		}
		time.Sleep(10 * time.Millisecond)
	}
	rr := p.ReadResource(context.Background(), providers.ReadRequest{TypeName: ResourceType, Address: "glidein.d", Current: state})
	if len(rr.Diagnostics) != 1 || rr.Diagnostics[0].Severity != hcl.DiagWarning || !strings.Contains(rr.Diagnostics[0].Detail, victim) {
		t.Fatalf("refresh diagnostics %v, want a warning naming %s", rr.Diagnostics, victim)
	}
	if got := ids(rr.New); slices.Contains(got, victim) || len(got) != 1 {
		t.Fatalf("refreshed ids %v still hold %s", got, victim)
	}
	plan := p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: ResourceType, Address: "glidein.d",
		Prior: rr.New, Config: cfg, ProposedNew: providertest.ProposedNew(glideinSchema(), rr.New, cfg)})
	if plan.Planned.GetAttr("ids").IsKnown() {
		t.Fatalf("plan after drift keeps ids %#v: no change planned", plan.Planned.GetAttr("ids"))
	}
	state, err = applyConfig(t, p, "glidein.d", rr.New, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, want := running(t, s), ids(state)
	slices.Sort(want)
	if len(got) != 2 || !slices.Equal(got, want) || slices.Contains(got, victim) {
		t.Fatalf("after apply running %v, state %v, victim %s", got, want, victim)
	}
}

// TestIntentSentAgain: a journal intent the site never got (pondctl
// killed between recording and sending), older than the grace period, is
// sent again with the same ID; a younger one is waited for.
func TestIntentSentAgain(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	cm := startPool(t, wd)
	s := newSite(t, roleIdle)
	p := configured(t, wd, s, nil)
	prefix, err := p.prefixFor("glidein.i")
	if err != nil {
		t.Fatal(err)
	}
	id := newID(prefix, 0)
	if err := p.journal.write(&record{ID: id, Prefix: prefix, Index: 0, State: recIntent, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(1)})
	var lines []string
	state, err := applyConfig(t, p, "glidein.i", cty.NullVal(cfg.Type()), cfg, &lines)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroyAll(t, p, "glidein.i", state) })
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("apply took %s: it did not wait the grace period (1s) for the intent", waited)
	}
	if got := running(t, s); !slices.Equal(got, []string{id}) {
		t.Fatalf("running %v, want the intent's ID %s: %q", got, id, lines)
	}
	// Sent again, it is not new to the site: the site looks for an
	// earlier launch.
	if v, ok := s.fresh.Load(id); !ok || v.(bool) {
		t.Errorf("the intent's Submit had Request.New = %v (sent: %v), want false", v, ok)
	}
}

// TestAdopted: glideins the site has under the resource's prefix but the
// journal lacks (the journal lost, or pondctl killed right after Submit)
// are adopted, not submitted again.
func TestAdopted(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	cm := startPool(t, wd)
	s := newSite(t, roleIdle)
	p := configured(t, wd, s, nil)
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(3),
		"validate": cty.ObjectVal(map[string]cty.Value{"disk": cty.StringVal("1MB"), "memory": cty.StringVal("1GiB"),
			"command": cty.ListVal([]cty.Value{cty.StringVal("/bin/true")})})})
	state, err := applyConfig(t, p, "glidein.a", cty.NullVal(cfg.Type()), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := running(t, s)
	if err := os.RemoveAll(filepath.Join(wd, ".pond", "glidein", "journal")); err != nil {
		t.Fatal(err)
	}
	var lines []string
	state, err = applyConfig(t, p, "glidein.a", cty.NullVal(cfg.Type()), cfg, &lines)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroyAll(t, p, "glidein.a", state) })
	after := running(t, s)
	if !slices.Equal(before, after) {
		t.Fatalf("running %v before the journal was lost, %v after: %q", before, after, lines)
	}
	adopted := 0
	for _, l := range lines {
		if strings.Contains(l, "adopted") {
			adopted++
		}
	}
	if adopted != 3 {
		t.Errorf("%d glideins adopted, want 3: %q", adopted, lines)
	}
}

// TestValidate: bad arguments are refused at the argument, with why.
func TestValidate(t *testing.T) {
	t.Parallel()
	p := Factory(slurm.Kind())()
	for _, tc := range []struct {
		attrs map[string]cty.Value
		attr  string
		want  string
	}{
		{map[string]cty.Value{"lifetime": cty.StringVal("4 hours")}, "lifetime", "not a duration"},
		{map[string]cty.Value{"lifetime": cty.StringVal("10s")}, "lifetime", "less than 1m"},
		{map[string]cty.Value{"idle_timeout": cty.StringVal("-1m")}, "idle_timeout", "negative"},
		{map[string]cty.Value{"idle_timeout": cty.StringVal("5h")}, "idle_timeout", "longer than lifetime"},
		{map[string]cty.Value{"cm_timeout": cty.StringVal("0s")}, "cm_timeout", "less than 1s"},
		{map[string]cty.Value{"nodes": cty.NumberIntVal(-1)}, "nodes", "out of range"},
		{map[string]cty.Value{"max_jobs": cty.NumberIntVal(-1)}, "max_jobs", "-1 is out of range: want 0 to 1000000"},
		{map[string]cty.Value{"max_jobs": cty.NumberFloatVal(0.5)}, "max_jobs", "not a whole number"},
		{map[string]cty.Value{"max_jobs": cty.NumberIntVal(2000000)}, "max_jobs", "out of range"},
		{map[string]cty.Value{"slots": cty.NumberFloatVal(1.5)}, "slots", "not a whole number"},
		{map[string]cty.Value{"memory": cty.StringVal("4 potatoes")}, "memory", "unknown unit"},
		{map[string]cty.Value{"pool": cty.StringVal("campus")}, "pool", "not an address"},
		{map[string]cty.Value{"attributes": cty.ObjectVal(map[string]cty.Value{"1bad": cty.True})}, "attributes", "not a valid ClassAd"},
		{map[string]cty.Value{"validate": cty.ObjectVal(map[string]cty.Value{"disk": cty.StringVal("lots"), "memory": cty.NullVal(cty.String), "command": cty.NullVal(cty.List(cty.String))})}, "validate", "no number"},
		{map[string]cty.Value{"validate": cty.ObjectVal(map[string]cty.Value{"disk": cty.NullVal(cty.String), "memory": cty.NullVal(cty.String), "command": cty.ListValEmpty(cty.String)})}, "validate", "want a program"},
	} {
		attrs := map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:9000")}
		for k, v := range tc.attrs {
			attrs[k] = v
		}
		resp := p.ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: ResourceType, Config: glideinConfig(attrs)})
		if len(resp.Diagnostics) != 1 {
			t.Errorf("%v: %d diagnostics, want 1: %v", tc.attrs, len(resp.Diagnostics), resp.Diagnostics)
			continue
		}
		d := resp.Diagnostics[0]
		if d.Extra != providers.AttributeRef(tc.attr) || !strings.Contains(d.Detail, tc.want) {
			t.Errorf("%v: diagnostic at %v: %s; want at %s, saying %q", tc.attrs, d.Extra, d.Detail, tc.attr, tc.want)
		}
	}
	ok := glideinConfig(map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:9000"), "nodes": cty.UnknownVal(cty.Number), "memory": cty.StringVal("4GB")})
	if d := p.ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: ResourceType, Config: ok}).Diagnostics; len(d) != 0 {
		t.Errorf("a good configuration with an unknown value: %v", d)
	}
}

// TestPlanWarnsCredentialExpiry: plan warns, at lifetime, when the
// glideins' credential would expire before their lifetime ends.
func TestPlanWarnsCredentialExpiry(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	s := newSite(t, roleIdle)
	for _, tc := range []struct {
		credLife string
		warn     bool
	}{{"2h", true}, {"", false}, {"10h", false}} {
		extra := map[string]cty.Value{}
		if tc.credLife != "" {
			extra["credential_lifetime"] = cty.StringVal(tc.credLife)
		}
		p := configured(t, wd, s, extra)
		cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:9000"), "lifetime": cty.StringVal("3h")})
		plan := p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: ResourceType, Address: "glidein.w",
			Prior: cty.NullVal(cfg.Type()), Config: cfg, ProposedNew: cfg})
		if plan.Diagnostics.HasErrors() {
			t.Fatal(plan.Diagnostics)
		}
		warned := len(plan.Diagnostics) == 1 && plan.Diagnostics[0].Severity == hcl.DiagWarning &&
			plan.Diagnostics[0].Extra == providers.AttributeRef("lifetime")
		if warned != tc.warn || len(plan.Diagnostics) > 1 {
			t.Errorf("credential_lifetime %q, lifetime 3h: diagnostics %v, want a warning: %v", tc.credLife, plan.Diagnostics, tc.warn)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"10GB", 10e9, false}, {"512MB", 512e6, false}, {"4GiB", 4 << 30, false}, {"1024", 1024, false},
		{"1.5gb", 1.5e9, false}, {" 2 TB ", 2e12, false}, {"", 0, true}, {"GB", 0, true}, {"-1GB", 0, true},
		{"10 potatoes", 0, true}, {"1e3", 0, true}, {"99999999999TB", 0, true},
	} {
		got, err := ParseSize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"10GB", "4GiB", "1.5mb", "", "1e3", "..", "9999999999999999999TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
	})
}

func TestResourceName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"glidein.hpc": "hpc", `glidein.w["a"]`: "w-a", "glidein.w[1]": "w-1", "module.m.glidein.x": "m-x",
		"glidein.a_very_long_name_indeed_yes": "a-very-long-name-ind",
	} {
		if got := ResourceName(in); got != want {
			t.Errorf("ResourceName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPlanChecksSite: a site that cannot take glideins fails the plan,
// saying why, before anything is submitted.
func TestPlanChecksSite(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	s := newProcSite(filepath.Join(wd, "no-such-dir"), roleIdle)
	p := configured(t, wd, s, nil)
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:9000")})
	plan := p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: ResourceType, Address: "glidein.c",
		Prior: cty.NullVal(cfg.Type()), Config: cfg, ProposedNew: cfg})
	err := providers.Err(plan.Diagnostics)
	if err == nil || !strings.Contains(err.Error(), "the slurm site cannot take glideins") || !strings.Contains(err.Error(), "no-such-dir") {
		t.Fatalf("plan error %v, want the site's check failing", err)
	}
}

// TestImportRefusesBadIDs: an import ID that is not KIND:PREFIX of this
// provider, or a prefix that finds nothing, is refused saying why.
func TestImportRefusesBadIDs(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	s := newSite(t, roleIdle)
	p := configured(t, wd, s, nil)
	for id, want := range map[string]string{
		"pond-abc-":       "is not slurm:PREFIX",
		"ssh:pond-abc-":   "is not slurm:PREFIX",
		"slurm:abc-":      "is not a glidein ID prefix",
		"slurm:pond-abc":  "ending with '-'",
		"slurm:pond-a_b-": "is not a glidein ID prefix",
		"slurm:pond-" + strings.Repeat("a", 48) + "-": "at most 52",
		"slurm:pond-nothing-here-":                    "has no queued or running glidein",
	} {
		resp := p.ImportResource(context.Background(), providers.ImportRequest{TypeName: ResourceType, ID: id})
		if err := providers.Err(resp.Diagnostics); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("import %q: %v, want an error saying %q", id, err, want)
		}
	}
}

func TestValidationChecks(t *testing.T) {
	t.Parallel()
	v := &validation{DiskBytes: 10e9, MemoryBytes: 4 << 30, Command: []string{"/bin/test", "-d", "/cvmfs"}}
	got, err := json.Marshal(v.checks())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"disk","min_mb":9537},{"type":"memory","min_mb":4096},{"type":"command","command":["/bin/test","-d","/cvmfs"]}]`
	if string(got) != want {
		t.Errorf("checks %s, want %s", got, want)
	}
}

// TestImportFactoryNeedsItsPool: a resource with a factory block is
// imported from its pool's central manager, which its configuration
// names: before that pool is in the state (pool unknown), or without
// the address that names its entry, the import is refused saying why.
func TestImportFactoryNeedsItsPool(t *testing.T) {
	t.Parallel()
	p := configured(t, t.TempDir(), newSite(t, roleIdle), nil)
	block := factoryBlock(map[string]cty.Value{"max_queued": cty.NumberIntVal(1), "max_running": cty.NumberIntVal(1)})
	for _, tc := range []struct {
		name, address string
		pool          cty.Value
		want          string
	}{
		{"pool not imported", "glidein.hpc", cty.UnknownVal(cty.String), "its pool is not known until what it refers to is in the state: import the pool first"},
		{"no address", "", cty.StringVal("127.0.0.1:1"), "imported to an address"},
		{"no central manager", "glidein.hpc", cty.StringVal("127.0.0.1:1"), "the pool's central manager at 127.0.0.1:1"},
	} {
		cfg := glideinConfig(map[string]cty.Value{"pool": tc.pool, "factory": block})
		resp := p.ImportResource(context.Background(), providers.ImportRequest{TypeName: ResourceType,
			ID: "slurm:pond-campus-hpc-", Address: tc.address, Config: cfg})
		if err := providers.Err(resp.Diagnostics); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestImportTakesConfiguration: a glidein resource with nodes imported
// with its configuration (the state and the journal lost) holds the
// configuration's arguments and the glideins the site runs, so that a
// plan right after the import is a no-op; one whose site runs fewer
// glideins than the configuration declares plans a change, and one
// imported without a configuration, or before its pool is in the state,
// still holds what the site has.
func TestImportTakesConfiguration(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	cm := startPool(t, wd)
	s := newSite(t, roleIdle)
	p := configured(t, wd, s, nil)
	ctx := context.Background()
	args := map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(2), "lifetime": cty.StringVal("1h"),
		"slots": cty.NumberIntVal(2), "attributes": cty.MapVal(map[string]cty.Value{"Site": cty.StringVal("hpc")}),
		"validate": cty.ObjectVal(map[string]cty.Value{"disk": cty.StringVal("1MB"), "memory": cty.StringVal("1GiB"),
			"command": cty.ListVal([]cty.Value{cty.StringVal("/bin/true")})})}
	cfg := glideinConfig(args)
	state, err := applyConfig(t, p, "glidein.a", cty.NullVal(cfg.Type()), cfg, nil)
	t.Cleanup(func() { destroyAll(t, p, "glidein.a", state) })
	if err != nil {
		t.Fatal(err)
	}
	id := "slurm:" + state.GetAttr("id").AsString()
	more := maps.Clone(args)
	more["nodes"] = cty.NumberIntVal(3)
	unknownPool := maps.Clone(args)
	unknownPool["pool"] = cty.UnknownVal(cty.String)
	for _, tc := range []struct {
		name     string
		config   cty.Value // what the import is given
		plan     cty.Value // what is planned after it
		noChange bool
		nodes    int64
	}{
		{"configuration", cfg, cfg, true, 2},
		{"more declared than run", glideinConfig(more), glideinConfig(more), false, 3},
		{"no configuration", cty.NullVal(cfg.Type()), cfg, false, 2},
		{"pool not in the state", glideinConfig(unknownPool), cfg, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.RemoveAll(filepath.Join(wd, ".pond", "glidein", "journal")); err != nil {
				t.Fatal(err)
			}
			resp := p.ImportResource(ctx, providers.ImportRequest{TypeName: ResourceType, ID: id, Address: "glidein.a",
				Lineage: "3f1e0c52-0000-4000-8000-000000000001", Config: tc.config})
			if err := providers.Err(resp.Diagnostics); err != nil {
				t.Fatal(err)
			}
			rr := p.ReadResource(ctx, providers.ReadRequest{TypeName: ResourceType, Address: "glidein.a", Current: resp.Imported})
			if err := providers.Err(rr.Diagnostics); err != nil {
				t.Fatal(err)
			}
			got := rr.New
			if !got.GetAttr("ids").RawEquals(state.GetAttr("ids")) || !got.GetAttr("glideins").RawEquals(state.GetAttr("glideins")) {
				t.Errorf("imported ids %#v, the site runs %#v", got.GetAttr("ids"), state.GetAttr("ids"))
			}
			if n, _ := got.GetAttr("nodes").AsBigFloat().Int64(); n != tc.nodes {
				t.Errorf("imported nodes = %d, want %d", n, tc.nodes)
			}
			if tc.noChange && !got.RawEquals(state) {
				t.Errorf("imported state differs from the applied one:\nimported: %#v\napplied:  %#v", got, state)
			}
			plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: ResourceType, Address: "glidein.a", Prior: got,
				Config: tc.plan, ProposedNew: providertest.ProposedNew(glideinSchema(), got, tc.plan)})
			if err := providers.Err(plan.Diagnostics); err != nil {
				t.Fatal(err)
			}
			if same := plan.Planned.RawEquals(got); same != tc.noChange {
				t.Errorf("plan after the import is a no-op: %v, want %v:\nplanned: %#v\nstate:   %#v", same, tc.noChange, plan.Planned, got)
			}
		})
	}
	if got := running(t, s); !slices.Equal(got, slices.Sorted(slices.Values(ids(state)))) {
		t.Errorf("after the imports the site runs %v, want %v", got, ids(state))
	}
}
