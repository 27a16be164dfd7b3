package planner_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/planner"
)

// moves returns the plan's moves as "from>to", sorted.
func moves(p *planner.Plan) []string {
	var out []string
	for _, m := range p.Moves {
		out = append(out, m.From.String()+">"+m.To.String())
	}
	sort.Strings(out)
	return out
}

// objectIDs returns the id recorded in state for each instance.
func (h *harness) objectIDs() map[string]string {
	out := map[string]string{}
	for _, r := range h.state.Resources {
		for _, inst := range r.Instances {
			var id string
			if i := strings.Index(string(inst.Attributes), `"id":"`); i >= 0 {
				rest := string(inst.Attributes)[i+6:]
				id = rest[:strings.IndexByte(rest, '"')]
			}
			out[r.InstanceAddr(inst.IndexKey).String()] = id
		}
	}
	return out
}

// TestMoved applies a configuration, then one that moves what it made with
// moved blocks: the plan shows the moves and nothing else for what moved,
// the apply calls no provider for them, and the state holds the same
// objects at their new addresses.
func TestMoved(t *testing.T) {
	tests := []struct {
		name    string
		before  string
		after   string
		moves   []string
		actions map[string]string
		// same maps new addresses to the old ones whose objects they hold.
		same      map[string]string
		instances []string
	}{
		{
			name:      "rename",
			before:    `pool "a" {}`,
			after:     "pool \"b\" {}\nmoved {\n  from = pool.a\n  to = pool.b\n}",
			moves:     []string{"pool.a>pool.b"},
			same:      map[string]string{"pool.b": "pool.a"},
			instances: []string{"pool.b"},
		},
		{
			name:      "chain",
			before:    `pool "a" {}`,
			after:     "pool \"c\" {}\nmoved {\n  from = pool.b\n  to = pool.c\n}\nmoved {\n  from = pool.a\n  to = pool.b\n}",
			moves:     []string{"pool.a>pool.c"},
			same:      map[string]string{"pool.c": "pool.a"},
			instances: []string{"pool.c"},
		},
		{
			name:      "whole resource with count keeps keys",
			before:    "pool \"w\" {\n  count = 2\n}",
			after:     "pool \"v\" {\n  count = 2\n}\nmoved {\n  from = pool.w\n  to = pool.v\n}",
			moves:     []string{"pool.w[0]>pool.v[0]", "pool.w[1]>pool.v[1]"},
			same:      map[string]string{"pool.v[0]": "pool.w[0]", "pool.v[1]": "pool.w[1]"},
			instances: []string{"pool.v[0]", "pool.v[1]"},
		},
		{
			name:      "into count",
			before:    `pool "a" {}`,
			after:     "pool \"a\" {\n  count = 2\n}\nmoved {\n  from = pool.a\n  to = pool.a[0]\n}",
			moves:     []string{"pool.a>pool.a[0]"},
			actions:   map[string]string{"pool.a[1]": "create"},
			same:      map[string]string{"pool.a[0]": "pool.a"},
			instances: []string{"pool.a[0]", "pool.a[1]"},
		},
		{
			name:      "count to for_each",
			before:    "pool \"w\" {\n  count = 2\n}",
			after:     "pool \"w\" {\n  for_each = toset([\"x\", \"y\"])\n}\nmoved {\n  from = pool.w[0]\n  to = pool.w[\"x\"]\n}\nmoved {\n  from = pool.w[1]\n  to = pool.w[\"y\"]\n}",
			moves:     []string{`pool.w[0]>pool.w["x"]`, `pool.w[1]>pool.w["y"]`},
			same:      map[string]string{`pool.w["x"]`: "pool.w[0]", `pool.w["y"]`: "pool.w[1]"},
			instances: []string{`pool.w["x"]`, `pool.w["y"]`},
		},
		{
			name:      "out of for_each",
			before:    "pool \"w\" {\n  for_each = toset([\"x\"])\n}",
			after:     "pool \"solo\" {}\nmoved {\n  from = pool.w[\"x\"]\n  to = pool.solo\n}",
			moves:     []string{`pool.w["x"]>pool.solo`},
			same:      map[string]string{"pool.solo": `pool.w["x"]`},
			instances: []string{"pool.solo"},
		},
		{
			name:      "source not in state",
			before:    `pool "a" {}`,
			after:     "pool \"a\" {}\nmoved {\n  from = pool.gone\n  to = pool.a\n}",
			same:      map[string]string{"pool.a": "pool.a"},
			instances: []string{"pool.a"},
		},
		{
			name:      "destination taken",
			before:    "pool \"a\" {}\npool \"b\" {}",
			after:     "pool \"b\" {}\nmoved {\n  from = pool.a\n  to = pool.b\n}",
			actions:   map[string]string{"pool.a": "delete"},
			same:      map[string]string{"pool.b": "pool.b"},
			instances: []string{"pool.b"},
		},
		{
			name:      "destination not configured",
			before:    `pool "a" {}`,
			after:     "pool \"c\" {}\nmoved {\n  from = pool.a\n  to = pool.b\n}",
			moves:     []string{"pool.a>pool.b"},
			actions:   map[string]string{"pool.b": "delete", "pool.c": "create"},
			instances: []string{"pool.c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(tt.before)
			if _, _, err := h.apply(refresh()); err != nil {
				t.Fatal(err)
			}
			ids := h.objectIDs()
			h.write(tt.after)
			p, err := h.plan(refresh())
			if err != nil {
				t.Fatal(err)
			}
			if got := moves(p); !slices.Equal(got, tt.moves) {
				t.Fatalf("moves %v, want %v", got, tt.moves)
			}
			for _, m := range p.Moves {
				for _, c := range p.Changes {
					if c.Addr == m.To && c.PrevAddr != m.From {
						t.Errorf("change of %s has previous address %q, want %s", c.Addr, c.PrevAddr, m.From)
					}
				}
			}
			want := tt.actions
			if want == nil {
				want = map[string]string{}
			}
			if got := actions(p); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("actions %v, want %v", got, want)
			}
			if p.HasChanges() != (len(tt.moves) > 0 || len(tt.actions) > 0) {
				t.Errorf("HasChanges %v with moves %v and actions %v", p.HasChanges(), tt.moves, tt.actions)
			}
			calls := h.world.Calls["Apply"]
			if _, _, err := h.apply(refresh()); err != nil {
				t.Fatal(err)
			}
			creates, deletes := 0, 0
			for _, a := range want {
				switch a {
				case "create":
					creates++
				case "delete":
					deletes++
				}
			}
			if n := h.world.Calls["Apply"] - calls; n != creates+deletes {
				t.Errorf("%d provider applies, want %d: moving calls no provider", n, creates+deletes)
			}
			if got := h.instances(); !slices.Equal(got, tt.instances) {
				t.Fatalf("state after apply %v, want %v", got, tt.instances)
			}
			after := h.objectIDs()
			for to, from := range tt.same {
				if after[to] == "" || after[to] != ids[from] {
					t.Errorf("%s holds object %q after apply, want %s's %q", to, after[to], from, ids[from])
				}
			}
			p, err = h.plan(refresh())
			if err != nil {
				t.Fatal(err)
			}
			if p.HasChanges() {
				t.Fatalf("plan after apply has changes: moves %v, actions %v", moves(p), actions(p))
			}
		})
	}
}

