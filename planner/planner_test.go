package planner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/planner/funcs"
	"github.com/pond-htc/pond/planner/internal/synthetic"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// harness runs plans and applies of one configuration against a synthetic
// world, keeping the state between steps as pondctl does.
type harness struct {
	t     testing.TB
	dir   string
	world *synthetic.World
	state *state.State
	// key is the key of the hashes of sensitive values, the same for
	// every step as a working directory's is.
	key []byte
}

func newHarness(t testing.TB) *harness {
	return &harness{t: t, dir: t.TempDir(), world: synthetic.NewWorld(), state: state.New(), key: []byte("0123456789abcdef0123456789abcdef")}
}

func (h *harness) write(src string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, "main.pond.hcl"), []byte(src), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) engine() (*planner.Engine, error) {
	h.t.Helper()
	cfg, diags := config.LoadDir(h.dir, config.LoadOptions{})
	if diags.HasErrors() {
		return nil, diags
	}
	return planner.New(planner.Options{
		Config:        cfg,
		Functions:     testFunctions(),
		Providers:     map[string]providers.Factory{"syn": h.world.Factory()},
		ResourceTypes: map[string]string{"pool": "syn", "pond": "syn", "flock": "syn"},
		DataTypes:     map[string]string{"sea_query": "syn"},
		HashKey:       func() ([]byte, error) { return h.key, nil },
	}), nil
}

func (h *harness) plan(opts planner.PlanOptions) (*planner.Plan, error) {
	h.t.Helper()
	e, err := h.engine()
	if err != nil {
		return nil, err
	}
	defer e.Close()
	p, diags := e.Plan(context.Background(), h.state, opts)
	if diags.HasErrors() {
		return p, diags
	}
	return p, nil
}

// apply plans and applies, returning the plan's actions by address.
func (h *harness) apply(opts planner.PlanOptions) (map[string]string, *planner.ApplyResult, error) {
	h.t.Helper()
	e, err := h.engine()
	if err != nil {
		return nil, nil, err
	}
	defer e.Close()
	p, diags := e.Plan(context.Background(), h.state, opts)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	res, diags := e.Apply(context.Background(), p, planner.ApplyOptions{})
	if res != nil && res.State != nil {
		h.state = res.State
	}
	if diags.HasErrors() {
		return actions(p), res, diags
	}
	return actions(p), res, nil
}

func actions(p *planner.Plan) map[string]string {
	m := map[string]string{}
	for _, c := range p.Changes {
		if c.Action != planner.NoOp {
			m[c.Addr.String()] = c.Action.String()
		}
	}
	return m
}

func refresh() planner.PlanOptions { return planner.PlanOptions{Refresh: true} }

func (h *harness) instances() []string {
	var out []string
	for _, r := range h.state.Resources {
		for _, inst := range r.Instances {
			a := state.Address{Mode: r.Mode, Type: r.Type, Name: r.Name, Key: inst.IndexKey}
			out = append(out, a.String())
		}
	}
	sort.Strings(out)
	return out
}

const baseConfig = `
variable "n" {
  type    = number
  default = 2
}

pool "cm" {
  nodes = var.n
  slots = 1
}

pool "workers" {
  count  = 2
  nodes  = 1
  labels = { cm = pool.cm.central_manager, index = tostring(count.index) }
}

data "sea_query" "big" {
  requirements = "Cpus >= 2"
}

output "cm" {
  value = pool.cm.central_manager
}
`

