package acceptance

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// importMadePool makes pool "p" of two nodes in w's directory under a
// state of its own, then drops that state: the pool runs, and no state
// manages it. It returns the agents' PIDs.
func importMadePool(t *testing.T, w *workdir) []int {
	t.Helper()
	w.write("main.pond.hcl", "pond {\n  backend \"local\" {\n    path = \"made.state\"\n  }\n}\n\npool \"p\" {\n  nodes = 2\n}\n")
	w.expect(0, "apply", "-auto-approve")
	if err := os.Remove(filepath.Join(w.dir, "made.state")); err != nil {
		t.Fatal(err)
	}
	pids := agentPIDs(w.dir)
	slices.Sort(pids)
	if len(pids) != 2 {
		t.Fatalf("%d agents after apply, want 2", len(pids))
	}
	return pids
}

func samePIDs(t *testing.T, w *workdir, want []int, when string) {
	t.Helper()
	got := agentPIDs(w.dir)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("agents %v %s, want the same %v: pond restarted them", got, when, want)
	}
}

const importBlockConfig = `
pool "p" {
  nodes = 2
}

import {
  to = pool.p
  id = "p"
}
`

// A check that fails on a two-node pool.
const failingCheck = `
check "size" {
  assert {
    condition     = length(pool.p.members) == 3
    error_message = "pool p has ${length(pool.p.members)} members, not 3."
  }
}
`

// TestImportBlockAdoptsRunningPool makes a pool, forgets its state, and
// adopts it into a fresh state with an import block: the plan shows one
// import, the apply imports it without restarting an agent, and the next
// plan has nothing to do. A failing check block then warns, at plan and
// at apply, and both exit 0.
func TestImportBlockAdoptsRunningPool(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	pids := importMadePool(t, w)

	w.write("main.pond.hcl", importBlockConfig)
	r := w.expect(2, "plan", "-detailed-exitcode")
	for _, want := range []string{"# pool.p will be imported", "Plan: 1 to import, 0 to add, 0 to change, 0 to destroy."} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("plan lacks %q:\n%s", want, r)
		}
	}
	r = w.expect(0, "apply", "-auto-approve")
	if !strings.Contains(r.stdout, "Apply complete! Resources: 1 imported, 0 added, 0 changed, 0 destroyed.") {
		t.Fatalf("apply:\n%s", r)
	}
	samePIDs(t, w, pids, "after the import")
	if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "pool.p" {
		t.Fatalf("state list after the import:\n%s", r)
	}
	// The import block stays: it imports nothing more.
	r = w.expect(0, "plan", "-detailed-exitcode")
	if !strings.Contains(r.stdout, "No changes.") {
		t.Fatalf("second plan:\n%s", r)
	}

	w.write("main.pond.hcl", importBlockConfig+failingCheck)
	checkLine := strings.Count(importBlockConfig, "\n") + 4
	where := regexp.MustCompile(`main\.pond\.hcl:` + strconv.Itoa(checkLine) + `:\d+`)
	for _, args := range [][]string{{"plan", "-detailed-exitcode"}, {"apply", "-auto-approve"}} {
		r = w.expect(0, args...)
		if strings.Count(r.stderr, "Warning: Check block assertion failed") != 1 || !strings.Contains(r.stderr, "pool p has 2 members, not 3.") || !where.MatchString(r.stderr) {
			t.Fatalf("%s: want one check warning at main.pond.hcl:%d:\n%s", args[0], checkLine, r)
		}
	}
	samePIDs(t, w, pids, "after the checks")
}

// TestImportGenerateConfig imports a pool whose configuration is missing:
// plan says where the import block is; plan -generate-config-out writes
// the pool's block, refuses to overwrite it, and the configuration with
// it plans the import and nothing else, applies, and plans clean.
func TestImportGenerateConfig(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	pids := importMadePool(t, w)

	w.write("main.pond.hcl", "import {\n  to = pool.p\n  id = \"p\"\n}\n")
	r := w.expect(1, "plan")
	if !strings.Contains(r.stderr, "Configuration for import target does not exist") || !strings.Contains(r.stderr, "main.pond.hcl:1:1") {
		t.Fatalf("plan of an undeclared import target:\n%s", r)
	}
	r = w.expect(0, "plan", "-generate-config-out=generated.pond.hcl")
	if !strings.Contains(r.stdout, "Plan: 1 to import, 0 to add, 0 to change, 0 to destroy.") {
		t.Fatalf("plan -generate-config-out:\n%s", r)
	}
	gen, err := os.ReadFile(filepath.Join(w.dir, "generated.pond.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gen), `pool "p" {`) || !strings.Contains(string(gen), "nodes") {
		t.Fatalf("generated configuration:\n%s", gen)
	}
	r = w.expect(1, "plan", "-generate-config-out=generated.pond.hcl")
	if !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("second plan -generate-config-out:\n%s", r)
	}
	if again, _ := os.ReadFile(filepath.Join(w.dir, "generated.pond.hcl")); string(again) != string(gen) {
		t.Fatal("the generated file was overwritten")
	}
	w.expect(0, "fmt", "-check")
	r = w.expect(0, "apply", "-auto-approve")
	if !strings.Contains(r.stdout, "1 imported, 0 added, 0 changed, 0 destroyed") {
		t.Fatalf("apply:\n%s", r)
	}
	w.expect(0, "plan", "-detailed-exitcode")
	samePIDs(t, w, pids, "after the import")
}
