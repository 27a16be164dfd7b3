package acceptance

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// groupsPool is a one-node pool of four slots with the group quotas
// group_a 3 and group_b 1, and the knobs given.
func groupsPool(name, knobs string) string {
	return fmt.Sprintf(`
pool %[1]q {
  nodes  = 1
  slots  = 4
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "2",
             GROUP_NAMES = "group_a, group_b", GROUP_QUOTA_group_a = "3", GROUP_QUOTA_group_b = "1", %[2]s }
}

output "cm" {
  value = pool.%[1]s.central_manager
}
`, name, knobs)
}

// groupSub is a submit file of n short jobs in an accounting group.
func groupSub(group, user string, n int) string {
	return fmt.Sprintf("executable = /bin/sleep\narguments = 3\naccounting_group = %s\naccounting_group_user = %s\nlog = %s.log\nqueue %d\n",
		group, user, group, n)
}

// runningByGroup counts the queue's running jobs by AcctGroup.
func runningByGroup(t *testing.T, w *workdir, cm string) (map[string]int, int) {
	t.Helper()
	r := w.run("condor", "q", "-pool", cm, "-af", "AcctGroup", "JobStatus")
	if r.code != 0 {
		t.Fatalf("condor q: %s", r)
	}
	out, jobs := map[string]int{}, 0
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		jobs++
		if f[1] == "2" {
			out[f[0]]++
		}
	}
	return out, jobs
}

// TestGroupQuotas has the users of two accounting groups, group_a with a
// quota of 3 slots and group_b of 1 on a pool of four, surplus off, each
// submit more jobs than the pool holds: at no poll, and by no job log,
// does a group run more than its quota, each reaches it, and every job
// finishes; the negotiator's ad shows the groups' quotas.
func TestGroupQuotas(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", groupsPool("groups", ""))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	w.write("a.sub", groupSub("group_a", "alice", 8))
	w.write("b.sub", groupSub("group_b", "bob", 6))
	w.expect(0, "condor", "submit", "-pool", cm, "a.sub")
	w.expect(0, "condor", "submit", "-pool", cm, "b.sub")
	quota := map[string]int{"group_a": 3, "group_b": 1}
	reached := map[string]bool{}
	deadline := time.Now().Add(180 * time.Second)
	for {
		running, jobs := runningByGroup(t, w, cm)
		for g, n := range running {
			if n > quota[g] {
				t.Fatalf("group %s runs %d jobs, over its quota of %d (running %v)", g, n, quota[g], running)
			}
			if n == quota[g] {
				reached[g] = true
			}
		}
		if jobs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs left after 180 s: %d (running %v)", jobs, running)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !reached["group_a"] || !reached["group_b"] {
		t.Fatalf("a group never reached its quota: %v", reached)
	}
	for g, q := range quota {
		most, done := maxConcurrent(t, filepath.Join(w.dir, g+".log"))
		if most > q {
			t.Fatalf("%s's log shows %d jobs at once, over its quota %d", g, most, q)
		}
		if want := map[string]int{"group_a": 8, "group_b": 6}[g]; done != want {
			t.Fatalf("%s: %d jobs finished; want %d", g, done, want)
		}
	}
	r := w.expect(0, "condor", "status", "-pool", cm, "-negotiator")
	for _, want := range []string{"group_a", "group_b", "<none>"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("condor status -negotiator does not show group %s:\n%s", want, r.stdout)
		}
	}
}

// TestGroupQuotaSurplus: with GROUP_ACCEPT_SURPLUS, group_a's user alone
// runs on the whole pool, past its quota of 3, when group_b wants
// nothing.
func TestGroupQuotaSurplus(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", groupsPool("surplus", `GROUP_ACCEPT_SURPLUS = "true"`))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	w.write("a.sub", groupSub("group_a", "alice", 8))
	w.expect(0, "condor", "submit", "-pool", cm, "a.sub")
	most := 0
	eventually(t, 120*time.Second, func() error {
		running, jobs := runningByGroup(t, w, cm)
		most = max(most, running["group_a"])
		if most < 4 && jobs > 0 {
			return fmt.Errorf("group_a runs %d jobs at most so far; want the whole pool, 4", most)
		}
		return nil
	})
	if most != 4 {
		t.Fatalf("group_a ran %d jobs at once; want 4", most)
	}
}
