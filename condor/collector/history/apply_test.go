package history

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
)

// TestApplyRecords records the applies of a pool: each is kept under the
// subject it was authenticated with (not the one it claims), at the time
// the central manager received it, cut to its bounds, and returned by
// the queries that are the pool's (not those of one machine).
func TestApplyRecords(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, filepath.Join(t.TempDir(), "history.db"), Options{Now: clk.now})
	defer s.Close()
	many := make([]ApplyChange, MaxApplyChanges+5)
	for i := range many {
		many[i] = ApplyChange{Address: fmt.Sprintf("pool.p%d", i), Action: "create"}
	}
	long := strings.Repeat("é", MaxApplyField)
	tests := []struct {
		name    string
		rec     ApplyRecord
		subject string
		check   func(ApplyRecord) error
	}{
		{"the authenticated subject, not the claimed one",
			ApplyRecord{Serial: 3, Command: "apply", User: "alice", Host: "h", TokenSubject: "root", Add: 1,
				Changes: []ApplyChange{{Address: "pool.a", Action: "update", Attributes: []string{"config", "nodes"}}}},
			"alice-token",
			func(r ApplyRecord) error {
				if r.TokenSubject != "alice-token" || r.Serial != 3 || r.Command != "apply" || r.User != "alice" {
					return fmt.Errorf("%+v", r)
				}
				if len(r.Changes) != 1 || r.Changes[0].String() != "pool.a update (config, nodes)" {
					return fmt.Errorf("changes %+v", r.Changes)
				}
				return nil
			}},
		{"the changes past the bound are counted",
			ApplyRecord{Command: "destroy", Remove: len(many), Changes: many, Omitted: 2}, "bob",
			func(r ApplyRecord) error {
				if len(r.Changes) != MaxApplyChanges || r.Omitted != 7 || r.Remove != len(many) {
					return fmt.Errorf("%d changes, %d omitted", len(r.Changes), r.Omitted)
				}
				return nil
			}},
		{"long fields are cut on a rune boundary",
			ApplyRecord{Command: long, User: "u\xff\x1b[2J", Changes: []ApplyChange{{Address: long, Action: "create",
				Attributes: make([]string, MaxApplyAttributes+3)}}}, "carol",
			func(r ApplyRecord) error {
				if len(r.Command) > MaxApplyField+len("…") || !strings.HasSuffix(r.Command, "é…") || r.User != "u\uFFFD\uFFFD[2J" {
					return fmt.Errorf("command %d bytes %q, user %q", len(r.Command), r.Command[len(r.Command)-8:], r.User)
				}
				if len(r.Changes[0].Attributes) != MaxApplyAttributes || len(r.Changes[0].Address) > MaxApplyField+len("…") {
					return fmt.Errorf("change %d attributes, address %d bytes", len(r.Changes[0].Attributes), len(r.Changes[0].Address))
				}
				return nil
			}},
		{"negative counts are none",
			ApplyRecord{Command: "apply", Add: -1, Change: -2, Remove: -3, Omitted: -4}, "dave",
			func(r ApplyRecord) error {
				if r.Summary() != "+0 ~0 -0" || r.Omitted != 0 {
					return fmt.Errorf("%s, %d omitted", r.Summary(), r.Omitted)
				}
				return nil
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.add(time.Minute)
			s.ObserveApply(tt.rec, tt.subject)
			var got *ApplyRecord
			deadline := time.Now().Add(10 * time.Second)
			for got == nil {
				rep, err := s.Query(ctx, Query{Since: clk.now(), Until: clk.now()})
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Applies) > 1 {
					t.Fatalf("%d records in one minute, want 1", len(rep.Applies))
				}
				if len(rep.Applies) == 1 {
					got = &rep.Applies[0]
				} else if time.Now().After(deadline) {
					t.Fatal("the record was not written")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if !got.At.Equal(clk.now()) {
				t.Errorf("at %s, want the time received %s", got.At, clk.now())
			}
			if err := tt.check(*got); err != nil {
				t.Error(err)
			}
		})
	}
	// A machine's history holds no apply; a constraint selects them.
	rep, err := s.Query(ctx, Query{Since: time.Unix(0, 0), Machine: "a"})
	if err != nil || len(rep.Applies) != 0 {
		t.Errorf("one machine's history: %d applies, %v; want none", len(rep.Applies), err)
	}
	match := func(ad *classad.Ad) bool { v, _ := ad.EvalAttr("TokenSubject").StringValue(); return v == "bob" }
	rep, err = s.Query(ctx, Query{Since: time.Unix(0, 0), Match: match})
	if err != nil || len(rep.Applies) != 1 || rep.Applies[0].Command != "destroy" {
		t.Errorf("TokenSubject == \"bob\": %+v, %v; want the destroy", rep.Applies, err)
	}
}

// TestApplyRecordsPruned checks that the apply records are bounded as the
// other rows are: by age (POND_HISTORY_RETENTION) and count
// (POND_HISTORY_MAX_ROWS).
func TestApplyRecordsPruned(t *testing.T) {
	for _, tt := range []struct {
		name string
		ages []time.Duration // before now, at which each record is received
		rows int
		want []string
	}{
		{"by age", []time.Duration{3 * time.Hour, 2 * time.Hour, 30 * time.Minute, 0}, 100, []string{"c2", "c3"}},
		{"by count", []time.Duration{50 * time.Minute, 40 * time.Minute, 30 * time.Minute, 20 * time.Minute}, 2, []string{"c2", "c3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.db")
			now := time.Unix(1_700_000_000, 0)
			clk := &clock{}
			s := open(t, path, Options{Now: clk.now, Retention: time.Hour, MaxRows: tt.rows})
			for i, age := range tt.ages {
				clk.mu.Lock()
				clk.t = now.Add(-age)
				clk.mu.Unlock()
				s.ObserveApply(ApplyRecord{Command: fmt.Sprintf("c%d", i)}, "x")
			}
			s.Close()
			clk.mu.Lock()
			clk.t = now
			clk.mu.Unlock()
			s = open(t, path, Options{Now: clk.now, Retention: time.Hour, MaxRows: tt.rows})
			defer s.Close()
			rep, err := s.Query(context.Background(), Query{Since: now.Add(-24 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rep.Applies {
				got = append(got, r.Command)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("records %q after pruning, want %q", got, tt.want)
			}
		})
	}
}
