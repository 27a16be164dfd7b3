package collector

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
)

// TestHistoryRecordsSlotChanges: the collector's updates record a slot's
// state only when it changes, not at each periodic update, and a slot
// whose ads leave (withdrawn, or no longer advertised) is recorded gone;
// the history route answers the timeline.
func TestHistoryRecordsSlotChanges(t *testing.T) {
	ctx := context.Background()
	h, err := history.Open(ctx, filepath.Join(t.TempDir(), "history.db"), history.Options{Flush: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c := New(Options{History: h})
	slot := func(name, state, activity, user string) wire.Ad {
		ad := wire.Ad{"Name": `"` + name + `"`, "Machine": `"a"`, "State": `"` + state + `"`, "Activity": `"` + activity + `"`}
		if user != "" {
			ad["RemoteUser"], ad["JobId"] = `"`+user+`"`, `"1.0"`
		}
		return ad
	}
	update := func(ads ...wire.Ad) {
		t.Helper()
		if _, err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@a", Ads: ads}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		update(slot("slot1@a", "Unclaimed", "Idle", ""), slot("slot2@a", "Unclaimed", "Idle", ""))
	}
	for range 3 {
		update(slot("slot1@a", "Claimed", "Busy", "alice@pool"), slot("slot2@a", "Unclaimed", "Idle", ""))
	}
	update(slot("slot1@a", "Claimed", "Busy", "alice@pool")) // slot2 no longer advertised
	if _, err := c.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeMachine, Source: "startd@a"}); err != nil {
		t.Fatal(err)
	}
	// Other ad types record nothing.
	if _, err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeSchedd, Source: "schedd@a", Ads: []wire.Ad{{"Name": `"a"`, "State": `"x"`}}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"slot1@a Unclaimed", "slot2@a Unclaimed", "slot1@a Claimed alice@pool", "slot2@a Absent", "slot1@a Absent"}
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		rep, err := c.History(ctx, &wire.HistoryRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, s := range rep.Slots {
			got = append(got, strings.TrimSpace(s.Slot+" "+s.State+" "+s.RemoteUser))
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestHistoryWithoutStore: a collector that keeps no history says so.
func TestHistoryWithoutStore(t *testing.T) {
	if _, err := New(Options{}).History(context.Background(), &wire.HistoryRequest{}); err == nil {
		t.Fatal("no error from a collector without a history")
	}
}
