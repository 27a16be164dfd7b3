package startd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// stubbornJob is a job that ignores its soft kill (SIGTERM) and sleeps
// for a minute, with an argument no other process has.
func stubbornJob(t *testing.T) (wire.Ad, string) {
	t.Helper()
	arg := fmt.Sprintf("61.%06d", rand.IntN(1000000))
	args := `-c 'trap "" TERM; exec /bin/sleep ` + arg + `'`
	return testJob(map[string]string{"Cmd": `"/bin/sh"`, "Arguments": strconv.Quote(args), "TransferExecutable": "false"}), arg
}

// isSleep says whether a process processesWith found is /bin/sleep.
func isSleep(found string) bool {
	_, cmd, _ := strings.Cut(found, ": ")
	return strings.HasPrefix(cmd, "/bin/sleep ")
}

// phase is a state and activity a slot's ad showed, and when, since the
// eviction began.
type phase struct {
	state string
	at    time.Duration
}

// TestEvictionStates evicts a job that ignores its soft kill, on a
// machine with 4 s of retirement (MAXJOBRETIREMENTTIME) and 2 s of vacate
// time (MachineMaxVacateTime), for each cause: its slot's ad goes through
// HTCondor's states and activities (Claimed/Retiring, Preempting/Vacating,
// Preempting/Killing) at the times HTCondor's startd keeps, the job's
// schedd is told it was evicted, with why, and the claim ends with it.
func TestEvictionStates(t *testing.T) {
	t.Parallel()
	s := time.Second
	cases := []struct {
		name   string
		knobs  map[string]string
		job    map[string]string
		evict  func(st *Startd)
		phases []string
		// soft and kill are when the job is soft-killed and killed,
		// from its start.
		soft, kill time.Duration
		why        string
	}{
		{name: "PREEMPT: retires, then is vacated", knobs: map[string]string{"PREEMPT": `TARGET.Owner == "alice"`},
			phases: []string{"Claimed/Retiring", "Preempting/Vacating", "Preempting/Killing"}, soft: 2 * s, kill: 4 * s,
			why: preemptPolicy},
		{name: "PREEMPT: the job's own shorter MaxJobRetirementTime", knobs: map[string]string{"PREEMPT": `TARGET.Owner == "alice"`},
			job:    map[string]string{"MaxJobRetirementTime": "3"},
			phases: []string{"Claimed/Retiring", "Preempting/Vacating", "Preempting/Killing"}, soft: 1 * s, kill: 3 * s,
			why: preemptPolicy},
		{name: "PREEMPT: no retirement, the vacate time", knobs: map[string]string{"PREEMPT": "true", "MAXJOBRETIREMENTTIME": "0"},
			phases: []string{"Preempting/Vacating", "Preempting/Killing"}, soft: 0, kill: 2 * s, why: preemptPolicy},
		{name: "PREEMPT: WANT_VACATE false", knobs: map[string]string{"PREEMPT": "true", "WANT_VACATE": "false"},
			phases: []string{"Claimed/Retiring", "Preempting/Killing"}, soft: -1, kill: 4 * s, why: preemptPolicy},
		{name: "drain -graceful", evict: func(st *Startd) { mustDrain(t, st, DrainGraceful) },
			phases: []string{"Claimed/Retiring", "Preempting/Vacating", "Preempting/Killing"}, soft: 2 * s, kill: 4 * s,
			why: "the machine is draining: testing"},
		{name: "drain -quick", evict: func(st *Startd) { mustDrain(t, st, DrainQuick) },
			phases: []string{"Preempting/Vacating", "Preempting/Killing"}, soft: 0, kill: 2 * s,
			why: "the machine is draining: testing"},
		{name: "drain -graceful made -quick after 1 s", evict: func(st *Startd) { drainThen(t, st, DrainGraceful, DrainQuick) },
			phases: []string{"Claimed/Retiring", "Preempting/Vacating", "Preempting/Killing"}, soft: 1 * s, kill: 3 * s,
			why: "the machine is draining: testing"},
		{name: "drain -graceful made -fast after 1 s", evict: func(st *Startd) { drainThen(t, st, DrainGraceful, DrainFast) },
			phases: []string{"Claimed/Retiring", "Preempting/Killing"}, soft: -1, kill: 1 * s,
			why: "the machine is draining: testing"},
		{name: "drain -fast", evict: func(st *Startd) { mustDrain(t, st, DrainFast) },
			phases: []string{"Preempting/Killing"}, soft: -1, kill: 0, why: "the machine is draining: testing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := &fakeSchedd{}
			schedd := fs.serve(t)
			knobs := map[string]string{"NUM_CPUS": "1", "MEMORY": "1000", "REPORT_RETRY_TIME": "5", "STARTER_POLL_INTERVAL": "0.1",
				"MAXJOBRETIREMENTTIME": "4", "MachineMaxVacateTime": "2"}
			for k, v := range tc.knobs {
				knobs[k] = v
			}
			st := newStartd(t, knobs)
			t.Cleanup(st.shutdown)
			job, arg := stubbornJob(t)
			for k, v := range tc.job {
				job[k] = v
			}
			claim, err := st.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, st), Job: job, Schedd: schedd})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "1.0", Job: job}); err != nil {
				t.Fatal(err)
			}
			st.mu.Lock()
			sl := st.claims[claim.ClaimID]
			st.mu.Unlock()
			// The job ignores its soft kill once its shell has made way for
			// sleep: before, a soft kill would end it at once.
			eventuallyTrue(t, 10*time.Second, func() bool { return slices.ContainsFunc(processesWith(arg), isSleep) })
			st.mu.Lock()
			started := sl.entered
			st.mu.Unlock()
			if tc.evict != nil {
				tc.evict(st)
			}
			var seen []phase
			var ended time.Duration
			for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				st.mu.Lock()
				running := sl.run != nil
				var now string
				if running {
					ad := st.slotAd(sl)
					state, _ := ad.EvalAttr("State").StringValue()
					activity, _ := ad.EvalAttr("Activity").StringValue()
					now = state + "/" + activity
				}
				st.mu.Unlock()
				if !running {
					ended = time.Since(started)
					break
				}
				if now != "Claimed/Busy" && (len(seen) == 0 || seen[len(seen)-1].state != now) {
					seen = append(seen, phase{now, time.Since(started)})
				}
			}
			var got []string
			for _, p := range seen {
				got = append(got, p.state)
			}
			// A killed job may end before a poll sees it Killing.
			want := strings.Join(tc.phases, " ")
			if g := strings.Join(got, " "); g != want && g != strings.TrimSuffix(strings.TrimSuffix(want, "Preempting/Killing"), " ") {
				t.Fatalf("the slot went through %v; want %v", seen, tc.phases)
			}
			// Figures from the job's start (a drain's, from its call,
			// a moment later); the polls see them within 0.1 s.
			check := func(what string, at, want time.Duration) {
				if want >= 0 && (at < want-200*time.Millisecond || at > want+700*time.Millisecond) {
					t.Errorf("%s %v after the job started; want %v", what, at.Round(time.Millisecond), want)
				}
			}
			for _, p := range seen {
				if p.state == "Preempting/Vacating" {
					check("the slot was Preempting/Vacating", p.at, tc.soft)
				}
			}
			check("the job ended", ended, tc.kill)
			var report wire.JobReport
			eventuallyTrue(t, 10*time.Second, func() bool {
				fs.mu.Lock()
				defer fs.mu.Unlock()
				for _, r := range fs.reports {
					if r.JobID == "1.0" && r.Kind != wire.ReportUpdate {
						report = r
						return true
					}
				}
				return false
			})
			if report.Kind != wire.ReportEvicted || report.Reason != tc.why || !report.ClaimClosed {
				t.Errorf("the job's report is %s (%q, claim closed %v); want %s (%q), the claim closed", report.Kind, report.Reason,
					report.ClaimClosed, wire.ReportEvicted, tc.why)
			}
			eventuallyTrue(t, 10*time.Second, func() bool {
				st.mu.Lock()
				defer st.mu.Unlock()
				return st.claims[claim.ClaimID] == nil
			})
			if left := processesWith(arg); len(left) > 0 {
				t.Errorf("the job's processes are left: %v", left)
			}
		})
	}
}

