package acceptance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// snapPool is a one-node pool whose one partitionable slot has 1024 MB:
// a job's dynamic slot takes memory from it, so its Memory changes.
const snapPool = `
pool "snap" {
  nodes  = 1
  slots  = 1
  config = {
    NEGOTIATOR_INTERVAL       = "2"
    NEGOTIATOR_MIN_INTERVAL   = "1"
    UPDATE_INTERVAL           = "2"
    MEMORY                    = "1024"
    NUM_CPUS                  = "2"
    NUM_SLOTS_TYPE_1          = "1"
    SLOT_TYPE_1               = "100%"
    SLOT_TYPE_1_PARTITIONABLE = "true"
  }
}

output "cm" {
  value = pool.snap.central_manager
}
`

// snapAd is the part of a snapshot's ad (condor status -history
// -snapshots -json) the test reads.
type snapAd struct {
	Name             string
	Memory           int
	PondSnapshotTime int64
}

// TestMachineSnapshots runs a job on a partitionable slot: the central
// manager's history snapshots the slot's ad when its Memory drops to
// make the job's dynamic slot and again when it comes back. -snapshots
// -constraint finds the snapshot of the smaller Memory, -at its time
// shows the pool as it was then (the dynamic slot included), and -at now
// the pool as it is (the dynamic slot gone).
func TestMachineSnapshots(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(snapPool)
	w.write("job.sub", "executable = /bin/sleep\narguments = 6\nrequest_cpus = 1\nrequest_memory = 256\nqueue\n")
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	ads := func(args ...string) []snapAd {
		t.Helper()
		r := w.expect(0, append([]string{"condor", "status", "-pool", cm, "-history", "-json"}, args...)...)
		var out []snapAd
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		return out
	}
	// The job ran and the slot got its memory back.
	var small []snapAd
	eventually(t, 120*time.Second, func() error {
		small = ads("-snapshots", "-since", "1h", "-constraint", `Name == "slot1@snap-0" && Memory == 768`)
		back := ads("-snapshots", "-since", "1h", "-constraint", `Name == "slot1@snap-0" && Memory == 1024`)
		if len(small) == 0 || len(back) < 2 || back[len(back)-1].PondSnapshotTime < small[0].PondSnapshotTime {
			return fmt.Errorf("no snapshot of slot1 at 768 MB then 1024 MB yet: %+v %+v", small, back)
		}
		return nil
	})
	for _, s := range small {
		if s.Name != "slot1@snap-0" || s.Memory != 768 {
			t.Fatalf("-constraint selected %+v", s)
		}
	}
	// The pool as it was while the job ran.
	at := fmt.Sprint(small[0].PondSnapshotTime)
	then := ads("-at", at)
	mem := map[string]int{}
	for _, a := range then {
		mem[a.Name] = a.Memory
	}
	if mem["slot1@snap-0"] != 768 || mem["slot1_1@snap-0"] != 256 {
		t.Errorf("-at %s: %+v, want slot1 768 MB and slot1_1 256 MB", at, then)
	}
	if got := ads("-at", at, "-constraint", "Memory > 500"); len(got) != 1 || got[0].Name != "slot1@snap-0" {
		t.Errorf("-at %s -constraint 'Memory > 500': %+v", at, got)
	}
	// The pool now: slot1 has its memory back; the dynamic slot is gone.
	eventually(t, 30*time.Second, func() error {
		now := ads("-at", time.Now().Add(2*time.Second).Format(time.RFC3339))
		if len(now) != 1 || now[0].Name != "slot1@snap-0" || now[0].Memory != 1024 {
			return fmt.Errorf("-at now: %+v, want slot1 alone with 1024 MB", now)
		}
		return nil
	})
	// The table, for a person, and -long.
	r := w.expect(0, "condor", "status", "-pool", cm, "-history", "-at", at)
	if !strings.Contains(r.stdout, "slot1_1@snap-0") || !strings.Contains(r.stdout, "768") {
		t.Errorf("-at table:\n%s", r.stdout)
	}
	if r := w.expect(0, "condor", "status", "-pool", cm, "-history", "-at", at, "-l", "slot1@snap-0"); !strings.Contains(r.stdout, "Memory = 768") {
		t.Errorf("-at -l:\n%s", r.stdout)
	}
	w.expect(1, "condor", "status", "-pool", cm, "-history", "-at", "yesterday")
	w.expect(1, "condor", "status", "-pool", cm, "-history", "-at", at, "-since", "1h")
}