// TestMovedDependencies checks that a moved resource's dependents record
// the dependency under its new address, so that destroying the moved one
// waits for them.
func TestMovedDependencies(t *testing.T) {
	h := newHarness(t)
	h.write("pool \"a\" {}\npool \"d\" {\n  labels = { cm = pool.a.central_manager }\n}")
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	h.write("pool \"b\" {}\npool \"d\" {\n  labels = { cm = pool.b.central_manager }\n}\nmoved {\n  from = pool.a\n  to = pool.b\n}")
	p, err := h.plan(refresh())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Changes {
		if c.Addr.String() == "pool.d" && c.Action != planner.NoOp {
			t.Fatalf("pool.d %s, want no-op: its pool only moved", c.Action)
		}
	}
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.state.Resources {
		if r.Name == "d" && !slices.Equal(r.Instances[0].Dependencies, []string{"pool.b"}) {
			t.Fatalf("pool.d dependencies %v, want [pool.b]", r.Instances[0].Dependencies)
		}
	}
}

// TestRemoved checks removed blocks: destroy = false forgets the objects
// (no provider call, the objects stay in the world), destroy = true and
// no lifecycle block destroy them.
func TestRemoved(t *testing.T) {
	tests := []struct {
		name      string
		lifecycle string
		action    string
		kept      bool
	}{
		{"forget", "lifecycle {\n    destroy = false\n  }", "forget", true},
		{"destroy", "lifecycle {\n    destroy = true\n  }", "delete", false},
		{"default destroys", "", "delete", false},
	}
	for _, tt := range tests {
		for _, mode := range []planner.Mode{planner.NormalMode, planner.DestroyMode} {
			t.Run(tt.name+"/"+mode.String(), func(t *testing.T) {
				h := newHarness(t)
				h.write("pool \"keep\" {}\npool \"old\" {\n  count = 2\n}")
				if _, _, err := h.apply(refresh()); err != nil {
					t.Fatal(err)
				}
				h.write("pool \"keep\" {}\nremoved {\n  from = pool.old\n  " + tt.lifecycle + "\n}")
				opts := planner.PlanOptions{Refresh: true, Mode: mode}
				p, err := h.plan(opts)
				if err != nil {
					t.Fatal(err)
				}
				got := actions(p)
				for _, a := range []string{"pool.old[0]", "pool.old[1]"} {
					if got[a] != tt.action {
						t.Fatalf("actions %v, want %s %s", got, a, tt.action)
					}
				}
				if n := p.Forgets(); (n == 2) != tt.kept {
					t.Errorf("Forgets() = %d", n)
				}
				objects := h.world.Len()
				calls := h.world.Calls["Apply"]
				_, res, err := h.apply(opts)
				if err != nil {
					t.Fatal(err)
				}
				want := []string{"pool.keep"}
				if mode == planner.DestroyMode {
					want = nil
				}
				if got := h.instances(); !slices.Equal(got, want) {
					t.Fatalf("state after apply %v, want %v", got, want)
				}
				destroyed := objects - h.world.Len()
				calls = h.world.Calls["Apply"] - calls
				if mode == planner.DestroyMode {
					destroyed--
					calls--
				}
				if tt.kept {
					if destroyed != 0 || calls != 0 || res.Forgotten != 2 {
						t.Fatalf("forget destroyed %d objects with %d provider calls, forgot %d; want 0, 0, 2", destroyed, calls, res.Forgotten)
					}
				} else if destroyed != 2 || res.Destroyed < 2 {
					t.Fatalf("destroyed %d objects (result %d), want 2", destroyed, res.Destroyed)
				}
			})
		}
	}
}

