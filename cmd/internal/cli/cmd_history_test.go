package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pond-htc/pond/state"
)

func TestSelectHistory(t *testing.T) {
	now := time.Date(2025, 3, 4, 3, 0, 0, 0, time.UTC)
	rec := func(serial uint64, ago time.Duration, addr string) *state.HistoryRecord {
		return &state.HistoryRecord{Serial: serial, Time: now.Add(-ago), Command: "apply",
			Changes: []state.HistoryChange{{Address: addr, Action: state.ActionUpdate}}}
	}
	h := []*state.HistoryRecord{rec(1, 48*time.Hour, "pool.a"), rec(2, 3*time.Hour, "pool.b"), rec(3, time.Hour, "pool.a"), rec(4, time.Minute, "pool.w[1]")}
	a, _ := state.ParseAddress("pool.a")
	w, _ := state.ParseAddress("pool.w")
	for _, tc := range []struct {
		name  string
		addr  *state.Address
		since time.Duration
		n     int
		want  []uint64
	}{
		{"all, newest first", nil, 0, 0, []uint64{4, 3, 2, 1}},
		{"n", nil, 0, 2, []uint64{4, 3}},
		{"since", nil, 2 * time.Hour, 0, []uint64{4, 3}},
		{"address", &a, 0, 0, []uint64{3, 1}},
		{"resource of an instance", &w, 0, 0, []uint64{4}},
		{"address since n", &a, 72 * time.Hour, 1, []uint64{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint64
			for _, r := range selectHistory(h, tc.addr, tc.since, tc.n, now) {
				got = append(got, r.Serial)
			}
			if !cmp.Equal(got, tc.want) {
				t.Fatalf("serials %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInstanceMoves(t *testing.T) {
	mk := func(addrs ...state.Address) *state.State {
		s := state.New()
		for _, a := range addrs {
			s.SetInstance(a, "provider.local", &state.Instance{Attributes: json.RawMessage(`{}`)})
		}
		return s
	}
	w0, w1 := state.Address{Type: "pool", Name: "w", Key: 0}, state.Address{Type: "pool", Name: "w", Key: 1}
	v0, v1 := state.Address{Type: "pool", Name: "v", Key: 0}, state.Address{Type: "pool", Name: "v", Key: 1}
	one := state.Address{Type: "pool", Name: "one"}
	for _, tc := range []struct {
		name        string
		prior, next *state.State
		want        map[string]string
	}{
		{"whole resource", mk(w0, w1, one), mk(v0, v1, one), map[string]string{"pool.v[0]": "pool.w[0]", "pool.v[1]": "pool.w[1]"}},
		{"one instance to another key", mk(w0, w1), mk(w0, v1), map[string]string{"pool.v[1]": "pool.w[1]"}},
		{"unkeyed into a count", mk(one), mk(w0), map[string]string{"pool.w[0]": "pool.one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := instanceMoves(tc.prior, tc.next); !cmp.Equal(got, tc.want) {
				t.Fatalf("instanceMoves = %v, want %v", got, tc.want)
			}
		})
	}
}
