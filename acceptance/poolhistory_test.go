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

// historyPool is a one-node pool (central manager and execute node) with
// two slots.
const historyPool = `
pool "hist" {
  nodes  = 1
  slots  = 2
  config = {
    NEGOTIATOR_INTERVAL     = "2"
    NEGOTIATOR_MIN_INTERVAL = "1"
    UPDATE_INTERVAL         = "2"
  }
}

output "cm" {
  value = pool.hist.central_manager
}
`

// TestPoolHistory runs a few jobs on a local pool: pondctl condor
// pool-history shows the slots going Claimed/Busy and back to Unclaimed,
// the submitting user's slot time, and a knob changed by condor reconfig.
func TestPoolHistory(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(historyPool)
	w.write("job.sub", "executable = /bin/sleep\narguments = 3\nqueue 3\n")
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if n := strings.Count(r.stdout, "\n"); n > 0 {
			return fmt.Errorf("%d jobs still queued", n)
		}
		return nil
	})
	owner := strings.TrimSpace(w.expect(0, "condor", "history", "-pool", cm, "-af", "Owner", "-limit", "1").stdout)

	// A knob changed in the central manager's configuration and a
	// condor reconfig.
	cfgFile := filepath.Join(w.dir, ".pond", "local", "nodes", "hist-0", "condor_config")
	f, err := os.OpenFile(cfgFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "\nMAX_JOBS_RUNNING = 77")
	f.Close()
	w.expect(0, "condor", "reconfig", "-pool", cm)

	type report struct {
		Slots []struct {
			Slot       string `json:"slot"`
			State      string `json:"state"`
			Activity   string `json:"activity"`
			RemoteUser string `json:"remote_user"`
			JobID      string `json:"job_id"`
		} `json:"slots"`
		Users []struct {
			User        string  `json:"user"`
			SlotSeconds float64 `json:"slot_seconds"`
		} `json:"users"`
		Config []struct{ Node, Knob, Old, New, Who string } `json:"config"`
	}
	var rep report
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "pool-history", "-pool", cm, "-since", "1h", "-json")
		if r.code != 0 {
			return fmt.Errorf("pool-history: %s", r)
		}
		rep = report{}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			return fmt.Errorf("%v: %s", err, r.stdout)
		}
		if !strings.Contains(r.stdout, "MAX_JOBS_RUNNING") {
			return fmt.Errorf("no change of MAX_JOBS_RUNNING yet: %s", r.stdout)
		}
		now := map[string]string{}
		for _, s := range rep.Slots {
			now[s.Slot] = s.State
		}
		for slot, state := range now {
			if state != "Unclaimed" {
				return fmt.Errorf("%s is still %s", slot, state)
			}
		}
		return nil
	})
	// Each slot that ran a job went Claimed/Busy for the owner and back
	// to Unclaimed; no state is repeated back to back.
	busy, back := 0, 0
	last := map[string]string{}
	for _, s := range rep.Slots {
		k := s.State + "/" + s.Activity + "/" + s.RemoteUser + "/" + s.JobID
		if last[s.Slot] == k {
			t.Errorf("slot %s recorded twice in a row as %s", s.Slot, k)
		}
		if s.State == "Claimed" && s.Activity == "Busy" && strings.HasPrefix(s.RemoteUser, owner+"@") {
			busy++
		}
		if s.State == "Unclaimed" && strings.HasPrefix(last[s.Slot], "Claimed/") {
			back++
		}
		last[s.Slot] = k
	}
	if busy == 0 || back == 0 {
		t.Errorf("the slots did not go Claimed/Busy for %s (%d) and back to Unclaimed (%d): %+v", owner, busy, back, rep.Slots)
	}
	if len(rep.Users) == 0 || !strings.HasPrefix(rep.Users[0].User, owner+"@") || rep.Users[0].SlotSeconds <= 0 {
		t.Errorf("slot time by user %+v, want %s's > 0", rep.Users, owner)
	}
	found := false
	for _, c := range rep.Config {
		if strings.EqualFold(c.Knob, "MAX_JOBS_RUNNING") && c.New == "77" && c.Old != "77" && c.Node == "hist-0" {
			found = true
		}
	}
	if !found {
		t.Errorf("no change of MAX_JOBS_RUNNING to 77 recorded: %+v", rep.Config)
	}
	// The table, for a person.
	r := w.expect(0, "condor", "pool-history", "-pool", cm, "-machine", "hist-0")
	for _, want := range []string{"Slot states:", "Claimed", "Slot time by user:", owner + "@", "MAX_JOBS_RUNNING"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("pool-history table lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("pool-history:\n%s", r.stdout)
	w.expect(1, "condor", "pool-history", "-pool", cm, "-since", "yesterday")
}
