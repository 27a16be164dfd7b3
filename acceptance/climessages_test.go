package acceptance

import (
	"strings"
	"testing"
)

// TestApplyWarnsOnce checks that apply shows the agent processes each
// pool will start once, with its plan, and not again when it is done.
func TestApplyWarnsOnce(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", "pool \"p\" {\n  nodes = 2\n}\n\npool \"q\" {\n  nodes = 1\n}\n")
	w.expect(0, "init")
	r := w.expect(0, "apply", "-auto-approve")
	all := r.stdout + r.stderr
	for _, want := range []string{"Will start 2 agent processes", "Will start 1 agent process\n"} {
		if n := strings.Count(all, want); n != 1 {
			t.Errorf("%q shown %d times, want once:\n%s", want, n, r)
		}
	}
	w.expect(0, "destroy", "-auto-approve")
}