func TestPlanApplyLifecycle(t *testing.T) {
	h := newHarness(t)
	h.write(baseConfig)

	got, _, err := h.apply(refresh())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pool.cm": "create", "pool.workers[0]": "create", "pool.workers[1]": "create"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("first apply actions (-want +got):\n%s", d)
	}
	if n := h.world.Len(); n != 3 {
		t.Fatalf("world has %d objects, want 3", n)
	}
	wantInst := []string{"data.sea_query.big", "pool.cm", "pool.workers[0]", "pool.workers[1]"}
	if d := cmp.Diff(wantInst, h.instances()); d != "" {
		t.Fatalf("state instances (-want +got):\n%s", d)
	}
	if o := h.state.Outputs["cm"]; o == nil || !strings.Contains(string(o.Value), ":cm") {
		t.Fatalf("output cm = %+v, want the central manager", o)
	}

	// A second plan changes nothing.
	p, err := h.plan(refresh())
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("second plan has changes: %v", actions(p))
	}

	// Drift: an object deleted outside pond is recreated.
	h.world.Delete(h.world.IDs()[1])
	p, err = h.plan(refresh())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Drift) != 1 || p.Drift[0].Action != planner.Delete {
		t.Fatalf("drift = %+v, want one deletion", p.Drift)
	}
	if n := len(actions(p)); n != 1 {
		t.Fatalf("plan after drift: %v, want one create", actions(p))
	}
	// Without refresh the drift is not seen.
	p, err = h.plan(planner.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("plan with refresh=false saw drift: %v", actions(p))
	}
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	if n := h.world.Len(); n != 3 {
		t.Fatalf("world has %d objects after repair, want 3", n)
	}

	// Destroy removes everything, dependents first.
	got, res, err := h.apply(planner.PlanOptions{Mode: planner.DestroyMode, Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Destroyed != 3 || len(got) != 3 {
		t.Fatalf("destroy: %v, destroyed %d", got, res.Destroyed)
	}
	if n := h.world.Len(); n != 0 {
		t.Fatalf("world has %d objects after destroy", n)
	}
	if len(h.state.Outputs) != 0 {
		t.Fatalf("outputs left after destroy: %v", h.state.Outputs)
	}
	if got := h.instances(); len(got) != 0 {
		t.Fatalf("state after destroy still holds %v", got)
	}
}

func TestPlanActions(t *testing.T) {
	tests := []struct {
		name   string
		before string
		after  string
		opts   planner.PlanOptions
		want   map[string]string
	}{
		{
			name:   "update in place",
			before: `pool "a" { nodes = 1 }`,
			after:  `pool "a" { nodes = 3 }`,
			want:   map[string]string{"pool.a": "update"},
		},
		{
			name:   "force new attribute replaces",
			before: `pool "a" { slots = 1 }`,
			after:  `pool "a" { slots = 2 }`,
			want:   map[string]string{"pool.a": "delete-create"},
		},
		{
			name:   "create before destroy",
			before: `pool "a" { slots = 1 }`,
			after: `pool "a" {
  slots = 2
  lifecycle { create_before_destroy = true }
}`,
			want: map[string]string{"pool.a": "create-delete"},
		},
		{
			name:   "removed resource is deleted",
			before: "pool \"a\" {}\npool \"b\" {}",
			after:  `pool "a" {}`,
			want:   map[string]string{"pool.b": "delete"},
		},
		{
			name:   "count decreased",
			before: `pool "a" { count = 3 }`,
			after:  `pool "a" { count = 1 }`,
			want:   map[string]string{"pool.a[1]": "delete", "pool.a[2]": "delete"},
		},
		{
			name:   "for_each key removed and added",
			before: `pool "a" { for_each = toset(["x", "y"]) }`,
			after:  `pool "a" { for_each = { y = 1, z = 2 } }`,
			want:   map[string]string{"pool.a[\"x\"]": "delete", "pool.a[\"z\"]": "create"},
		},
		{
			// Addresses are those of the state commands: keys quoted as
			// HCL strings, so that -target takes what plan prints.
			name:   "for_each keys quoted as HCL strings",
			before: ``,
			after:  `pool "a" { for_each = toset(["$${x}", "q\"q", "\u0001"]) }`,
			opts:   planner.PlanOptions{Targets: []string{`pool.a["$${x}"]`, `pool.a["\u0001"]`}},
			want:   map[string]string{`pool.a["$${x}"]`: "create", `pool.a["\u0001"]`: "create"},
		},
		{
			name:   "replace requested",
			before: `pool "a" {}`,
			after:  `pool "a" {}`,
			opts:   planner.PlanOptions{Replace: []string{"pool.a"}},
			want:   map[string]string{"pool.a": "delete-create"},
		},
		{
			name:   "ignore_changes keeps prior value",
			before: `pool "a" { nodes = 1 }`,
			after: `pool "a" {
  nodes = 5
  lifecycle { ignore_changes = [nodes] }
}`,
			want: map[string]string{},
		},
		{
			name:   "target limits to target and dependencies",
			before: ``,
			after: `pool "a" {}
pool "b" { labels = { cm = pool.a.id } }
pool "c" {}`,
			opts: planner.PlanOptions{Targets: []string{"pool.b"}},
			want: map[string]string{"pool.a": "create", "pool.b": "create"},
		},
		{
			name:   "destroy target includes dependents",
			before: "pool \"a\" {}\npool \"b\" { labels = { cm = pool.a.id } }\npool \"c\" {}",
			after:  "pool \"a\" {}\npool \"b\" { labels = { cm = pool.a.id } }\npool \"c\" {}",
			opts:   planner.PlanOptions{Mode: planner.DestroyMode, Targets: []string{"pool.a"}},
			want:   map[string]string{"pool.a": "delete", "pool.b": "delete"},
		},
		{
			name:   "data source depending on a change is read at apply",
			before: ``,
			after: `pool "a" {}
data "sea_query" "q" { requirements = pool.a.id }`,
			want: map[string]string{"pool.a": "create", "data.sea_query.q": "read"},
		},
		{
			name:   "refresh only plans no resource change",
			before: `pool "a" {}`,
			after:  `pool "a" { nodes = 9 }`,
			opts:   planner.PlanOptions{Mode: planner.RefreshOnlyMode},
			want:   map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.before != "" {
				h.write(tt.before)
				if _, _, err := h.apply(refresh()); err != nil {
					t.Fatal(err)
				}
			}
			h.write(tt.after)
			opts := tt.opts
			opts.Refresh = true
			p, err := h.plan(opts)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, actions(p)); d != "" {
				t.Fatalf("actions (-want +got):\n%s", d)
			}
			// The plan applies cleanly, and then nothing is left to do
			// (unless the plan was limited).
			e, err := h.engine()
			if err != nil {
				t.Fatal(err)
			}
			res, diags := e.Apply(context.Background(), p, planner.ApplyOptions{})
			e.Close()
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			h.state = res.State
			if len(tt.opts.Targets) == 0 && tt.opts.Mode == planner.NormalMode {
				p2, err := h.plan(refresh())
				if err != nil {
					t.Fatal(err)
				}
				if a := actions(p2); len(a) != 0 {
					t.Fatalf("plan after apply not empty: %v", a)
				}
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"cycle", "pool \"a\" { labels = { x = pool.b.id } }\npool \"b\" { labels = { x = pool.a.id } }", "Cycle in configuration"},
		{"undeclared resource", `pool "a" { labels = { x = pool.nope.id } }`, "undeclared resource"},
		{"unknown count", "pool \"a\" {}\npool \"b\" { count = length(pool.a.members) }", "Invalid count argument"},
		{"negative count", `pool "a" { count = -1 }`, "Invalid count argument"},
		{"for_each list", `pool "a" { for_each = ["x"] }`, "Invalid for_each argument"},
		{"provider validation", `pool "a" { nodes = -3 }`, "nodes: must be at least 0"},
		{"undeclared provider", `pool "a" { provider = provider.nope }`, "undeclared provider"},
		{"wrong attribute type", `pool "a" { nodes = "many" }`, "Incorrect attribute value type"},
		{"count.index without count", `pool "a" { labels = { i = tostring(count.index) } }`, "count.index"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(tt.src)
			_, err := h.plan(refresh())
			if err == nil {
				t.Fatal("plan succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

// TestValidateAsksProviders checks that Validate passes each managed
// resource's configuration to its provider, with what is known only at plan
// time unknown, and that a problem every instance has is reported once by
// plan.
func TestValidateAsksProviders(t *testing.T) {
	h := newHarness(t)
	h.write(`variable "n" { type = number }

pool "bad" {
  count = var.n
  nodes = -1
}

pool "unknown" {
  count = 3
  nodes = var.n - count.index
}
`)
	cfg, diags := config.LoadDir(h.dir, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	e := planner.New(planner.Options{
		Config:        cfg,
		Vars:          map[string]cty.Value{"n": cty.UnknownVal(cty.Number)},
		Functions:     testFunctions(),
		Providers:     map[string]providers.Factory{"syn": h.world.Factory()},
		ResourceTypes: map[string]string{"pool": "syn"},
	})
	defer e.Close()
	diags = e.Validate(context.Background())
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, "nodes: must be at least 0") || diags[0].Subject == nil || diags[0].Subject.Start.Line != 3 {
		t.Fatalf("Validate = %v, want one error about nodes at line 3", diags)
	}
	if n := h.world.Calls["Configure"]; n != 0 {
		t.Errorf("Validate configured the provider %d times", n)
	}

	h.write(`pool "bad" {
  count = 3
  nodes = -1
}`)
	_, err := h.plan(refresh())
	if err == nil || strings.Count(err.Error(), "nodes: must be at least 0") != 1 {
		t.Fatalf("plan error = %v, want the nodes error once", err)
	}
}

// TestProviderWarnings checks that a provider's warnings come out of plan
// and apply, pointing at the resource's block, without failing them.
func TestProviderWarnings(t *testing.T) {
	h := newHarness(t)
	h.write(`pool "a" {}

pool "b" {
  nodes = 2
}
`)
	h.world.Warn["pool.b"] = "Few nodes"
	check := func(what string, diags hcl.Diagnostics) {
		t.Helper()
		if len(diags) != 1 {
			t.Fatalf("%s: %d diagnostics, want one warning: %v", what, len(diags), diags)
		}
		d := diags[0]
		if d.Severity != hcl.DiagWarning || d.Summary != "Few nodes" || d.Detail != "The synthetic provider warns about pool.b." ||
			d.Subject == nil || filepath.Base(d.Subject.Filename) != "main.pond.hcl" || d.Subject.Start.Line != 3 {
			t.Fatalf("%s: %+v, want the warning at main.pond.hcl line 3", what, d)
		}
	}
	e, err := h.engine()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p, diags := e.Plan(context.Background(), h.state, refresh())
	check("plan", diags)
	if !p.Complete {
		t.Fatal("a warning left the plan incomplete")
	}
	res, diags := e.Apply(context.Background(), p, planner.ApplyOptions{})
	check("apply", diags)
	if res.Added != 2 {
		t.Fatalf("apply added %d, want 2", res.Added)
	}
}

func TestPreventDestroy(t *testing.T) {
	h := newHarness(t)
	h.write(`pool "a" {
  lifecycle { prevent_destroy = true }
}`)
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	_, err := h.plan(planner.PlanOptions{Mode: planner.DestroyMode, Refresh: true})
	if err == nil || !strings.Contains(err.Error(), "cannot be destroyed") {
		t.Fatalf("destroy plan error = %v, want prevent_destroy refusal", err)
	}
}

func TestApplyFailureKeepsIndependentWork(t *testing.T) {
	h := newHarness(t)
	h.write(`pool "a" {}
pool "b" { labels = { x = pool.a.id } }
pool "c" {}`)
	h.world.Fail["pool.a"] = true
	_, res, err := h.apply(refresh())
	if err == nil || !strings.Contains(err.Error(), "synthetic failure of pool.a") {
		t.Fatalf("apply error = %v, want pool.a's failure", err)
	}
	if d := cmp.Diff([]string{"pool.c"}, h.instances()); d != "" {
		t.Fatalf("state after partial apply (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"pool.b"}, res.NotAttempted); d != "" {
		t.Fatalf("not attempted (-want +got):\n%s", d)
	}
	delete(h.world.Fail, "pool.a")
	got, _, err := h.apply(refresh())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"pool.a": "create", "pool.b": "create"}, got); d != "" {
		t.Fatalf("second apply (-want +got):\n%s", d)
	}
}

// TestApplyFailureAtArgument checks that an apply error a provider makes
// about one argument points at that argument, as in plan.
func TestApplyFailureAtArgument(t *testing.T) {
	h := newHarness(t)
	h.write("pool \"a\" {\n  nodes = 2\n}\n")
	h.world.FailAt["pool.a"] = "nodes"
	_, _, err := h.apply(refresh())
	var diags hcl.Diagnostics
	if !errors.As(err, &diags) || len(diags) != 1 || diags[0].Subject == nil {
		t.Fatalf("apply: %v", err)
	}
	if r := diags[0].Subject; r.Start.Line != 2 || r.Start.Column != 11 || !strings.Contains(diags[0].Detail, "at nodes") {
		t.Fatalf("diagnostic at %s: %s, want main.pond.hcl:2:11", r, diags[0].Detail)
	}
}

func TestApplyStop(t *testing.T) {
	h := newHarness(t)
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "pool \"p%d\" {}\n", i)
	}
	h.write(b.String())
	e, err := h.engine()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p, diags := e.Plan(context.Background(), h.state, planner.PlanOptions{Parallelism: 1})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	stop := make(chan struct{})
	close(stop)
	res, diags := e.Apply(context.Background(), p, planner.ApplyOptions{Stop: stop})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !res.Stopped || len(res.NotAttempted) != 20 {
		t.Fatalf("stopped=%v not attempted=%d, want every change skipped", res.Stopped, len(res.NotAttempted))
	}
}

// TestApplyStopAfterEveryChange interrupts an apply while its last change
// is being made: nothing is left unattempted, so the apply is whole, not
// stopped, and the outputs are the new ones.
func TestApplyStopAfterEveryChange(t *testing.T) {
	h := newHarness(t)
	h.write("pool \"a\" { nodes = 2 }\noutput \"n\" { value = pool.a.nodes }\n")
	e, p := planned(t, h)
	stop := make(chan struct{})
	h.world.OnApply = func(string) { close(stop) }
	res, diags := e.Apply(context.Background(), p, planner.ApplyOptions{Stop: stop})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if res.Stopped || len(res.NotAttempted) != 0 || res.Added != 1 {
		t.Fatalf("stopped=%v not attempted=%v added=%d, want a whole apply", res.Stopped, res.NotAttempted, res.Added)
	}
	if o := res.State.Outputs["n"]; o == nil {
		t.Fatalf("outputs after the apply: %v", res.State.Outputs)
	}
}

// planned returns the harness's engine, closed when the test ends, and
// its plan of the configuration written.
func planned(t *testing.T, h *harness) (*planner.Engine, *planner.Plan) {
	t.Helper()
	e, err := h.engine()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	p, diags := e.Plan(context.Background(), h.state, planner.PlanOptions{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return e, p
}

// failingWriter fails its first fail writes of the state.
type failingWriter struct{ fail, writes int }

func (f *failingWriter) WriteState(context.Context, *state.State) error {
	f.writes++
	if f.writes <= f.fail {
		return fmt.Errorf("write %d: no space left on device", f.writes)
	}
	return nil
}

// TestApplySaveStateErrors checks that a state whose writes fail is
// reported once, however many writes failed, and not at all when the
// last write succeeded.
func TestApplySaveStateErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		fail   int
		errors int
	}{
		{"every write fails", 1000, 1},
		{"the first writes fail, the last succeeds", 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.write("pool \"a\" {}\npool \"b\" {}\npool \"c\" {}\n")
			e, p := planned(t, h)
			wr := &failingWriter{fail: c.fail}
			_, diags := e.Apply(context.Background(), p, planner.ApplyOptions{Writer: wr})
			n := 0
			for _, d := range diags {
				if d.Summary == "Failed to save state" {
					n++
				}
			}
			if n != c.errors || wr.writes < 2 {
				t.Errorf("%d writes, %d errors %v: want %d", wr.writes, n, diags, c.errors)
			}
		})
	}
}

func TestStateRecordsDirectDependenciesOnly(t *testing.T) {
	h := newHarness(t)
	h.write(`pool "a" {}
locals { cm = pool.a.id }
pool "b" { labels = { x = local.cm } }
pool "c" { labels = { x = pool.b.id } }`)
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	deps := map[string][]string{}
	for _, r := range h.state.Resources {
		deps[r.Type+"."+r.Name] = r.Instances[0].Dependencies
	}
	want := map[string][]string{"pool.a": nil, "pool.b": {"pool.a"}, "pool.c": {"pool.b"}}
	if d := cmp.Diff(want, deps); d != "" {
		t.Fatalf("dependencies (-want +got):\n%s", d)
	}
}

func testFunctions() map[string]function.Function {
	return map[string]function.Function{
		"tostring":  stdlib.MakeToFunc(cty.String),
		"toset":     stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"length":    stdlib.LengthFunc,
		"upper":     stdlib.UpperFunc,
		"sensitive": funcs.SensitiveFunc,
	}
}

func TestProviderPanicIsAnError(t *testing.T) {
	h := newHarness(t)
	h.write("pool \"a\" {}\npool \"b\" {}")
	h.world.Panic["pool.a"] = true
	_, _, err := h.apply(refresh())
	if err == nil || !strings.Contains(err.Error(), "synthetic panic in pool.a") {
		t.Fatalf("apply error = %v, want the panic reported", err)
	}
	if d := cmp.Diff([]string{"pool.b"}, h.instances()); d != "" {
		t.Fatalf("state after the panic (-want +got):\n%s", d)
	}
}
