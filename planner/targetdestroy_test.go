package planner_test

import (
	"testing"

	"github.com/pond-htc/pond/planner"
)

// TestTargetedDestroyKeepsOtherOutputs destroys one pool with -target:
// the outputs that depend on it (directly, through a local, through
// another resource or a data source) go, and the others keep their
// values in the state, in the plan and after the apply.
func TestTargetedDestroyKeepsOtherOutputs(t *testing.T) {
	h := newHarness(t)
	h.write(`
pool "a" {
  nodes = 1
}

pool "b" {
  nodes = 1
}

pool "c" {
  nodes  = 1
  labels = { cm = pool.a.central_manager }
}

locals {
  a_cm = pool.a.central_manager
}

data "sea_query" "near_a" {
  requirements = "Cpus >= 1"
  depends_on   = [pool.a]
}

output "a" {
  value = pool.a.central_manager
}

output "a_local" {
  value = local.a_cm
}

output "b" {
  value = pool.b.central_manager
}

output "c" {
  value = pool.c.central_manager
}

output "query" {
  value = data.sea_query.near_a.matches
}

output "constant" {
  value = "kept"
}
`)
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for n, o := range h.state.Outputs {
		before[n] = string(o.Value)
	}
	if len(before) != 6 {
		t.Fatalf("outputs after apply: %v, want 6", before)
	}
	opts := planner.PlanOptions{Mode: planner.DestroyMode, Refresh: true, Targets: []string{"pool.a"}}
	p, err := h.plan(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		output string
		kept   bool
	}{
		{"a", false},
		{"a_local", false},
		{"c", false}, // pool.c depends on pool.a: -target destroys it too
		{"query", false},
		{"b", true},
		{"constant", true},
	} {
		t.Run(tc.output, func(t *testing.T) {
			want := planner.NoOp
			if !tc.kept {
				want = planner.Delete
			}
			for _, oc := range p.OutputChanges {
				if oc.Name == tc.output && oc.Action != want {
					t.Errorf("plan: output %s %s, want %s", tc.output, oc.Action, want)
				}
			}
		})
	}
	if _, _, err := h.apply(opts); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for n, o := range h.state.Outputs {
		got[n] = string(o.Value)
	}
	want := map[string]string{"b": before["b"], "constant": before["constant"]}
	if len(got) != len(want) || got["b"] != want["b"] || got["constant"] != want["constant"] {
		t.Fatalf("outputs after destroy -target pool.a: %v, want %v", got, want)
	}
}

// TestDestroyDoesNotPlanCreates destroys what the state has while the
// provider refuses to plan a configured instance the state does not
// have (a site that cannot take it): the destroy deletes the others and
// never asks for that plan, and a destroy of an empty state does
// nothing, successfully, as after a run whose first plan failed.
func TestDestroyDoesNotPlanCreates(t *testing.T) {
	h := newHarness(t)
	h.write(`
pool "a" {
  nodes = 1
}

output "a" {
  value = pool.a.central_manager
}
`)
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	h.write(`
pool "a" {
  nodes = 1
}

pool "b" {
  nodes  = 1
  labels = { cm = pool.a.central_manager }
}

output "b" {
  value = pool.b.central_manager
}
`)
	h.world.FailPlan["pool.b"] = true
	destroy := planner.PlanOptions{Mode: planner.DestroyMode, Refresh: true}
	if _, err := h.plan(refresh()); err == nil {
		t.Fatal("the provider's refusal of pool.b did not fail a plan")
	}
	got, _, err := h.apply(destroy)
	if err != nil {
		t.Fatalf("destroy with pool.b refused: %v", err)
	}
	if len(got) != 1 || got["pool.a"] != "delete" {
		t.Fatalf("destroy: %v, want pool.a deleted alone", got)
	}
	if n := h.world.Len(); n != 0 {
		t.Fatalf("after destroy the world has %d objects", n)
	}
	if got, _, err = h.apply(destroy); err != nil || len(got) != 0 {
		t.Fatalf("destroy of an empty state: %v, %v; want nothing done", got, err)
	}
}

// TestDestroyDoesNotPlanWhatStateHas destroys instances the provider can
// no longer plan (the site's checks fail since they were created: a
// partition removed, a host gone): a destroy deletes them by what the
// state holds, without asking for a plan of their configuration; a plan
// of the same configuration still fails.
func TestDestroyDoesNotPlanWhatStateHas(t *testing.T) {
	h := newHarness(t)
	h.write(`
pool "a" {
  nodes = 1
}

pool "b" {
  nodes  = 2
  labels = { cm = pool.a.central_manager }
}
`)
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	h.world.FailPlan["pool.a"] = true
	h.world.FailPlan["pool.b"] = true
	if _, err := h.plan(refresh()); err == nil {
		t.Fatal("the provider's refusal did not fail a plan")
	}
	got, _, err := h.apply(planner.PlanOptions{Mode: planner.DestroyMode, Refresh: true})
	if err != nil {
		t.Fatalf("destroy of instances the provider cannot plan: %v", err)
	}
	if len(got) != 2 || got["pool.a"] != "delete" || got["pool.b"] != "delete" {
		t.Fatalf("destroy: %v, want pool.a and pool.b deleted", got)
	}
	if n := h.world.Len(); n != 0 {
		t.Fatalf("after destroy the world has %d objects", n)
	}
}
