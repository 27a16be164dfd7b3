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

// TestFailoverPartition cuts a pool's central manager (in the lab's hub)
// off from its workers (all in site 1) while jobs run and more are
// submitted there: a replica in the site takes over at epoch 2 and the
// site's members follow it while the manager, alone, stays at epoch 1;
// every job completes exactly once; after the heal the manager takes the
// pool back at epoch 3 and the replica stops negotiating.
func TestFailoverPartition(t *testing.T) {
	t.Parallel()
	needNetns(t)
	lab := newNetLab(t, siteRouted)
	knobs := `NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "2"`
	// The hub's pool is its central manager alone (nodes = 1), so its
	// replicas knob is set directly; the workers get it too.
	w, cm, opts := labPool(t, lab, "fp", `slots = 2
  config = { `+knobs+`, POND_CM_REPLICAS = "2" }`)
	opts.Knobs = map[string]string{"NUM_SLOTS": "2", "UPDATE_INTERVAL": "2", "POND_CM_REPLICAS": "2"}
	site := lab.Sites[0]
	var agents []*labAgent
	logOnFailure(t, w, cm, func() []*labAgent { return agents })
	t.Cleanup(func() {
		d := os.Getenv("FAILOVER_KEEP_LOGS")
		if !t.Failed() || d == "" {
			return
		}
		logs := map[string]string{"fp-0": filepath.Join(w.dir, ".pond", "local", "nodes", "fp-0", "agent.log")}
		for _, a := range agents {
			logs[a.Name] = filepath.Join(a.Dir, "agent.log")
		}
		for n, path := range logs {
			if b, err := os.ReadFile(path); err == nil {
				os.WriteFile(filepath.Join(d, n+".log"), b, 0o600)
			}
		}
	})
	for _, n := range []string{"fp-a", "fp-b", "fp-c"} {
		agents = append(agents, site.startAgent(t, w, n, opts))
	}
	submit := agents[2].Info.API // fp-c's schedd
	// ws runs pondctl in the site, which the cut leaves with the workers.
	ws := *w
	ws.netns = site.NS

	var replicas []string
	eventually(t, 60*time.Second, func() error {
		m, err := actingManagers(w, cm)
		if err != nil || len(m) != 1 || m["fp-0"] != 1 {
			return fmt.Errorf("acting managers %v (%v), want fp-0 at epoch 1", m, err)
		}
		replicas = nil
		for _, a := range agents {
			var st struct {
				Manager  string   `json:"manager"`
				Replicas []string `json:"replicas"`
			}
			b, err := os.ReadFile(filepath.Join(a.Dir, "failover.json"))
			if err == nil && json.Unmarshal(b, &st) == nil && st.Manager == "fp-0" && len(st.Replicas) == 2 {
				replicas = st.Replicas
			}
		}
		if replicas == nil {
			return fmt.Errorf("no replica holds the manager's state")
		}
		r := w.run("condor", "status", "-pool", cm, "-af", "Machine")
		for _, n := range []string{"fp-a", "fp-b", "fp-c"} {
			if !strings.Contains(r.stdout, n) {
				return fmt.Errorf("%s has no slot in the pool yet: %s", n, r)
			}
		}
		return nil
	})
	t.Logf("replicas: %v", replicas)

	w.write("a.sub", failoverSubmit(0, 6))
	w.expect(0, "condor", "submit", "-pool", submit, "a.sub")
	waitRunning(t, w, submit, 4)

	site.Cut()
	cut := time.Now()
	w.write("b.sub", failoverSubmit(1, 3))
	ws.expect(0, "condor", "submit", "-pool", submit, "b.sub")
	var took time.Duration
	eventually(t, 60*time.Second, func() error {
		m, err := actingManagers(&ws, submit)
		if err != nil || len(m) != 1 || m[replicas[0]] != 2 {
			return fmt.Errorf("acting managers seen from the site %v (%v), want %s at epoch 2", m, err, replicas[0])
		}
		r := ws.run("condor", "status", "-negotiator", "-pool", submit, "-af", "Name", "PondEpoch", "LastNegotiationCycleTime0")
		f := strings.Fields(r.stdout)
		if r.code != 0 || len(f) < 3 || f[0] != replicas[0] || f[1] != "2" {
			return fmt.Errorf("negotiator: %s", r)
		}
		took = time.Since(cut)
		return nil
	})
	t.Logf("partition of the central manager to a replica negotiating at epoch 2: %s", took.Round(time.Millisecond))
	if m, err := actingManagers(w, cm); err != nil || m["fp-0"] != 1 {
		t.Errorf("acting managers seen from the hub %v (%v), want fp-0 still at epoch 1", m, err)
	}

	// Every job completes once in the site, those submitted after the cut too.
	eventually(t, 150*time.Second, func() error {
		r := ws.run("condor", "q", "-pool", submit, "-af", "ClusterId", "ProcId", "JobStatus")
		if left := strings.Count(r.stdout, "\n"); r.code != 0 || left > 0 {
			return fmt.Errorf("%d jobs still queued (%s)", left, r)
		}
		return nil
	})

	site.Heal()
	healed := time.Now()
	// serf's reconnection to the members it declared failed, then the
	// hand-back hold-down (POND_CM_HANDBACK_HOLD_DOWN, 10 s).
	eventually(t, 90*time.Second, func() error {
		m, err := actingManagers(w, cm)
		if err != nil || len(m) != 1 || m["fp-0"] != 3 {
			return fmt.Errorf("acting managers %v (%v), want fp-0 at epoch 3", m, err)
		}
		r := w.run("condor", "status", "-negotiator", "-pool", submit, "-af", "Name", "PondEpoch")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "fp-0 3" {
			return fmt.Errorf("negotiators of the collector the members report to: %s", r)
		}
		return nil
	})
	t.Logf("heal to the hand-back: %s", time.Since(healed).Round(time.Millisecond))
	w.write("c.sub", failoverSubmit(2, 2))
	w.expect(0, "condor", "submit", "-pool", submit, "c.sub")
	waitQueueEmpty(t, w, submit)
	completedOnce(t, w, map[int]int{0: 6, 1: 3, 2: 2})
	refused := 0
	for _, a := range agents {
		b, _ := os.ReadFile(filepath.Join(a.Dir, "agent.log"))
		refused += strings.Count(string(b), "refused a claim of a replaced central manager")
	}
	t.Logf("claims of a replaced manager refused by the startds: %d", refused)
}
