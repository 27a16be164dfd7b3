package acceptance

import (
	"fmt"
	"strings"
	"testing"
)

// TestSharedSeaNameClash applies, from a second working directory that
// shares the first one's sea, a pool whose node names are taken there: the
// apply fails with an error that says so, and the first directory's nodes
// keep running.
func TestSharedSeaNameClash(t *testing.T) {
	a := newWorkdir(t, "")
	a.write("main.pond.hcl", `
pool "workers" {
  nodes = 2
}
output "sea" {
  value = pool.workers.sea
}
`)
	a.expect(0, "apply", "-auto-approve")
	seaAddr := a.outputs()["sea"].(string)

	// onePool is a configuration of one node named after its pool, in
	// the first directory's sea.
	onePool := func(pool string) string {
		return fmt.Sprintf("pond {\n  sea { address = %q }\n}\npool %q {\n  nodes = 1\n}\n", seaAddr, pool)
	}
	b := newWorkdir(t, "")
	b.write("main.pond.hcl", onePool("workers"))
	r := b.expect(1, "apply", "-auto-approve")
	if !strings.Contains(r.stderr, `node name "workers-0" is already taken in the sea`) {
		t.Fatalf("apply's error does not name the clash:\n%s", r.stderr)
	}
	if pids := agentPIDs(b.dir); len(pids) != 0 {
		t.Fatalf("the failed apply left %d agent(s) running", len(pids))
	}
	alive := map[string]bool{}
	for _, m := range a.seaMembers(seaAddr) {
		alive[m.Name] = true
	}
	for _, n := range []string{"workers-0", "workers-1"} {
		if !alive[n] {
			t.Fatalf("%s is no longer alive in the sea after the clash: %v", n, alive)
		}
	}

	// Renamed, the second pool joins the same sea.
	b.write("main.pond.hcl", onePool("more_workers"))
	b.expect(0, "apply", "-auto-approve")
	b.expect(0, "destroy", "-auto-approve")
	a.expect(0, "destroy", "-auto-approve")
}
