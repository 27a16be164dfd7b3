package knobs_test

import (
	"testing"

	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/knobs"
)

// TestAgentDefaults checks that the defaults the table documents are those
// the agent applies.
func TestAgentDefaults(t *testing.T) {
	for name, want := range map[string]string{knobs.Bind: agent.DefaultBind, knobs.API: agent.DefaultAPI} {
		if k, _ := knobs.Lookup(name); k.Default != want {
			t.Errorf("%s: the table's default is %q, the agent's %q", name, k.Default, want)
		}
	}
}
