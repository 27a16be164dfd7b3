package startd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// sentUpdate is what one update to the collector carried.
type sentUpdate struct {
	partial bool
	names   []string // the ads' names, sorted
	removed []string
}

// countingCollector is a real collector served over HTTP that records
// each update it is sent.
type countingCollector struct {
	c       *collector.Collector
	addr    string
	mu      sync.Mutex
	updates []sentUpdate
	got     chan struct{}
	// refuse is how many updates, from now, are answered 503 and not
	// taken.
	refuse atomic.Int32
}

func serveCollector(t *testing.T) *countingCollector {
	t.Helper()
	cc := &countingCollector{c: collector.New(collector.Options{}), got: make(chan struct{}, 100)}
	prefix := wire.PathPrefix + "collector"
	inner := http.StripPrefix(prefix, cc.c.Handler())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/update") && cc.refuse.Add(-1) >= 0 {
			http.Error(w, "too busy", http.StatusServiceUnavailable)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/update") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req wire.UpdateRequest
			if err := json.Unmarshal(body, &req); err == nil {
				u := sentUpdate{partial: req.Partial, removed: req.Removed}
				for _, a := range req.Ads {
					n, _ := classad.UnquoteString(a["Name"])
					u.names = append(u.names, n)
				}
				sort.Strings(u.names)
				defer func() {
					cc.mu.Lock()
					cc.updates = append(cc.updates, u)
					cc.mu.Unlock()
					cc.got <- struct{}{}
				}()
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cc.addr = srv.Listener.Addr().String()
	return cc
}

// next waits for the collector's next update.
func (cc *countingCollector) next(t *testing.T, what string) sentUpdate {
	t.Helper()
	waitFor(t, cc.got, what)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.updates[len(cc.updates)-1]
}

// slots returns the collector's machine ads as "Name State/Activity
// ClaimId".
func (cc *countingCollector) slots(t *testing.T) []string {
	t.Helper()
	resp, err := cc.c.Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine, WithPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range resp.Ads {
		n, _ := classad.UnquoteString(a["Name"])
		st, _ := classad.UnquoteString(a["State"])
		act, _ := classad.UnquoteString(a["Activity"])
		id, _ := classad.UnquoteString(a["ClaimId"])
		out = append(out, n+" "+st+"/"+act+" "+id)
	}
	return out
}

// runStartd runs a startd advertising to cc until the test ends.
func runStartd(t *testing.T, cc *countingCollector, knobs map[string]string) *Startd {
	t.Helper()
	cfg := config.New(config.Options{})
	for k, v := range knobs {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Config: cfg, Name: "node1", Address: "127.0.0.1:1", DataDir: t.TempDir(),
		SharedExecute: sharedExecute(t), Collector: func() string { return cc.addr }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// TestAdvertiseSendsChangedSlots checks that the startd sends the
// collector, on a change, only the ads of the slots that changed: a claim
// and a job's start on one of ten static slots send that slot's ad alone,
// while the first update and the periodic refresh (UPDATE_INTERVAL) send
// all ten; and that the collector keeps the other slots, with their
// claim ids, meanwhile.
func TestAdvertiseSendsChangedSlots(t *testing.T) {
	fs := &fakeSchedd{}
	schedd := fs.serve(t)
	cc := serveCollector(t)
	s := runStartd(t, cc, map[string]string{"NUM_SLOTS": "10", "NUM_CPUS": "10", "MEMORY": "1000", "UPDATE_INTERVAL": "6"})
	var all []string
	for i := 1; i <= 10; i++ {
		all = append(all, fmt.Sprintf("slot%d@node1", i))
	}
	sort.Strings(all)
	if u := cc.next(t, "the first update"); u.partial || len(u.names) != 10 {
		t.Fatalf("the first update: %+v, want all 10 slots in a full update", u)
	}
	start := time.Now()
	s.mu.Lock()
	sl := s.slots[2]
	id := sl.claimID
	s.mu.Unlock()
	job, _ := uniqueSleep()
	claim, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: id, Job: job, Schedd: schedd})
	if err != nil {
		t.Fatal(err)
	}
	if u := cc.next(t, "the claim's update"); !u.partial || strings.Join(u.names, ",") != "slot3@node1" || len(u.removed) != 0 {
		t.Fatalf("the claim's update: %+v, want slot3@node1's ad alone", u)
	}
	if _, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "1.0", Job: job}); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, 10*time.Second, func() bool {
		for _, a := range cc.slots(t) {
			if strings.HasPrefix(a, "slot3@node1 Claimed/Busy") {
				return true
			}
		}
		return false
	})
	cc.mu.Lock()
	for _, u := range cc.updates[2:] {
		if u.partial && strings.Join(u.names, ",") != "slot3@node1" {
			t.Errorf("an update of the job's start: %+v, want slot3@node1's ad alone", u)
		}
	}
	cc.mu.Unlock()
	got := cc.slots(t)
	if len(got) != 10 {
		t.Fatalf("the collector holds %d slots, want 10: %v", len(got), got)
	}
	for _, a := range got {
		f := strings.Fields(a)
		switch {
		case f[0] == "slot3@node1":
			// A claimed slot offers the claim id of a preempting
			// claim, never its own.
			if len(f) == 3 && f[2] == id {
				t.Errorf("the claimed slot offers its claim id: %s", a)
			}
		case len(f) != 3 || f[1] != "Unclaimed/Idle":
			t.Errorf("another slot lost its state or claim id: %s", a)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Skip("the machine is too slow to tell the changes' updates from the periodic refresh")
	}
	for {
		u := cc.next(t, "the periodic refresh")
		if !u.partial {
			if strings.Join(u.names, ",") != strings.Join(all, ",") {
				t.Fatalf("the periodic refresh sent %v, want %v", u.names, all)
			}
			break
		}
	}
}

