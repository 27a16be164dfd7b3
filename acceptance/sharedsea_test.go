package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSharedSeaNameClash applies, from a second working directory that
// shares the first one's sea (and its authority), a pool whose node names
// are taken there: the apply fails with an error that says so, and the
// first directory's nodes keep running. A directory of another authority
// is refused with an error that says how to share it.
func TestSharedSeaNameClash(t *testing.T) {
	t.Parallel()
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
	// A directory of another authority may not join it.
	c := newWorkdir(t, "")
	c.write("main.pond.hcl", onePool("strangers"))
	if r := c.expect(1, "apply", "-auto-approve"); !strings.Contains(r.stderr, "belongs to another authority") {
		t.Fatalf("apply from a directory of another authority:\n%s", r.stderr)
	}
	if pids := agentPIDs(c.dir); len(pids) != 0 {
		t.Fatalf("the refused apply left %d agent(s) running", len(pids))
	}

	b := newWorkdir(t, "")
	b.joinSeaOf(a)
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

// TestEditedAttributesReachTheSea edits a running node's configuration
// file: the sea's tree queries match the new attribute values within a
// second or two, without a restart or a reconfiguration.
func TestEditedAttributesReachTheSea(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", `
pool "crew" {
  nodes  = 2
  free   = true
  config = { STARTD_ATTRS = "Team", TEAM = "\"red\"" }
}
output "sea" {
  value = pool.crew.sea
}
`)
	w.expect(0, "apply", "-auto-approve")
	seaAddr := w.outputs()["sea"].(string)
	count := func(req string) int {
		r := w.expect(0, "sea", "query", "-sea", seaAddr, "-requirements", req, "-k", "0", "-json")
		var ans struct{ Matches []struct{ Name string } }
		if err := json.Unmarshal([]byte(r.stdout), &ans); err != nil {
			t.Fatalf("sea query -json: %v\n%s", err, r.stdout)
		}
		return len(ans.Matches)
	}
	if n := count(`Team == "red"`); n != 2 {
		t.Fatalf("%d nodes of team red, want 2", n)
	}
	path := filepath.Join(w.dir, ".pond", "local", "nodes", "crew-1", "condor_config")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"red"`, `"blue"`, 1)
	if edited == string(data) {
		t.Fatalf("no team red in %s:\n%s", path, data)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if red, blue := count(`Team == "red"`), count(`Team == "blue"`); red != 1 || blue != 1 {
			return fmt.Errorf("%d red and %d blue, want one of each", red, blue)
		}
		return nil
	})
	w.expect(0, "destroy", "-auto-approve")
}
