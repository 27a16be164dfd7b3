package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// TestHandbackHoldDown runs pool campus: its declared manager campus-0 and
// a member campus-1, its replica, with a hand-back hold-down of three
// seconds. campus-0 stops and campus-1 takes over. campus-0 comes back:
// it follows campus-1, runs no negotiator and does not take the pool
// back during the hold-down; it flaps (stops and comes back again within
// the hold-down), which starts the wait again; once back for the whole
// hold-down, it takes the pool back above campus-1's epoch, and campus-1
// stops acting.
func TestHandbackHoldDown(t *testing.T) {
	t.Parallel()
	const holdDown = 3 * time.Second
	knobs := map[string]string{"POND_CM_REPLICAS": "1", "POND_CM_REPLICATE_INTERVAL": "200ms", "POND_CM_TAKEOVER_STEP": "1s",
		"POND_CM_HANDBACK_HOLD_DOWN": holdDown.String()}
	condor := fastCondor(t, "")
	dir := t.TempDir()
	cmCfg := func() *Config {
		return &Config{Name: "campus-0", Role: "cm", Pool: "campus", Knobs: knobs, ConfigFile: condor}
	}
	cm, stopCM := startAgentAt(t, cmCfg(), "", dir)
	replica, _ := startAgentAt(t, &Config{Name: "campus-1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr(), Knobs: knobs,
		ConfigFile: condor}, cm.Sea().GossipAddr(), "")
	waitFor(t, 30*time.Second, "campus-1 to hold campus-0's state", func() error {
		if st := replica.FailoverStatus().State; st == nil || st.Manager != "campus-0" || st.Epoch != 1 {
			return fmt.Errorf("campus-1's state %+v", st)
		}
		return nil
	})
	stopCM()
	waitFor(t, 30*time.Second, "campus-1 to take over", func() error {
		if fs := replica.FailoverStatus(); !fs.Acting {
			return fmt.Errorf("campus-1 does not act: %+v", fs)
		}
		return nil
	})
	epoch := replica.FailoverStatus().Epoch

	// back follows campus-0 back while it is within the hold-down: it
	// follows campus-1, runs no negotiator, and campus-1 acts.
	within := func(cm *Agent, since time.Time, d time.Duration) {
		t.Helper()
		waitFor(t, 30*time.Second, "campus-0 to follow campus-1", func() error {
			if fs := cm.FailoverStatus(); fs.Manager != "campus-1" || fs.ManagerEpoch != epoch {
				return fmt.Errorf("campus-0 follows %s at epoch %d", fs.Manager, fs.ManagerEpoch)
			}
			return nil
		})
		for time.Since(since) < d {
			if fs := cm.FailoverStatus(); fs.Acting {
				t.Fatalf("campus-0 took the pool back %s after it came back, within the hold-down of %s: %+v",
					time.Since(since).Round(time.Millisecond), holdDown, fs)
			}
			if cm.daemons.Master.Negotiator() != nil {
				t.Fatalf("campus-0 runs a negotiator while it follows campus-1")
			}
			if fs := replica.FailoverStatus(); !fs.Acting || fs.Epoch != epoch {
				t.Fatalf("campus-1 no longer acts at epoch %d within campus-0's hold-down: %+v", epoch, fs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	back := time.Now()
	cm, stopCM = startAgentAt(t, cmCfg(), replica.Sea().GossipAddr(), dir)
	within(cm, back, holdDown*2/3)
	// It flaps: gone and back again within the hold-down. The wait
	// starts again.
	stopCM()
	back = time.Now()
	cm, _ = startAgentAt(t, cmCfg(), replica.Sea().GossipAddr(), dir)
	within(cm, back, holdDown*2/3)
	waitFor(t, 30*time.Second, "campus-0 to take the pool back", func() error {
		if fs := cm.FailoverStatus(); !fs.Acting || fs.Epoch <= epoch {
			return fmt.Errorf("campus-0 does not act above epoch %d: %+v", epoch, fs)
		}
		if fs := replica.FailoverStatus(); fs.Acting || fs.Manager != "campus-0" {
			return fmt.Errorf("campus-1 acts or does not follow campus-0: %+v", fs)
		}
		return nil
	})
	if took := time.Since(back); took < holdDown {
		t.Errorf("campus-0 took the pool back %s after it came back, before the hold-down of %s", took, holdDown)
	}
}

// TestPondFollowsFailover runs pool campus (campus-0, its declared
// manager, and campus-1, its replica) and a free node that a pond of
// campus's manager took in. campus-0 stops: the pond member follows
// campus-1, which acts for it, long before the orphan timeout would have
// sent it back to the sea; campus-0 comes back and takes the pool back,
// and the member follows it there, still in its pond.
func TestPondFollowsFailover(t *testing.T) {
	t.Parallel()
	knobs := map[string]string{"POND_CM_REPLICAS": "1", "POND_CM_REPLICATE_INTERVAL": "200ms", "POND_CM_TAKEOVER_STEP": "1s",
		"POND_CM_HANDBACK_HOLD_DOWN": "1s"}
	condor := fastCondor(t, "")
	dir := t.TempDir()
	cmCfg := func() *Config {
		return &Config{Name: "campus-0", Role: "cm", Pool: "campus", Knobs: knobs, ConfigFile: condor}
	}
	cm, stopCM := startAgentAt(t, cmCfg(), "", dir)
	replica, _ := startAgentAt(t, &Config{Name: "campus-1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr(), Knobs: knobs,
		ConfigFile: condor}, cm.Sea().GossipAddr(), "")
	free, _ := startAgentAt(t, &Config{Name: "free", Role: "node", ConfigFile: condor}, cm.Sea().GossipAddr(), "")
	waitFor(t, 30*time.Second, "campus-1 to hold campus-0's state", func() error {
		if st := replica.FailoverStatus().State; st == nil || st.Epoch != 1 {
			return fmt.Errorf("campus-1's state %+v", st)
		}
		return nil
	})
	r, err := api.NewClient(free.APIAddr()).Invite(t.Context(), api.Invitation{Pond: "burst", PondID: "p1", CentralManager: cm.APIAddr(), Lease: time.Hour})
	if err != nil || !r.Accepted {
		t.Fatalf("invite: %+v, %v", r, err)
	}
	member := func(want *Agent) func() error {
		return func() error {
			host, _ := free.daemons.Master.Config().Get("CONDOR_HOST")
			tags := free.Sea().LocalMember().Tags
			if host != want.APIAddr() || tags[api.TagCM] != want.APIAddr() || tags[api.TagPond] != "burst" {
				return fmt.Errorf("the member's CONDOR_HOST %q, tags cm=%q pond=%q; want %s (%s) in burst", host, tags[api.TagCM],
					tags[api.TagPond], want.cfg.Name, want.APIAddr())
			}
			return nil
		}
	}
	waitFor(t, 10*time.Second, "the member to report to campus-0", member(cm))

	stopCM()
	gone := time.Now()
	waitFor(t, 20*time.Second, "the member to follow campus-1", member(replica))
	if d := time.Since(gone); d >= 30*time.Second {
		t.Errorf("the member followed campus-1 %s after campus-0 stopped, not before the orphan timeout", d)
	}
	cm, _ = startAgentAt(t, cmCfg(), replica.Sea().GossipAddr(), dir)
	waitFor(t, 30*time.Second, "the member to follow campus-0 back", func() error {
		if fs := cm.FailoverStatus(); !fs.Acting {
			return fmt.Errorf("campus-0 does not act: %+v", fs)
		}
		return member(cm)()
	})
	if cur, err := api.NewClient(free.APIAddr()).Membership(t.Context()); err != nil || cur == nil || cur.CentralManager != cm.APIAddr() {
		t.Errorf("the member's membership %+v, %v; want campus-0's %s", cur, err, cm.APIAddr())
	}
}
