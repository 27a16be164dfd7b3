package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// TestFlockAnnouncementsAndRoutes runs the central managers of three
// pools and a free node in one sea: each manager announces its spare
// capacity in its serf tags; a flock set through PUT /v1/flock/NAME makes
// the willing list of busy (GET /v1/flock) hold the pools it allows and
// not those it denies; a destination that accepts only other pools drops
// out, and comes back once it accepts any again; a bad expression is
// refused naming its argument; serf's coordinates give each willing
// pool's RTT; a node that is no central manager answers
// 409.
func TestFlockAnnouncementsAndRoutes(t *testing.T) {
	t.Parallel()
	knobs := map[string]string{"POND_FLOCK_INTERVAL": "200ms", "POND_FLOCK_TTL": "2s"}
	agents := startAgents(t,
		&Config{Name: "busy-0", Role: "cm", Pool: "busy", Knobs: knobs},
		&Config{Name: "spare-0", Role: "cm", Pool: "spare", Knobs: knobs},
		&Config{Name: "denied-0", Role: "cm", Pool: "denied", Knobs: knobs},
		&Config{Name: "free", Role: "node"})
	busy, spare, free := agents[0], agents[1], agents[3]

	status := func(a *Agent) api.FlockStatus {
		t.Helper()
		code, body := call(t, a, "GET", api.PathFlock, "")
		var st api.FlockStatus
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET %s: %d %s", api.PathFlock, code, body)
		}
		return st
	}
	willing := func(a *Agent) string {
		var names []string
		for _, c := range status(a).Willing {
			names = append(names, c.Pool)
		}
		return strings.Join(names, " ")
	}
	waitFor(t, 20*time.Second, "every pool's announcement at busy", func() error {
		st := status(busy)
		if len(st.Sea) != 3 {
			return fmt.Errorf("announcements %+v", st.Sea)
		}
		for _, a := range st.Sea {
			if a.IdleSlots == 0 || a.API == "" {
				return fmt.Errorf("announcement %+v", a)
			}
		}
		return nil
	})
	if w := willing(busy); w != "" {
		t.Fatalf("willing with no flock: %q", w)
	}

	for _, tc := range []struct{ path, body, want string }{
		{"any", `{"name": "any", "out": {"allow": "Cpus >"}}`, "allow:"},
		{"any", `{"name": "any"}`, "neither out nor in"},
		{"other", `{"name": "any", "out": {}}`, `the path names \"other\"`},
		{"any", `{`, "body"},
	} {
		if code, body := call(t, busy, "PUT", api.PathFlocks+tc.path, tc.body); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("PUT %s %s: %d %s, want 400 naming %q", tc.path, tc.body, code, body, tc.want)
		}
	}
	if code, body := call(t, busy, "PUT", api.PathFlocks+"any", `{"name": "any", "out": {"deny": "PoolName == \"denied\""}}`); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if w := willing(busy); w != "spare" {
		t.Fatalf("willing %q, want spare", w)
	}
	// spare accepts only "other": busy's willing list empties.
	if code, body := call(t, spare, "PUT", api.PathFlocks+"in", `{"name": "in", "in": {"from": ["other"]}}`); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "spare to refuse busy", func() error {
		if w := willing(busy); w != "" {
			return fmt.Errorf("willing %q", w)
		}
		return nil
	})
	// spare's collector refuses busy's submitters, not its own node's.
	if err := spare.acceptSubmitters("busy-0"); err == nil || !strings.Contains(err.Error(), `not from pool "busy"`) {
		t.Errorf("spare's collector takes busy's submitters: %v", err)
	}
	if err := spare.acceptSubmitters("spare-0"); err != nil {
		t.Errorf("spare's collector refuses its own node's submitters: %v", err)
	}
	if code, body := call(t, spare, "DELETE", api.PathFlocks+"in", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "spare to accept busy again", func() error {
		if w := willing(busy); w != "spare" {
			return fmt.Errorf("willing %q", w)
		}
		return nil
	})
	// serf's coordinates give the round trip to spare.
	waitFor(t, 30*time.Second, "an RTT estimate of spare", func() error {
		if w := status(busy).Willing; len(w) != 1 || !w[0].RTTKnown || w[0].RTT <= 0 {
			return fmt.Errorf("willing %+v", w)
		}
		return nil
	})
	if err := spare.acceptSubmitters("busy-0"); err != nil {
		t.Errorf("spare accepts any pool again, but not busy's submitters: %v", err)
	}
	if targets := busy.flockTargets(); len(targets) != 1 || targets[0].Pool != "spare" || targets[0].Node != "spare-0" || targets[0].Collector != spare.APIAddr() {
		t.Errorf("the schedd's targets: %+v", targets)
	}
	if st := status(busy); len(st.Flocks) != 1 || st.Flocks[0].Name != "any" || st.Announcement.Pool != "busy" {
		t.Errorf("status: %+v", st)
	}
	// A for_each address, escaped in the path, is a flock's name too.
	c := api.NewClient(busy.APIAddr())
	name := `flock.x["a b"]`
	if st, err := c.SetFlock(t.Context(), api.FlockConfig{Name: name, Out: &api.FlockOut{To: []string{"nowhere"}}}); err != nil || len(st.Flocks) != 2 {
		t.Fatalf("set %s: %v %+v", name, err, st)
	}
	if err := c.RemoveFlock(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	if st := status(busy); len(st.Flocks) != 1 {
		t.Errorf("after removing %s: %+v", name, st.Flocks)
	}
	if code, body := call(t, free, "GET", api.PathFlock, ""); code != http.StatusConflict || !strings.Contains(body, "not a pool's central manager") {
		t.Errorf("GET at a free node: %d %s", code, body)
	}
	if code, _ := call(t, free, "PUT", api.PathFlocks+"any", `{"name": "any", "out": {}}`); code != http.StatusConflict {
		t.Errorf("PUT at a free node: %d", code)
	}
}