// TestAdvertisePartitionable checks that a claim carved from a
// partitionable slot sends the parent's and the new dynamic slot's ads,
// and its release the parent's and the dynamic slot's removal, which the
// collector drops; and that a collector that lost the ads gets them all.
func TestAdvertisePartitionable(t *testing.T) {
	cc := serveCollector(t)
	s := runStartd(t, cc, map[string]string{"NUM_CPUS": "4", "MEMORY": "1000"})
	if u := cc.next(t, "the first update"); u.partial || strings.Join(u.names, ",") != "slot1@node1" {
		t.Fatalf("the first update: %+v", u)
	}
	claim, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: testJob(nil), Schedd: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if u := cc.next(t, "the claim's update"); !u.partial || strings.Join(u.names, ",") != "slot1@node1,slot1_1@node1" {
		t.Fatalf("the claim's update: %+v, want the parent's and the dynamic slot's ads", u)
	}
	if _, err := s.Release(context.Background(), &wire.ReleaseRequest{ClaimID: claim.ClaimID}); err != nil {
		t.Fatal(err)
	}
	u := cc.next(t, "the release's update")
	if !u.partial || strings.Join(u.names, ",") != "slot1@node1" || strings.Join(u.removed, ",") != "slot1_1@node1" {
		t.Fatalf("the release's update: %+v, want the parent's ad and the dynamic slot removed", u)
	}
	if got := cc.slots(t); len(got) != 1 || !strings.HasPrefix(got[0], "slot1@node1 Unclaimed/Idle ") {
		t.Fatalf("the collector holds %v", got)
	}
	// A collector that lost the startd's ads (it restarted) refuses the
	// next partial update, and has every ad at once.
	if _, err := cc.c.Invalidate(context.Background(), &wire.InvalidateRequest{Type: wire.TypeMachine, Source: "startd@node1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: testJob(nil), Schedd: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if u := cc.next(t, "the refused partial update"); !u.partial {
		t.Fatalf("the claim's update: %+v, want a partial one", u)
	}
	if u := cc.next(t, "the full update"); u.partial || strings.Join(u.names, ",") != "slot1@node1,slot1_2@node1" {
		t.Fatalf("the update after the refused one: %+v, want a full one", u)
	}
	if got := cc.slots(t); len(got) != 2 {
		t.Fatalf("the collector holds %v, want the parent and its dynamic slot", got)
	}
}

// TestFailedUpdateIsMadeAgainSoon has the collector refuse the startd's
// first two updates: the startd sends them again within seconds, not at
// its next refresh (UPDATE_INTERVAL, 300 s here), and its slots are in
// the collector.
func TestFailedUpdateIsMadeAgainSoon(t *testing.T) {
	cc := serveCollector(t)
	cc.refuse.Store(2)
	runStartd(t, cc, map[string]string{"NUM_SLOTS": "3", "NUM_CPUS": "3", "MEMORY": "300", "UPDATE_INTERVAL": "300"})
	u := cc.next(t, "an update taken after two refused")
	if len(u.names) != 3 || u.partial {
		t.Errorf("the update taken carries %v (partial %v), want the three slots, whole", u.names, u.partial)
	}
	if got := cc.slots(t); len(got) != 3 {
		t.Errorf("the collector holds %v, want three slots", got)
	}
}
