package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const movedPoolBefore = `
pool "old" {
  nodes  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.old.central_manager
}
`

const movedPoolAfter = `
pool "renamed" {
  nodes  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

moved {
  from = pool.old
  to   = pool.renamed
}

output "cm" {
  value = pool.renamed.central_manager
}
`

// movedJob runs for some seconds.
const movedJob = `#!/bin/sh
sleep 12
echo finished
`

// TestMovedPoolKeepsRunningJob renames a pool with a moved block while a
// job runs on it: the plan shows the move and nothing else, the apply
// (of the saved plan) stores the pool under its new address without
// touching a node, the agents keep their PIDs, and the job finishes,
// started once. A new pool then declared at the old address does not take
// the moved pool's nodes for its own.
func TestMovedPoolKeepsRunningJob(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", movedPoolBefore)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	pids := agentPIDs(w.dir)
	slices.Sort(pids)
	if len(pids) != 2 {
		t.Fatalf("%d agents after apply, want 2", len(pids))
	}
	if err := os.WriteFile(filepath.Join(w.dir, "job.sh"), []byte(movedJob), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("job.sub", "executable = job.sh\noutput = job.out\nerror = job.err\nlog = job.log\nqueue\n")
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus")
		if strings.TrimSpace(r.stdout) != "2" {
			return fmt.Errorf("job status %q, want running (2): %s", strings.TrimSpace(r.stdout), r)
		}
		return nil
	})

	w.write("main.pond.hcl", movedPoolAfter)
	r := w.expect(0, "plan", "-out", "move.plan")
	for _, want := range []string{"# pool.old has moved to pool.renamed", "Plan: 0 to add, 0 to change, 0 to destroy."} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("plan does not say %q:\n%s", want, r.stdout)
		}
	}
	var pj struct {
		ResourceChanges []struct {
			Address         string `json:"address"`
			PreviousAddress string `json:"previous_address"`
			Change          struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	r = w.expect(0, "show", "-json", "move.plan")
	if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil {
		t.Fatalf("show -json move.plan: %v\n%s", err, r.stdout)
	}
	if len(pj.ResourceChanges) != 1 || pj.ResourceChanges[0].Address != "pool.renamed" || pj.ResourceChanges[0].PreviousAddress != "pool.old" ||
		!slices.Equal(pj.ResourceChanges[0].Change.Actions, []string{"no-op"}) {
		t.Fatalf("show -json move.plan resource changes: %+v", pj.ResourceChanges)
	}
	r = w.expect(0, "apply", "move.plan")
	if !strings.Contains(r.stdout, "Apply complete! Resources: 0 added, 0 changed, 0 destroyed.") {
		t.Fatalf("apply of the move:\n%s", r)
	}
	if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "pool.renamed" {
		t.Fatalf("state list after the move:\n%s", r.stdout)
	}
	after := agentPIDs(w.dir)
	slices.Sort(after)
	if !slices.Equal(after, pids) {
		t.Fatalf("agents %v after the move, want the same %v", after, pids)
	}
	if got := w.output("cm"); got != cm {
		t.Fatalf("central manager %s after the move, want %s", got, cm)
	}
	w.expect(0, "plan", "-detailed-exitcode")

	eventually(t, 90*time.Second, func() error {
		r := w.run("condor", "history", "-pool", cm, "-af", "JobStatus", "ExitCode", "NumJobStarts")
		if strings.TrimSpace(r.stdout) != "4 0 1" {
			return fmt.Errorf("job history %q, want completed with exit code 0 after one start: %s", strings.TrimSpace(r.stdout), r)
		}
		return nil
	})
	if out := readFile(t, filepath.Join(w.dir, "job.out")); !strings.Contains(out, "finished") {
		t.Fatalf("job output %q", out)
	}

	// A new pool at the old address: its name is the moved pool's, which
	// is taken. pond says so, and stops nothing.
	w.write("main.pond.hcl", strings.Replace(movedPoolAfter, "moved {\n  from = pool.old\n  to   = pool.renamed\n}", "pool \"old\" {\n  nodes = 1\n}", 1))
	r = w.expect(1, "apply", "-auto-approve")
	if !strings.Contains(r.stderr, `pool name "old" is already used by pool.renamed`) {
		t.Fatalf("apply of a new pool named as the moved one:\n%s", r)
	}
	after = agentPIDs(w.dir)
	slices.Sort(after)
	if !slices.Equal(after, pids) {
		t.Fatalf("agents %v after the refused create, want the same %v", after, pids)
	}
	w.write("main.pond.hcl", movedPoolAfter)
	w.expect(0, "destroy", "-auto-approve")
	if left := agentPIDs(w.dir); len(left) != 0 {
		t.Fatalf("agents %v still running after destroy", left)
	}
}

// TestRemovedForgetsPool drops a pool from the configuration with a removed
// block whose lifecycle says destroy = false: apply leaves its agent
// running and the state without it.
func TestRemovedForgetsPool(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", "pool \"keep\" {\n  nodes = 1\n}\n\npool \"gone\" {\n  nodes = 2\n}\n")
	w.expect(0, "apply", "-auto-approve")
	pids := agentPIDs(w.dir)
	slices.Sort(pids)
	if len(pids) != 3 {
		t.Fatalf("%d agents after apply, want 3", len(pids))
	}
	var forgotten []int
	for _, pid := range pids {
		if cmdlineHas(pid, "-name", "gone-0") || cmdlineHas(pid, "-name", "gone-1") {
			forgotten = append(forgotten, pid)
		}
	}
	if len(forgotten) != 2 {
		t.Fatalf("agents of pool.gone: %v", forgotten)
	}
	// Nothing manages them any more: the test stops them itself (before
	// the work directory's cleanup looks for agents left running).
	t.Cleanup(func() {
		for _, pid := range forgotten {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		eventually(t, 10*time.Second, func() error {
			for _, pid := range forgotten {
				if !isZombie(pid) {
					return fmt.Errorf("forgotten agent %d still running", pid)
				}
			}
			return nil
		})
	})

	w.write("main.pond.hcl", "pool \"keep\" {\n  nodes = 1\n}\n\nremoved {\n  from = pool.gone\n  lifecycle {\n    destroy = false\n  }\n}\n")
	r := w.expect(0, "plan")
	for _, want := range []string{"# pool.gone will no longer be managed by pondctl", "Plan: 0 to add, 0 to change, 0 to destroy, 1 to forget.", "Some objects will no longer be managed by pond"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Fatalf("plan does not say %q:\n%s", want, r)
		}
	}
	r = w.expect(0, "apply", "-auto-approve")
	if !strings.Contains(r.stdout, "Apply complete! Resources: 0 added, 0 changed, 0 destroyed, 1 forgotten.") {
		t.Fatalf("apply:\n%s", r)
	}
	if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "pool.keep" {
		t.Fatalf("state list after forgetting pool.gone:\n%s", r.stdout)
	}
	after := agentPIDs(w.dir)
	slices.Sort(after)
	if !slices.Equal(after, pids) {
		t.Fatalf("agents %v after the apply, want the same %v", after, pids)
	}
	// The removed block stays: the next plan has nothing to do.
	w.expect(0, "plan", "-detailed-exitcode")
	w.expect(0, "destroy", "-auto-approve")
	if left := agentPIDs(w.dir); !slices.Equal(left, forgotten) {
		t.Fatalf("agents after destroy %v, want only the forgotten ones %v", left, forgotten)
	}
}

