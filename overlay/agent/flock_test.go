package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/flock"
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
	knobs := map[string]string{"POND_FLOCK_INTERVAL": "200ms", "POND_FLOCK_TTL": "2s"}
	agents := startAgents(t,
		&Config{Name: "busy-0", Role: "cm", Pool: "busy", Knobs: knobs},
		&Config{Name: "spare-0", Role: "cm", Pool: "spare", Knobs: knobs},
		&Config{Name: "denied-0", Role: "cm", Pool: "denied", Knobs: knobs},
		&Config{Name: "free", Role: "node"})
	busy, spare, free := agents[0], agents[1], agents[3]

	status := func(a *Agent) flock.Status {
		t.Helper()
		code, body := call(t, a, "GET", api.PathFlock, "")
		var st flock.Status
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
	if st, err := c.SetFlock(t.Context(), flock.Config{Name: name, Out: &flock.Out{To: []string{"nowhere"}}}); err != nil || len(st.Flocks) != 2 {
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
