package acceptance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// confHistPool is a two-node pool whose configuration the test changes;
// MY_API_TOKEN is a secret by its name.
const confHistPool = `
pool "cfgh" {
  nodes  = 2
  slots  = 1
  config = {
    UPDATE_INTERVAL        = "2"
    MASTER_UPDATE_INTERVAL = "5"
    MAX_JOBS_RUNNING       = "%s"
    MY_API_TOKEN           = "%s"
  }
}

output "cm" {
  value = pool.cfgh.central_manager
}
`

// TestConfigHistory changes a pool's configuration with pondctl apply:
// pondctl condor config-history shows the knob's change on each node,
// the execute node's as well as the central manager's, with its old and
// new value, and never the secret's values.
func TestConfigHistory(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(fmt.Sprintf(confHistPool, "11", "s3cret-one"))
	// Both masters advertise their configuration (the baseline).
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-master", "-af", "Name", "PondConfigHash")
		if r.code != 0 || strings.Count(r.stdout, "cfgh-") != 2 {
			return fmt.Errorf("the two masters' ads are not in yet: %s", r)
		}
		return nil
	})
	w.write("main.pond.hcl", fmt.Sprintf(confHistPool, "22", "s3cret-two"))
	w.expect(0, "apply", "-auto-approve")
	type change struct{ At, Node, Knob, Old, New, Who string }
	var changes []change
	eventually(t, 90*time.Second, func() error {
		r := w.run("condor", "config-history", "-pool", cm, "-since", "1h", "-json")
		if r.code != 0 {
			return fmt.Errorf("config-history: %s", r)
		}
		changes = nil
		if err := json.Unmarshal([]byte(r.stdout), &changes); err != nil {
			return fmt.Errorf("%v: %s", err, r.stdout)
		}
		nodes := map[string]bool{}
		for _, c := range changes {
			if strings.EqualFold(c.Knob, "MAX_JOBS_RUNNING") && c.Old == "11" && c.New == "22" {
				nodes[c.Node] = true
			}
		}
		if !nodes["cfgh-0"] || !nodes["cfgh-1"] {
			return fmt.Errorf("MAX_JOBS_RUNNING 11 -> 22 not recorded on both nodes: %+v", changes)
		}
		return nil
	})
	// The machine attributes the agents stamp at run time (their
	// credentials' expiries) are no configuration.
	for _, c := range changes {
		if strings.HasPrefix(c.Knob, "Pond") {
			t.Errorf("a stamped machine attribute recorded as a configuration change: %+v", c)
		}
	}
	all := w.expect(0, "condor", "config-history", "-pool", cm, "-since", "1h", "-json").stdout
	all += w.expect(0, "condor", "config-history", "-pool", cm, "-node", "cfgh-1").stdout
	all += w.expect(0, "condor", "status", "-pool", cm, "-master", "-l").stdout
	all += w.expect(0, "condor", "pool-history", "-pool", cm, "-json").stdout
	if strings.Contains(all, "s3cret") {
		t.Errorf("a secret's value is shown:\n%s", all)
	}
	// One node's changes, as a table.
	r := w.expect(0, "condor", "config-history", "-pool", cm, "-node", "cfgh-1")
	if !strings.Contains(r.stdout, "MAX_JOBS_RUNNING") || !strings.Contains(r.stdout, "11 -> 22") || strings.Contains(r.stdout, "cfgh-0") {
		t.Errorf("config-history -node cfgh-1:\n%s", r.stdout)
	}
	t.Logf("config-history:\n%s", r.stdout)
	w.expect(1, "condor", "config-history", "-pool", cm, "-since", "yesterday")
}