func mustDrain(t *testing.T, st *Startd, mode DrainMode) {
	t.Helper()
	if _, err := st.StartDrain(mode, "testing", "tester"); err != nil {
		t.Error(err)
	}
}

// drainThen drains st as first, and a second later as then.
func drainThen(t *testing.T, st *Startd, first, then DrainMode) {
	mustDrain(t, st, first)
	time.AfterFunc(time.Second, func() { mustDrain(t, st, then) })
}

// TestDrainTakesNoJobUntilCancelled drains a machine gracefully while a job
// retires: the machine refuses claims, its slots show Drained and the ad
// condor_drain's attributes; cancelling lets the retiring job run on
// (Claimed/Busy) and the machine take claims again; a cancel of no drain
// is refused.
func TestDrainTakesNoJobUntilCancelled(t *testing.T) {
	t.Parallel()
	fs := &fakeSchedd{}
	schedd := fs.serve(t)
	st := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1000", "MAXJOBRETIREMENTTIME": "600"})
	t.Cleanup(st.shutdown)
	job, arg := uniqueSleep()
	claim, err := st.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, st), Job: job, Schedd: schedd})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "1.0", Job: job}); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, 10*time.Second, func() bool { return len(processesWith(arg)) > 0 })
	resp, err := st.DrainCall(context.Background(), &wire.DrainRequest{Reason: "kernel update"})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Draining || resp.Schedule != wire.DrainGraceful || resp.Running != 1 || resp.Evicting != 1 || resp.RequestID == "" {
		t.Errorf("drain response %+v", resp)
	}
	ads := func() map[string]string {
		st.mu.Lock()
		defer st.mu.Unlock()
		out := map[string]string{}
		for _, sl := range st.slots {
			for _, x := range append([]*slot{sl}, dynamicSlots(sl)...) {
				ad := st.slotAd(x)
				state, _ := ad.EvalAttr("State").StringValue()
				activity, _ := ad.EvalAttr("Activity").StringValue()
				reason, _ := ad.EvalAttr("DrainReason").StringValue()
				draining, _ := ad.EvalAttr("Draining").BoolValue()
				out[x.name] = fmt.Sprintf("%s/%s draining=%v reason=%q", state, activity, draining, reason)
			}
		}
		return out
	}
	got := ads()
	for name, want := range map[string]string{
		"slot1@node1":   `Drained/Retiring draining=true reason="kernel update"`,
		"slot1_1@node1": `Claimed/Retiring draining=true reason="kernel update"`,
	} {
		if got[name] != want {
			t.Errorf("while draining, %s is %s; want %s", name, got[name], want)
		}
	}
	other, _ := uniqueSleep()
	if _, err := st.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, st), Job: other, Schedd: schedd}); err == nil {
		t.Errorf("a draining machine granted a claim")
	}
	if _, err := st.DrainCall(context.Background(), &wire.DrainRequest{Cancel: true, RequestID: "99"}); !errors.Is(err, ErrNotDraining) {
		t.Errorf("cancelling another request's drain: %v; want %v", err, ErrNotDraining)
	}
	c, err := st.DrainCall(context.Background(), &wire.DrainRequest{Cancel: true, RequestID: resp.RequestID})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Cancelled || c.Draining || c.Resumed != 1 {
		t.Errorf("cancel response %+v; want cancelled, not draining, one job resumed", c)
	}
	got = ads()
	if want := `Claimed/Busy draining=false reason=""`; got["slot1_1@node1"] != want {
		t.Errorf("after the cancel, the job's slot is %s; want %s", got["slot1_1@node1"], want)
	}
	if len(processesWith(arg)) == 0 {
		t.Errorf("the job no longer runs after the drain was cancelled")
	}
	if _, err := st.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, st), Job: other, Schedd: schedd}); err != nil {
		t.Errorf("after the cancel, the machine refuses a claim: %v", err)
	}
	if _, err := st.DrainCall(context.Background(), &wire.DrainRequest{Cancel: true}); !errors.Is(err, ErrNotDraining) {
		t.Errorf("cancelling no drain: %v; want %v", err, ErrNotDraining)
	}
	for _, bad := range []*wire.DrainRequest{{Schedule: "slow"}, {Cancel: true, Schedule: "fast"}, {RequestID: "1"},
		{Reason: strings.Repeat("x", 2000)}} {
		if _, err := st.DrainCall(context.Background(), bad); !errors.Is(err, wire.ErrBadRequest) {
			t.Errorf("drain request %+v: %v; want a bad request", bad, err)
		}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, r := range fs.reports {
		if r.Kind == wire.ReportEvicted {
			t.Errorf("a job was evicted: %+v", r)
		}
	}
}

// dynamicSlots lists a partitionable slot's dynamic slots.
func dynamicSlots(sl *slot) []*slot {
	var out []*slot
	for _, c := range sl.children {
		out = append(out, c)
	}
	return out
}
