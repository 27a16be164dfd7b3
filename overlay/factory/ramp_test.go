package factory

import (
	"testing"
	"time"
)

// TestRamp checks how many glideins an entry may submit in each of the
// cycles in which it wants more than it may submit, for each ramp, and
// that the ramp starts again from one once nothing is wanted.
func TestRamp(t *testing.T) {
	for _, tc := range []struct {
		ramp string
		want []int
	}{
		{"", []int{1, 2, 4, 5, 5}},
		{RampExponential, []int{1, 2, 4, 5, 5}},
		{RampLinear, []int{1, 2, 3, 4, 5}},
		{RampNone, []int{5, 5, 5, 5, 5}},
	} {
		t.Run(tc.ramp, func(t *testing.T) {
			f := &Factory{}
			st := &entryState{e: Entry{Name: "hpc", Limits: Limits{MaxQueued: 100, MaxRunning: 100, MaxSubmitPerCycle: 5, Ramp: tc.ramp}}}
			now := time.Now()
			var got []int
			for range tc.want {
				v := &view{st: st, ok: true, want: 50}
				f.plan([]*view{v}, now)
				got = append(got, v.submit)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("submissions per cycle %v, want %v", got, tc.want)
				}
			}
			v := &view{st: st, ok: true}
			f.plan([]*view{v}, now)
			v = &view{st: st, ok: true, want: 50}
			f.plan([]*view{v}, now)
			if first := tc.want[0]; v.submit != first {
				t.Errorf("after a cycle that wanted nothing, %d submissions, want %d", v.submit, first)
			}
		})
	}
}
