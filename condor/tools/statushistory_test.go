package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/collector/history"
)

// TestStatusHistory: condor status -history is pool-history's query in
// HTCondor's spelling, its -constraint selecting the rows by their ads.
func TestStatusHistory(t *testing.T) {
	p := startPool(t)
	var all history.Report
	deadline := time.Now().Add(30 * time.Second)
	for {
		all = history.Report{}
		out, errs, code := p.run("status", "-history", "-since", "1h", "-json")
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &all); err != nil {
				t.Fatalf("status -history -json: %v\n%s", err, out)
			}
		}
		if len(all.Slots) > 0 || time.Now().After(deadline) {
			if len(all.Slots) == 0 {
				t.Fatalf("status -history shows no slot state: exit %d %s%s", code, out, errs)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var ph history.Report
	if err := json.Unmarshal([]byte(p.must("pool-history", "-since", "1h", "-json")), &ph); err != nil {
		t.Fatal(err)
	}
	if len(ph.Slots) != len(all.Slots) {
		t.Errorf("pool-history shows %d slot states, status -history %d", len(ph.Slots), len(all.Slots))
	}
	slot := all.Slots[0]
	for _, tc := range []struct {
		cons string
		want int
	}{
		{fmt.Sprintf("Name == %q", slot.Slot), countSlots(all, func(s history.SlotState) bool { return s.Slot == slot.Slot })},
		{fmt.Sprintf("State == %q && Machine == %q", slot.State, slot.Machine), countSlots(all, func(s history.SlotState) bool { return s.State == slot.State && s.Machine == slot.Machine })},
		{`State == "NoSuchState"`, 0},
		{"EnteredCurrentState > 0", len(all.Slots)},
	} {
		var rep history.Report
		if err := json.Unmarshal([]byte(p.must("status", "-history", "-since", "1h", "-constraint", tc.cons, "-json")), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Slots) != tc.want {
			t.Errorf("-constraint %s: %d slot states, want %d", tc.cons, len(rep.Slots), tc.want)
		}
		for _, s := range rep.Slots {
			if tc.want == 0 {
				t.Errorf("-constraint %s: shows %+v", tc.cons, s)
			}
		}
	}
	table := p.must("status", "-history", "-constraint", fmt.Sprintf("Name == %q", slot.Slot))
	if !strings.Contains(table, "Slot states:") || !strings.Contains(table, slot.Slot) {
		t.Errorf("status -history's table:\n%s", table)
	}
	for _, args := range [][]string{
		{"-history", "-constraint", "State =="},
		{"-history", "-since", "yesterday"},
		{"-history", "-schedd"},
		{"-history", "-af", "Name"},
		{"-since", "1h"},
		{"-history", "a", "b"},
	} {
		if _, errs, code := p.run("status", args...); code != 1 || errs == "" {
			t.Errorf("status %v: exit %d, stderr %q; want 1 and why", args, code, errs)
		}
	}
}

func countSlots(rep history.Report, f func(history.SlotState) bool) int {
	n := 0
	for _, s := range rep.Slots {
		if f(s) {
			n++
		}
	}
	return n
}