// TestExcludeSkipsPoolAndDependents applies and destroys with -exclude:
// the excluded pool and the pool that depends on it are left alone; when
// destroying, the excluded pool and the one it depends on.
func TestExcludeSkipsPoolAndDependents(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", `
pool "base" {
  nodes = 1
}

pool "dependent" {
  nodes      = 1
  depends_on = [pool.base]
}

pool "other" {
  nodes = 1
}
`)
	r := w.expect(0, "apply", "-exclude", "pool.base", "-auto-approve")
	if !strings.Contains(r.stdout, "1 added, 0 changed, 0 destroyed") {
		t.Fatalf("apply -exclude pool.base:\n%s", r)
	}
	if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "pool.other" {
		t.Fatalf("state list after apply -exclude pool.base:\n%s", r.stdout)
	}
	if n := len(agentPIDs(w.dir)); n != 1 {
		t.Fatalf("%d agents, want 1", n)
	}
	r = w.expect(1, "apply", "-exclude", "pool.base", "-target", "pool.other", "-auto-approve")
	if !strings.Contains(r.stderr, "-target and -exclude cannot be used together") {
		t.Fatalf("apply with -target and -exclude:\n%s", r)
	}
	w.expect(1, "plan", "-exclude", "pool.base", "-target", "pool.other")
	r = w.expect(0, "plan", "-exclude", "pool.other")
	if !strings.Contains(r.stdout, "Plan: 2 to add, 0 to change, 0 to destroy.") {
		t.Fatalf("plan -exclude pool.other:\n%s", r)
	}
	w.expect(0, "apply", "-auto-approve")
	r = w.expect(0, "destroy", "-exclude", "pool.dependent", "-auto-approve")
	if !strings.Contains(r.stdout, "Destroy complete! Resources: 1 destroyed.") {
		t.Fatalf("destroy -exclude pool.dependent:\n%s", r)
	}
	if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "pool.base\npool.dependent" {
		t.Fatalf("state list after destroy -exclude pool.dependent:\n%s", r.stdout)
	}
	if n := len(agentPIDs(w.dir)); n != 2 {
		t.Fatalf("%d agents, want 2", n)
	}
	w.expect(0, "destroy", "-auto-approve")
}

// TestMovedPoolNotReapedWithoutRefresh moves a pool and then declares a new
// one at its old address, both with -refresh=false: the new pool's create
// is refused, and does not take the moved pool's running node for one its
// own interrupted run left behind.
func TestMovedPoolNotReapedWithoutRefresh(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", "pool \"a\" {\n  nodes = 1\n}\n")
	w.expect(0, "apply", "-auto-approve")
	pids := agentPIDs(w.dir)
	w.write("main.pond.hcl", "pool \"b\" {\n  nodes = 1\n}\n\nmoved {\n  from = pool.a\n  to   = pool.b\n}\n")
	w.expect(0, "apply", "-refresh=false", "-auto-approve")
	w.write("main.pond.hcl", "pool \"b\" {\n  nodes = 1\n}\n\npool \"a\" {\n  nodes = 1\n}\n")
	r := w.expect(1, "apply", "-refresh=false", "-auto-approve")
	if !strings.Contains(r.stderr, `pool name "a" is already used by pool.b`) {
		t.Fatalf("apply of a new pool at the moved one's old address:\n%s", r)
	}
	if after := agentPIDs(w.dir); !slices.Equal(after, pids) {
		t.Fatalf("agents %v, want the moved pool's %v still running", after, pids)
	}
	w.write("main.pond.hcl", "pool \"b\" {\n  nodes = 1\n}\n")
	w.expect(0, "destroy", "-auto-approve")
}
