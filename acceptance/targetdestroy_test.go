package acceptance

import (
	"reflect"
	"strings"
	"testing"
)

// TestTargetedDestroyKeepsOtherOutputs destroys one pool with -target: the
// outputs that do not depend on it keep their values, with no refresh,
// and the one that does goes.
func TestTargetedDestroyKeepsOtherOutputs(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", `
pool "manager" {
  nodes = 1
}

pool "scratch" {
  nodes = 1
}

output "central_manager" {
  value = pool.manager.central_manager
}

output "members" {
  value = pool.manager.members
}

output "scratch" {
  value = pool.scratch.central_manager
}
`)
	w.expect(0, "apply", "-auto-approve")
	before := w.outputs()
	w.expect(0, "destroy", "-target", "pool.scratch", "-auto-approve")
	after := w.outputs()
	for _, name := range []string{"central_manager", "members"} {
		if after[name] == nil || !reflect.DeepEqual(after[name], before[name]) {
			t.Errorf("output %s after destroy -target pool.scratch: %v, want %v", name, after[name], before[name])
		}
	}
	if _, ok := after["scratch"]; ok {
		t.Errorf("output scratch still shown after its pool was destroyed: %v", after["scratch"])
	}
	if r := w.expect(0, "output", "central_manager"); !strings.Contains(r.stdout, before["central_manager"].(string)) {
		t.Errorf("output central_manager: %s", r)
	}
	w.expect(0, "destroy", "-auto-approve")
}
