package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/state"
)

// TestRenderMovesAndForgets checks how plan prints, as text, as JSON and
// in a saved plan's actions, an instance a moved block moved, one moved
// and changed, a move the plan otherwise leaves out, and one forgotten.
func TestRenderMovesAndForgets(t *testing.T) {
	obj := cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("a"), "nodes": cty.NumberIntVal(1)})
	obj2 := cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("a"), "nodes": cty.NumberIntVal(2)})
	addr := func(name string, key any) state.Address {
		return state.Address{Mode: state.ModeManaged, Type: "pool", Name: name, Key: key}
	}
	p := &planner.Plan{
		Mode: planner.NormalMode,
		Changes: []*planner.ResourceChange{
			{Addr: addr("b", nil), PrevAddr: addr("a", nil), Action: planner.NoOp, Before: obj, After: obj, ProviderKey: "local"},
			{Addr: addr("w", "x"), PrevAddr: addr("w", 0), Action: planner.Update, Before: obj, After: obj2, ProviderKey: "local"},
			{Addr: addr("old", nil), Action: planner.Forget, Before: obj, After: obj, ProviderKey: "local", Reason: "because its removed block says destroy = false"},
		},
		Moves: []planner.Move{
			{From: addr("a", nil), To: addr("b", nil)},
			{From: addr("w", 0), To: addr("w", "x")},
			{From: addr("t", nil), To: addr("u", nil)},
		},
		Complete: true,
	}
	if !p.HasChanges() {
		t.Fatal("a plan with moves has no changes")
	}
	var buf bytes.Buffer
	renderPlan(&buf, p, colorizer{})
	out := buf.String()
	for _, want := range []string{
		"# pool.a has moved to pool.b\n    pool \"b\" {\n        # (2 unchanged attributes hidden)\n    }",
		"# pool.w[\"x\"] will be updated in-place\n  # (moved from pool.w[0])",
		"# pool.old will no longer be managed by pondctl",
		". forget",
		"# pool.t has moved to pool.u",
		"Plan: 0 to add, 1 to change, 0 to destroy, 1 to forget.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "has moved to") != 2 {
		t.Errorf("plan output shows %d moves as such, want 2 (one moved and changed):\n%s", strings.Count(out, "has moved to"), out)
	}
	pj := planJSON(p)
	prev := map[string]string{}
	for _, c := range pj.ResourceChanges {
		prev[c.Address] = c.PreviousAddress
	}
	if prev["pool.b"] != "pool.a" || prev[`pool.w["x"]`] != "pool.w[0]" || prev["pool.old"] != "" {
		t.Errorf("previous addresses in plan -json: %v", prev)
	}
	if pj.Summary.Forget != 1 || pj.Summary.Move != 3 {
		t.Errorf("plan -json summary %+v", pj.Summary)
	}
	acts := planActions(p)
	for k, v := range map[string]string{"move pool.a": "to pool.b", "move pool.t": "to pool.u", "pool.old": "forget"} {
		if acts[k] != v {
			t.Errorf("saved plan actions %v: %s is %q, want %q", acts, k, acts[k], v)
		}
	}
}