// runningJobs describes the jobs of the agents' schedds, for a failing
// test to say what ran where.
func runningJobs(t *testing.T, agents ...*Agent) string {
	var b strings.Builder
	for _, a := range agents {
		q, err := wire.NewSchedd(a.APIAddr(), "").Queue(t.Context(),
			&wire.QueryJobsRequest{Projection: []string{"JobStatus", "RemoteHost", "JobCurrentStartDate", "EnteredCurrentStatus"}})
		if err != nil {
			fmt.Fprintf(&b, "%s: %v; ", a.cfg.Name, err)
			continue
		}
		for _, j := range q {
			fmt.Fprintf(&b, "%s %s %v; ", a.cfg.Name, j.ID, j.Ad)
		}
	}
	return b.String()
}

// TestFlockMaxJobsPoolWide runs pool busy (busy-0, its manager, and
// busy-1, neither with a slot) flocking to pool spare (six slots) with
// max_jobs = 2. busy-1's two jobs take the two places; busy-0's jobs,
// which wait too, get none in spare while busy-1's run (busy-0 counts
// them in spare's collector): max_jobs bounds the pool's jobs there, not
// each schedd's. Once busy-1's jobs end, busy-0's run there.
func TestFlockMaxJobsPoolWide(t *testing.T) {
	t.Parallel()
	knobs := map[string]string{"POND_FLOCK_INTERVAL": "200ms", "POND_FLOCK_TTL": "2s"}
	busy0, _ := startAgentAt(t, &Config{Name: "busy-0", Role: "cm", Pool: "busy", Knobs: knobs,
		ConfigFile: fastCondor(t, "FLOCK_IDLE_TIME = 1\nDAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n")}, "", "")
	join := busy0.Sea().GossipAddr()
	busy1, _ := startAgentAt(t, &Config{Name: "busy-1", Role: "node", Pool: "busy", CondorHost: busy0.APIAddr(), Knobs: knobs,
		ConfigFile: fastCondor(t, "FLOCK_IDLE_TIME = 1\nDAEMON_LIST = MASTER SCHEDD\n")}, join, "")
	spare, _ := startAgentAt(t, &Config{Name: "spare-0", Role: "cm", Pool: "spare", Knobs: knobs,
		ConfigFile: fastCondor(t, "NUM_CPUS = 6\n")}, join, "")
	for _, p := range []struct {
		a          *Agent
		name, body string
	}{{busy0, "overflow", `{"name": "overflow", "out": {"to": ["spare"], "max_jobs": 2}}`},
		{spare, "overflow", `{"name": "overflow", "in": {"from": ["busy"]}}`}} {
		if code, out := call(t, p.a, "PUT", api.PathFlocks+p.name, p.body); code != http.StatusOK {
			t.Fatalf("PUT %s at %s: %d %s", p.name, p.a.cfg.Name, code, out)
		}
	}
	waitFor(t, 30*time.Second, "busy-1 to see spare willing", func() error {
		if ts := busy1.flockTargets(); len(ts) != 1 || ts[0].Pool != "spare" || ts[0].MaxJobs != 2 {
			return fmt.Errorf("busy-1's targets %+v", ts)
		}
		return nil
	})
	running := func(a *Agent) (int, error) {
		q, err := wire.NewSchedd(a.APIAddr(), "").Queue(t.Context(), &wire.QueryJobsRequest{Projection: []string{"RemoteHost", "JobStatus"}})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, j := range q {
			if j.Ad["JobStatus"] == "2" {
				if !strings.Contains(j.Ad["RemoteHost"], "@spare-") {
					return 0, fmt.Errorf("job %s runs at %s", j.ID, j.Ad["RemoteHost"])
				}
				n++
			}
		}
		return n, nil
	}
	for range 2 {
		submitSleep(t, busy1, 15)
	}
	waitFor(t, 60*time.Second, "busy-1's two jobs to run in spare", func() error {
		if n, err := running(busy1); err != nil || n != 2 {
			return fmt.Errorf("%d running, %v", n, err)
		}
		return nil
	})
	waitFor(t, 20*time.Second, "busy-0 to count busy-1's jobs in spare", func() error {
		if ts := busy0.flockTargets(); len(ts) != 1 || ts[0].OthersRunning != 2 {
			return fmt.Errorf("busy-0's targets %+v", ts)
		}
		return nil
	})
	var logs []string
	for range 3 {
		logs = append(logs, submitSleep(t, busy0, 1))
	}
	// busy-0's jobs wait FLOCK_IDLE_TIME and flock at once when they may:
	// for five seconds, none may.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		n0, err := running(busy0)
		if err != nil {
			t.Fatal(err)
		}
		n1, err := running(busy1)
		if err != nil {
			t.Fatal(err)
		}
		if n0+n1 > 2 {
			t.Fatalf("busy runs %d jobs in spare (busy-0 %d, busy-1 %d), more than its max_jobs of 2; busy-0's targets %+v; jobs: %s",
				n0+n1, n0, n1, busy0.flockTargets(), runningJobs(t, busy0, busy1))
		}
		if n0 > 0 {
			t.Fatalf("busy-0 runs %d jobs in spare while busy-1's two run there; busy-0's targets %+v; jobs: %s",
				n0, busy0.flockTargets(), runningJobs(t, busy0, busy1))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, l := range logs {
		waitFor(t, 90*time.Second, "busy-0's job to complete in spare", func() error {
			b, _ := os.ReadFile(l)
			if !strings.Contains(string(b), "\n005 ") && !strings.HasPrefix(string(b), "005 ") {
				return fmt.Errorf("%s: not terminated", l)
			}
			return nil
		})
	}
}
