package failover

import (
	"github.com/pond-htc/pond/overlay/api"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestChooseReplicas(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		cands []Candidate
		k     int
		keep  []string
		want  []string
	}{
		{"none wanted", []Candidate{{"a", ms}}, 0, nil, nil},
		{"nearest first", []Candidate{{"far", 9 * ms}, {"near", ms}, {"mid", 5 * ms}}, 2, nil, []string{"near", "mid"}},
		{"ties by name", []Candidate{{"c", ms}, {"b", ms}, {"a", ms}}, 2, nil, []string{"a", "b"}},
		{"unknown distance last", []Candidate{{"a", -1}, {"z", 50 * ms}}, 1, nil, []string{"z"}},
		{"fewer than k", []Candidate{{"b", -1}, {"a", -1}}, 3, nil, []string{"a", "b"}},
		{"duplicates and empty names skipped", []Candidate{{"a", ms}, {"a", 2 * ms}, {"", 0}, {"b", 3 * ms}}, 3, nil, []string{"a", "b"}},
		{"current replicas stay in order", []Candidate{{"far", 9 * ms}, {"near", ms}, {"mid", 5 * ms}}, 2, []string{"far", "mid"}, []string{"far", "mid"}},
		{"a lost replica is replaced by the nearest", []Candidate{{"far", 9 * ms}, {"near", ms}, {"mid", 5 * ms}}, 2, []string{"gone", "far"}, []string{"far", "near"}},
		{"fewer wanted than kept", []Candidate{{"a", ms}, {"b", ms}}, 1, []string{"b", "a"}, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ChooseReplicas(tt.cands, tt.k, tt.keep)
			if !slices.Equal(got, tt.want) {
				t.Errorf("ChooseReplicas = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestManager(t *testing.T) {
	m := func(name, pool string, alive bool, epoch int64) api.FailoverMember {
		return api.FailoverMember{Name: name, API: name + ":1", Pool: pool, Alive: alive, Epoch: epoch}
	}
	tests := []struct {
		name    string
		members []api.FailoverMember
		want    string // "" for none
		highest int64
	}{
		{"no epochs", []api.FailoverMember{m("a", "p", true, 0), m("b", "p", true, 0)}, "", 0},
		{"the one manager", []api.FailoverMember{m("cm", "p", true, 1), m("b", "p", true, 0)}, "cm", 1},
		{"dead manager is none", []api.FailoverMember{m("cm", "p", false, 1), m("b", "p", true, 0)}, "", 1},
		{"highest live epoch", []api.FailoverMember{m("cm", "p", false, 3), m("r1", "p", true, 2), m("r0", "p", true, 1)}, "r1", 3},
		{"original back with a higher epoch", []api.FailoverMember{m("cm", "p", true, 3), m("r1", "p", true, 2)}, "cm", 3},
		{"tie to the first name", []api.FailoverMember{m("r2", "p", true, 2), m("r1", "p", true, 2)}, "r1", 2},
		{"other pools ignored", []api.FailoverMember{m("x", "q", true, 9), m("cm", "p", true, 1)}, "cm", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := api.FailoverManager(tt.members, "p")
			if ok != (tt.want != "") || got.Name != tt.want {
				t.Errorf("Manager = %q, %v; want %q", got.Name, ok, tt.want)
			}
			if h := HighestEpoch(tt.members, "p"); h != tt.highest {
				t.Errorf("HighestEpoch = %d, want %d", h, tt.highest)
			}
		})
	}
}

func TestStateCheck(t *testing.T) {
	good := func() api.FailoverState {
		return api.FailoverState{Pool: "p", Epoch: 1, Manager: "p-0", ManagerAPI: "127.0.0.1:1", Replicas: []string{"p-1", "p-2"},
			Accounting: map[string]float64{"alice@p": 3}, Config: map[string]string{"NEGOTIATOR_INTERVAL": "5"}}
	}
	tests := []struct {
		name   string
		change func(*api.FailoverState)
		want   string // "" for valid
	}{
		{"valid", func(*api.FailoverState) {}, ""},
		{"no pool", func(s *api.FailoverState) { s.Pool = "" }, "pool"},
		{"zero epoch", func(s *api.FailoverState) { s.Epoch = 0 }, "epoch 0"},
		{"no manager", func(s *api.FailoverState) { s.ManagerAPI = "" }, "manager"},
		{"negative usage", func(s *api.FailoverState) { s.Accounting["bob"] = -1 }, `accounting of "bob"`},
		{"foreign knob", func(s *api.FailoverState) { s.Config["START"] = "true" }, "START is not"},
		{"the manager's own address", func(s *api.FailoverState) { s.Config["COLLECTOR_HOST"] = "127.0.0.1:1" }, "COLLECTOR_HOST is not"},
		{"the negotiator's address", func(s *api.FailoverState) { s.Config["NEGOTIATOR_HOST"] = "127.0.0.1:1" }, "NEGOTIATOR_HOST is not"},
		{"flocks", func(s *api.FailoverState) { s.Flocks = []byte(`[{"name": "f", "in": {"from": ["b"]}}]`) }, ""},
		{"no flocks", func(s *api.FailoverState) { s.Flocks = []byte(`[]`) }, ""},
		{"flocks not a list", func(s *api.FailoverState) { s.Flocks = []byte(`{"name": "f"}`) }, "flocks: want a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good()
			tt.change(&s)
			err := s.Check()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v, want an error about %q", err, tt.want)
			}
		})
	}
	s := good()
	if s.Rank("p-2") != 1 || s.Rank("p-0") != -1 {
		t.Errorf("ranks: p-2 %d, p-0 %d", s.Rank("p-2"), s.Rank("p-0"))
	}
}

func TestTakeoverDelayOrdersReplicas(t *testing.T) {
	step := 2 * time.Second
	for r := 0; r < 4; r++ {
		if d := TakeoverDelay(r, true, step); d != time.Duration(r)*step {
			t.Errorf("rank %d, a replica before it alive: waits %v", r, d)
		}
		if d := TakeoverDelay(r, false, step); d != 0 {
			t.Errorf("rank %d, no replica before it alive: waits %v", r, d)
		}
	}
	if TakeoverDelay(-1, true, step) != 0 {
		t.Error("a non-replica waits")
	}
	members := []api.FailoverMember{{Name: "r0", Alive: false}, {Name: "r1", Alive: true}, {Name: "r2", Alive: true}}
	for _, tc := range []struct {
		before []string
		want   bool
	}{
		{nil, false},
		{[]string{"r0"}, false},
		{[]string{"r0", "r1"}, true},
		{[]string{"gone"}, false},
	} {
		if got := LiveBefore(members, tc.before); got != tc.want {
			t.Errorf("LiveBefore(%v) = %v, want %v", tc.before, got, tc.want)
		}
	}
}

func TestTakeoverEpochsDiffer(t *testing.T) {
	seen := map[int64]int{}
	for rank := range 4 {
		e := TakeoverEpoch(5, rank)
		if e <= 5 {
			t.Errorf("rank %d takes over at %d, not above 5", rank, e)
		}
		if r, dup := seen[e]; dup {
			t.Errorf("ranks %d and %d both take over at %d", r, rank, e)
		}
		seen[e] = rank
	}
	if TakeoverEpoch(5, 0) != 6 {
		t.Errorf("the first replica takes over at %d, want 6", TakeoverEpoch(5, 0))
	}
}

func TestAccountingKeepsHighest(t *testing.T) {
	got := Accounting(map[string]float64{"a": 1, "b": 5}, map[string]float64{"a": 3, "c": 0.5})
	want := map[string]float64{"a": 3, "b": 5, "c": 0.5}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func FuzzParseEpoch(f *testing.F) {
	for _, s := range []string{"", "0", "1", "-3", "99999999999999999999", "7x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := api.ParseEpoch(s)
		if e < 0 {
			t.Fatalf("ParseEpoch(%q) = %d", s, e)
		}
		if e > 0 && api.ParseEpoch(strconv.FormatInt(e, 10)) != e {
			t.Fatalf("ParseEpoch does not round-trip %d", e)
		}
	})
}
