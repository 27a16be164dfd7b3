package factory

import (
	"context"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
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
		{api.RampExponential, []int{1, 2, 4, 5, 5}},
		{api.RampLinear, []int{1, 2, 3, 4, 5}},
		{api.RampNone, []int{5, 5, 5, 5, 5}},
	} {
		t.Run(tc.ramp, func(t *testing.T) {
			f := &Factory{}
			st := &entryState{e: api.FactoryEntrySpec{Name: "hpc", Limits: api.FactoryLimits{MaxQueued: 100, MaxRunning: 100, MaxSubmitPerCycle: 5, Ramp: tc.ramp}}}
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

// TestRemoveEntryWaitsForCycle checks that removing an entry waits for a
// cycle under way, which may be submitting the entry's glideins: once
// RemoveEntry returns, no submission of the entry is in flight.
func TestRemoveEntryWaitsForCycle(t *testing.T) {
	f, err := New(Options{Pool: "campus", DataDir: t.TempDir(), Source: &WirePool{CentralManager: func() string { return "127.0.0.1:1" }},
		Sites: func(api.FactoryEntrySpec) (glidein.Site, error) { return nil, nil },
		Launch: func(context.Context, api.FactoryEntrySpec, string) (glidein.Request, error) {
			return glidein.Request{}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := api.ParseFactoryEntry([]byte(`{"name": "hpc", "site": {"kind": "slurm"}, "template": {"cpus": 1, "memory_mb": 512, "lifetime": "1h"},
		"limits": {"max_queued": 1, "max_running": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetEntry(e); err != nil {
		t.Fatal(err)
	}
	f.cycleMu.Lock() // a cycle under way
	removed := make(chan error, 1)
	go func() { removed <- f.RemoveEntry("hpc") }()
	select {
	case err := <-removed:
		t.Fatalf("RemoveEntry returned (%v) during a cycle", err)
	case <-time.After(300 * time.Millisecond):
	}
	f.cycleMu.Unlock()
	select {
	case err := <-removed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RemoveEntry did not return once the cycle was over")
	}
	if st := f.Status(); len(st.Entries) != 0 {
		t.Fatalf("entries after RemoveEntry: %+v", st.Entries)
	}
}
