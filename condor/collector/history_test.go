package collector

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
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

// TestMasterAdConfig: a master ad's configuration (the private PondConfig)
// is recorded in the history when its hash changes, and no query shows
// it, whether the collector keeps a history or not.
func TestMasterAdConfig(t *testing.T) {
	ctx := context.Background()
	for _, keeps := range []bool{true, false} {
		t.Run(fmt.Sprintf("history %v", keeps), func(t *testing.T) {
			var h *history.Store
			if keeps {
				var err error
				if h, err = history.Open(ctx, filepath.Join(t.TempDir(), "history.db"), history.Options{Flush: 10 * time.Millisecond}); err != nil {
					t.Fatal(err)
				}
				defer h.Close()
			}
			c := New(Options{History: h})
			advertise := func(text string) {
				t.Helper()
				ad := wire.Ad{"Name": `"a"`, "Machine": `"a"`, "PondConfigHash": strconv.Quote(history.ConfigHash(text))}
				if _, err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMaster, Source: "master@a", Ads: []wire.Ad{ad},
					Private: map[string]wire.Ad{"a": {"PondConfig": classad.QuoteString(text)}}}); err != nil {
					t.Fatal(err)
				}
			}
			advertise(`{"START":"true"}`)
			advertise(`{"START":"false"}`)
			resp, err := c.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMaster, WithPrivate: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Ads) != 1 || resp.Ads[0]["PondConfig"] != "" || resp.Ads[0]["PondConfigHash"] == "" {
				t.Fatalf("the master ads shown: %v", resp.Ads)
			}
			if !keeps {
				return
			}
			var got string
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				rep, err := c.History(ctx, &wire.HistoryRequest{ConfigOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				got = ""
				for _, ch := range rep.Config {
					got += fmt.Sprintf("%s %s %s>%s;", ch.Node, ch.Knob, ch.Old, ch.New)
				}
				if got != "" || time.Now().After(deadline) {
					break
				}
			}
			if got != "a START true>false;" {
				t.Fatalf("changes %q", got)
			}
		})
	}
}
