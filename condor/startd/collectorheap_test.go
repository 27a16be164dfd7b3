package startd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// TestCollectorHeapPerSlotMemory bounds what a central manager's collector
// holds for a pool of many slots: the ads of 30 nodes of 100 static slots
// (a real startd's ads), with the machine-ad history a central manager
// keeps, then every slot changing state three times, each change sent as
// the startd sends it (a partial update of the changed slot's ad). The
// heap kept a slot must stay under 24 KiB (about 240 MiB at 10,000
// slots) and must not grow with the changes; one change must cost the
// collector (with the test's making of the request) under 128 KiB of
// allocation; a full update of a node's 100 ads costs about 2.5 MiB.
func TestCollectorHeapPerSlotMemory(t *testing.T) {
	if raceDetector {
		t.Skip("a heap bound: run without the race detector (make allocs)")
	}
	if testing.Short() {
		t.Skip("measures the heap of 3,000 slot ads")
	}
	const nodes, perNode, rounds = 30, 100, 3
	c := config.New(config.Options{})
	for k, v := range map[string]string{"NUM_SLOTS": fmt.Sprint(perNode), "NUM_CPUS": fmt.Sprint(perNode), "MEMORY": "100000"} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	st, err := New(Options{Config: c, Name: "node", Address: "127.0.0.1:1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.shutdown)
	ups := st.slotUpdates()
	ctx := context.Background()
	h, err := history.Open(ctx, filepath.Join(t.TempDir(), "history.db"), history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	coll := collector.New(collector.Options{History: h})
	handler := coll.Handler()
	post := func(req *wire.UpdateRequest) {
		t.Helper()
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodPost, "/update", bytes.NewReader(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("update of %s: %d %s", req.Source, w.Code, w.Body)
		}
	}
	// ad returns the ad of slot i of node n, in the given state.
	ad := func(n, i int, state string) (string, wire.Ad, wire.Ad) {
		a := make(wire.Ad, len(ups[i].ad))
		for k, v := range ups[i].ad {
			a[k] = v
		}
		name := fmt.Sprintf("slot%d@node%d", i+1, n)
		a["Name"], a["Machine"] = fmt.Sprintf("%q", name), fmt.Sprintf(`"node%d"`, n)
		a["State"] = fmt.Sprintf("%q", state)
		return name, a, ups[i].private
	}
	source := func(n int) string { return fmt.Sprintf("startd@node%d", n) }
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()
	for n := range nodes {
		req := &wire.UpdateRequest{Type: wire.TypeMachine, Source: source(n), Private: map[string]wire.Ad{}}
		for i := range perNode {
			name, a, priv := ad(n, i, "Unclaimed")
			req.Ads = append(req.Ads, a)
			req.Private[name] = priv
		}
		post(req)
	}
	full := heap()
	perSlot := float64(full-base) / (nodes * perNode)
	changes := 0
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for r := range rounds {
		state := "Claimed"
		if r%2 == 1 {
			state = "Unclaimed"
		}
		for n := range nodes {
			for i := range perNode {
				name, a, priv := ad(n, i, state)
				post(&wire.UpdateRequest{Type: wire.TypeMachine, Source: source(n), Partial: true,
					Ads: []wire.Ad{a}, Private: map[string]wire.Ad{name: priv}})
				changes++
			}
		}
	}
	runtime.ReadMemStats(&m1)
	after := heap()
	// The test's own making of each ad and request is counted too.
	perChange := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(changes)
	t.Logf("%d slots: %.0f B a slot kept, %.0f B a slot after %d changes of each; %.0f B allocated a change",
		nodes*perNode, perSlot, float64(after-base)/(nodes*perNode), rounds, perChange)
	if perSlot > 24<<10 {
		t.Errorf("the collector keeps %.0f B a slot, want < 24 KiB", perSlot)
	}
	if grown := float64(after-base) / (nodes * perNode); grown > 1.25*perSlot+4<<10 {
		t.Errorf("the collector's heap grew from %.0f to %.0f B a slot with %d changes of each", perSlot, grown, rounds)
	}
	if perChange > 128<<10 {
		t.Errorf("one slot's change cost the collector %.0f B of allocation, want < 128 KiB", perChange)
	}
	runtime.KeepAlive(coll)
}