// TestExclude checks -exclude: the excluded resource and what depends on
// it are left out of a plan, and when destroying, what it depends on.
func TestExclude(t *testing.T) {
	const src = `
pool "a" {}
pool "b" {
  labels = { cm = pool.a.central_manager }
}
pool "c" {
  labels = { cm = pool.b.central_manager }
}
pool "free" {
  count = 2
}
`
	tests := []struct {
		name     string
		mode     planner.Mode
		excludes []string
		want     []string
	}{
		{"leaf", planner.NormalMode, []string{"pool.c"}, []string{"pool.a", "pool.b", "pool.free[0]", "pool.free[1]"}},
		{"dependents too", planner.NormalMode, []string{"pool.a"}, []string{"pool.free[0]", "pool.free[1]"}},
		{"middle", planner.NormalMode, []string{"pool.b"}, []string{"pool.a", "pool.free[0]", "pool.free[1]"}},
		{"one instance", planner.NormalMode, []string{"pool.free[1]"}, []string{"pool.a", "pool.b", "pool.c", "pool.free[0]"}},
		{"two", planner.NormalMode, []string{"pool.c", "pool.free"}, []string{"pool.a", "pool.b"}},
		{"destroy keeps dependencies", planner.DestroyMode, []string{"pool.b"}, []string{"pool.c", "pool.free[0]", "pool.free[1]"}},
		{"destroy root", planner.DestroyMode, []string{"pool.a"}, []string{"pool.b", "pool.c", "pool.free[0]", "pool.free[1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(src)
			if tt.mode == planner.DestroyMode {
				if _, _, err := h.apply(refresh()); err != nil {
					t.Fatal(err)
				}
			}
			opts := planner.PlanOptions{Refresh: true, Mode: tt.mode, Excludes: tt.excludes}
			got, _, err := h.apply(opts)
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			for a := range got {
				addrs = append(addrs, a)
			}
			sort.Strings(addrs)
			if !slices.Equal(addrs, tt.want) {
				t.Fatalf("changed %v, want %v", addrs, tt.want)
			}
		})
	}
	t.Run("with target", func(t *testing.T) {
		h := newHarness(t)
		h.write(src)
		_, err := h.plan(planner.PlanOptions{Targets: []string{"pool.a"}, Excludes: []string{"pool.c"}})
		if err == nil || !strings.Contains(err.Error(), "-target and -exclude cannot be used together") {
			t.Fatalf("plan with -target and -exclude: %v", err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		h := newHarness(t)
		h.write(src)
		e, err := h.engine()
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		p, diags := e.Plan(t.Context(), h.state, planner.PlanOptions{Excludes: []string{"pool.nope"}})
		if diags.HasErrors() || len(diags) == 0 || !strings.Contains(diags[0].Detail, "pool.nope") || len(actions(p)) != 5 {
			t.Fatalf("plan excluding an unknown address: %v, actions %v", diags, actions(p))
		}
	})
}

// TestExcludedDestroyKeepsOutputs destroys with -exclude: the outputs of
// what is left keep their values, as with -target.
func TestExcludedDestroyKeepsOutputs(t *testing.T) {
	h := newHarness(t)
	h.write("pool \"a\" {}\npool \"b\" {}\noutput \"a\" {\n  value = pool.a.central_manager\n}\noutput \"b\" {\n  value = pool.b.central_manager\n}\n")
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	want := string(h.state.Outputs["a"].Value)
	if _, _, err := h.apply(planner.PlanOptions{Mode: planner.DestroyMode, Refresh: true, Excludes: []string{"pool.a"}}); err != nil {
		t.Fatal(err)
	}
	if got := h.instances(); !slices.Equal(got, []string{"pool.a"}) {
		t.Fatalf("state after destroy -exclude pool.a: %v", got)
	}
	if len(h.state.Outputs) != 1 || h.state.Outputs["a"] == nil || string(h.state.Outputs["a"].Value) != want {
		t.Fatalf("outputs after destroy -exclude pool.a: %v, want only a = %s", h.state.Outputs, want)
	}
}

// TestMovedMixedKeys checks that moves that would leave one resource with
// count and for_each instances together are refused, at a moved block,
// before anything changes.
func TestMovedMixedKeys(t *testing.T) {
	h := newHarness(t)
	h.write("pool \"w\" {\n  count = 2\n}")
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	h.write("pool \"w\" {\n  for_each = toset([\"x\"])\n}\nmoved {\n  from = pool.w[0]\n  to   = pool.w[\"x\"]\n}")
	_, err := h.plan(refresh())
	if err == nil || !strings.Contains(err.Error(), "Moves leave mixed instance keys") || !strings.Contains(err.Error(), "pool.w[1] (count)") {
		t.Fatalf("plan: %v", err)
	}
	var diags hcl.Diagnostics
	if !errors.As(err, &diags) || diags[0].Subject == nil || diags[0].Subject.Start.Line != 4 {
		t.Fatalf("error not at the moved block (line 4): %#v", err)
	}
}
