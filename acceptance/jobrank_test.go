package acceptance

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestNegotiatorPreJobRank steers jobs among equal slots with the pool's
// NEGOTIATOR_PRE_JOB_RANK (MY the slot): ranking the slots by their
// SlotID, two jobs run on the last two of the node's six slots, where
// HTCondor's default ranks would put them on the first two.
func TestNegotiatorPreJobRank(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", limitsPool("prejobrank", `NEGOTIATOR_PRE_JOB_RANK = "MY.SlotID * (TARGET.Steered =?= true)"`))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	w.write("job.sub", "executable = /bin/sleep\narguments = 30\n+Steered = true\nqueue 2\n")
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	var hosts []string
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus", "RemoteHost")
		hosts = hosts[:0]
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 || f[0] != "2" {
				return fmt.Errorf("both jobs do not run yet: %s", r)
			}
			hosts = append(hosts, strings.SplitN(f[1], "@", 2)[0])
		}
		if len(hosts) != 2 {
			return fmt.Errorf("both jobs do not run yet: %s", r)
		}
		return nil
	})
	sort.Strings(hosts)
	if strings.Join(hosts, " ") != "slot5 slot6" {
		t.Fatalf("the jobs run on %v; want slot5 and slot6, the slots NEGOTIATOR_PRE_JOB_RANK ranks highest", hosts)
	}
	w.run("condor", "rm", "-pool", cm, "-all")
}
