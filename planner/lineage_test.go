package planner_test

import (
	"context"
	"sync"
	"testing"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
)

// lineageRecorder wraps a provider and records the lineage each plan,
// apply and read request names.
type lineageRecorder struct {
	providers.Provider
	mu   sync.Mutex
	seen map[string][]string // by kind of request
}

func (r *lineageRecorder) note(kind, lineage string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[kind] = append(r.seen[kind], lineage)
}

func (r *lineageRecorder) PlanResourceChange(ctx context.Context, req providers.PlanRequest) providers.PlanResponse {
	r.note("plan", req.Lineage)
	return r.Provider.PlanResourceChange(ctx, req)
}

func (r *lineageRecorder) ApplyResourceChange(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	r.note("apply", req.Lineage)
	return r.Provider.ApplyResourceChange(ctx, req)
}

func (r *lineageRecorder) ReadResource(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	r.note("read", req.Lineage)
	return r.Provider.ReadResource(ctx, req)
}

// TestRequestsNameLineage plans, applies, refreshes and destroys, and
// checks that every request to the provider names the lineage of the
// state worked on, so that a provider can tag what it creates with it.
func TestRequestsNameLineage(t *testing.T) {
	h := newHarness(t)
	h.write(`pool "a" {}` + "\n" + `pool "b" { nodes = 2 }`)
	rec := &lineageRecorder{seen: map[string][]string{}}
	run := func(mode planner.Mode) {
		t.Helper()
		cfg, diags := config.LoadDir(h.dir, config.LoadOptions{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		e := planner.New(planner.Options{
			Config: cfg, Functions: testFunctions(),
			Providers: map[string]providers.Factory{"syn": func() providers.Provider {
				rec.Provider = h.world.Factory()()
				return rec
			}},
			ResourceTypes: map[string]string{"pool": "syn"},
			HashKey:       func() ([]byte, error) { return h.key, nil },
		})
		defer e.Close()
		p, diags := e.Plan(context.Background(), h.state, planner.PlanOptions{Mode: mode, Refresh: true})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		res, diags := e.Apply(context.Background(), p, planner.ApplyOptions{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		h.state = res.State
	}
	run(planner.NormalMode)
	run(planner.NormalMode) // refreshes what the first created
	run(planner.DestroyMode)
	want := h.state.Lineage
	for _, kind := range []string{"plan", "apply", "read"} {
		got := rec.seen[kind]
		if len(got) == 0 {
			t.Errorf("no %s request", kind)
		}
		for _, l := range got {
			if l != want {
				t.Errorf("a %s request names lineage %q, want the state's %q", kind, l, want)
			}
		}
	}
}
