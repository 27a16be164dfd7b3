package history

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	opts.Flush = 10 * time.Millisecond
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChangesRecordedOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, path, Options{Now: clk.now})
	st := SlotState{Slot: "slot1@a", Machine: "a", State: "Unclaimed", Activity: "Idle"}
	for range 5 { // periodic updates of an unchanged slot
		s.ObserveSlot(st)
		clk.add(time.Second)
	}
	busy := st
	busy.State, busy.Activity, busy.RemoteUser, busy.JobID = "Claimed", "Busy", "alice@pool", "1.0"
	s.ObserveSlot(busy)
	s.ObserveSlot(busy)
	clk.add(time.Second)
	s.ObserveSlot(st)
	s.ObserveConfig([]ConfigChange{{Node: "a", Knob: "MAX_JOBS_RUNNING", Old: "10", New: "20", Who: "admin"}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened: the last state is known, so the same state is no change.
	s = open(t, path, Options{Now: clk.now})
	defer s.Close()
	s.ObserveSlot(st)
	time.Sleep(50 * time.Millisecond)
	rep, err := s.Query(ctx, Query{Since: time.Unix(0, 0), Until: clk.now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Slots {
		got = append(got, r.State+"/"+r.Activity+"/"+r.RemoteUser)
	}
	want := []string{"Unclaimed/Idle/", "Claimed/Busy/alice@pool", "Unclaimed/Idle/"}
	if len(got) != len(want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rows %q, want %q", got, want)
		}
	}
	if len(rep.Config) != 1 || rep.Config[0].Knob != "MAX_JOBS_RUNNING" || rep.Config[0].Old != "10" || rep.Config[0].New != "20" || rep.Config[0].Who != "admin" {
		t.Fatalf("config changes %+v", rep.Config)
	}
}

func TestRetentionAndRowCap(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, path, Options{Now: clk.now, Retention: time.Hour, MaxRows: 3})
	for i, state := range []string{"Unclaimed", "Claimed", "Unclaimed", "Claimed", "Unclaimed"} {
		s.ObserveSlot(SlotState{Slot: "slot1@a", Machine: "a", State: state, At: clk.now().Add(time.Duration(i) * time.Minute)})
	}
	s.ObserveSlot(SlotState{Slot: "slot1@b", Machine: "b", State: "Unclaimed", At: clk.now().Add(-2 * time.Hour)})
	s.Close()
	// Reopening prunes: the row of b is older than an hour, and of the
	// five rows of a the two oldest are beyond the cap of three.
	s = open(t, path, Options{Now: clk.now, Retention: time.Hour, MaxRows: 3})
	defer s.Close()
	rep, err := s.Query(ctx, Query{Since: clk.now().Add(-24 * time.Hour), Until: clk.now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Slots) != 3 {
		t.Fatalf("%d rows after pruning, want 3: %+v", len(rep.Slots), rep.Slots)
	}
	for _, r := range rep.Slots {
		if r.Slot != "slot1@a" || r.At.Before(clk.now().Add(2*time.Minute)) {
			t.Fatalf("row %+v survived pruning", r)
		}
	}
}

func TestUsage(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	tl := []SlotState{
		// slot1: alice from -10 (before the period) to 20, then idle, then
		// bob from 40 to the end (60).
		{At: at(-10), Slot: "s1", State: "Claimed", Activity: "Busy", RemoteUser: "alice"},
		{At: at(20), Slot: "s1", State: "Unclaimed", Activity: "Idle"},
		{At: at(40), Slot: "s1", State: "Claimed", Activity: "Busy", RemoteUser: "bob"},
		// slot2: alice 5..15 (Busy, then Idle while still claimed: counts),
		// then the slot is gone.
		{At: at(5), Slot: "s2", State: "Claimed", Activity: "Busy", RemoteUser: "alice"},
		{At: at(10), Slot: "s2", State: "Claimed", Activity: "Idle", RemoteUser: "alice"},
		{At: at(15), Slot: "s2", State: "Absent"},
		// slot3: Preempting with a user does not count as Claimed.
		{At: at(0), Slot: "s3", State: "Preempting", Activity: "Vacating", RemoteUser: "carol"},
	}
	got := Usage(tl, at(0), at(60))
	want := []UserUsage{{"alice", 30 * 60}, {"bob", 20 * 60}}
	if len(got) != len(want) {
		t.Fatalf("usage %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("usage %+v, want %+v", got, want)
		}
	}
}

func TestDropWhenFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := Open(context.Background(), path, Options{Queue: 1, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 100 {
		s.ObserveSlot(SlotState{Slot: "s", State: string(rune('A' + i%26)), JobID: string(rune(i))})
	}
	if s.Dropped() == 0 {
		t.Fatal("no change dropped with a queue of one and a writer that never flushes")
	}
}

// TestQueryMatchAndLimit: a constraint over the rows' ads keeps the
// rows it is true of, of both kinds, before the limit counts them; a
// period of more rows than the limit says it was cut.
func TestQueryMatchAndLimit(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, filepath.Join(t.TempDir(), "history.db"), Options{Now: clk.now})
	defer s.Close()
	t0 := clk.now()
	for i := range 30 {
		st := SlotState{Slot: fmt.Sprintf("slot%d@a", i%3), Machine: "a", State: "Unclaimed", Activity: "Idle"}
		if i%2 == 1 {
			st.State, st.Activity, st.RemoteUser, st.JobID = "Claimed", "Busy", "alice@pool", fmt.Sprintf("1.%d", i)
		}
		s.ObserveSlot(st)
		s.ObserveSlot(SlotState{Slot: fmt.Sprintf("slot1@b%d", i), Machine: fmt.Sprintf("b%d", i), State: "Claimed", Activity: "Busy", RemoteUser: "bob@pool"})
		clk.add(time.Second)
	}
	s.ObserveConfig([]ConfigChange{{Node: "a", Knob: "START", Old: "true", New: "false", Who: "admin"}, {Node: "b1", Knob: "START", Old: "", New: "true", Who: "admin"}})
	waitRows(t, s, 60, 2)

	cons, err := classad.Compile(`Machine == "a" && (State == "Claimed" || Knob == "START")`)
	if err != nil {
		t.Fatal(err)
	}
	match := func(ad *classad.Ad) bool { return cons.EvalBool(ad, nil) }
	for _, tc := range []struct {
		name        string
		limit       int
		slots, conf int
		truncated   bool
	}{
		{"all", 0, 15, 1, false},
		{"limit below the matches", 10, 10, 1, true},
		{"limit at the matches", 15, 15, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := s.Query(ctx, Query{Since: t0, Until: clk.now(), Limit: tc.limit, Match: match})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Slots) != tc.slots || len(rep.Config) != tc.conf || rep.Truncated != tc.truncated {
				t.Fatalf("%d slot rows, %d changes, truncated %v; want %d, %d, %v", len(rep.Slots), len(rep.Config), rep.Truncated, tc.slots, tc.conf, tc.truncated)
			}
			for _, st := range rep.Slots {
				if st.Machine != "a" || st.State != "Claimed" || st.RemoteUser != "alice@pool" {
					t.Errorf("a row the constraint is false of: %+v", st)
				}
			}
			if rep.Config[0].Node != "a" {
				t.Errorf("change %+v", rep.Config[0])
			}
		})
	}
	// Without a constraint the limit cuts too, and says so.
	rep, err := s.Query(ctx, Query{Since: t0, Until: clk.now(), Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Slots) != 20 || !rep.Truncated {
		t.Errorf("limit 20 of 60 rows: %d rows, truncated %v", len(rep.Slots), rep.Truncated)
	}
}

// waitRows waits until the writer committed n slot rows and c
// configuration changes.
func waitRows(t *testing.T, s *Store, n, c int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got, conf int
		if err := s.r.QueryRow(`SELECT (SELECT COUNT(*) FROM slot_states), (SELECT COUNT(*) FROM config_changes)`).Scan(&got, &conf); err != nil {
			t.Fatal(err)
		}
		if got >= n && conf >= c {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d slot rows written, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
