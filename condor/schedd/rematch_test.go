package schedd_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/wire"
)

// TestStaticSlotMatchedAgainWhileClaimed: a static slot matched to a
// second job while the schedd is still claiming it for the first (the
// collector's ad of the slot predates the claim, and the next cycle
// matched it again) is not claimed a second time: the second job stays
// idle, with no shadow waiting for the startd's refusal, and is matched
// on a later cycle. A partitionable slot's one claim id is claimed for
// each job matched to it.
func TestStaticSlotMatchedAgainWhileClaimed(t *testing.T) {
	// A slot the jobs match.
	slot := func(kv ...string) wire.Ad {
		ad := wire.Ad{"Name": `"slot1@exec"`, "Arch": `"X86_64"`, "OpSys": `"LINUX"`, "Disk": "100000000",
			"Memory": "1000", "HasFileTransfer": "true", "Requirements": "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			ad[kv[i]] = kv[i+1]
		}
		return ad
	}
	for _, tc := range []struct {
		name       string
		slot       wire.Ad
		wantClaims int32
	}{
		{"static", slot(), 1},
		{"no slot ad", nil, 1},
		{"partitionable", slot("PartitionableSlot", "true"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := start(t)
			ctx := context.Background()
			// A startd that answers each claim only once the test
			// ends, as a loaded node's would be slow to.
			startd, claims, _ := slowStartd(t)
			resp := n.submitFile("alice", "executable = /bin/true\ntransfer_executable = false\nqueue 2\n")
			ids := []string{strconv.Itoa(resp.Cluster) + ".0", strconv.Itoa(resp.Cluster) + ".1"}
			for _, id := range ids {
				// One cycle each: the same slot, by the same claim id.
				if err := n.c.Matches(ctx, &wire.MatchesRequest{Negotiator: "test", Matches: []wire.Match{{JobID: id, SlotName: "slot1@exec",
					Startd: startd.Listener.Addr().String(), ClaimID: "offer-1", Slot: tc.slot}}}); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for claims.Load() < tc.wantClaims && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			// Time for a second claim that should not come.
			time.Sleep(300 * time.Millisecond)
			if got := claims.Load(); got != tc.wantClaims {
				t.Fatalf("the startd was asked for %d claims of the slot, want %d", got, tc.wantClaims)
			}
			if tc.wantClaims == 1 {
				// The second job is idle and not being started: a
				// later match of another slot takes it.
				idle, err := n.c.Idle(ctx, &wire.IdleRequest{Owner: "alice"})
				if err != nil {
					t.Fatal(err)
				}
				if len(idle) != 1 || idle[0].ID != ids[1] {
					t.Errorf("the idle jobs offered to the negotiator are %v, want %s alone", idle, ids[1])
				}
			}
		})
	}
}

// TestMatchesBeyondTheShadowsQueueStayIdle: the matches of one cycle
// beyond what the schedd's shadows can hold waiting (64 claiming at once,
// 1,024 waiting their turn) are not taken: their jobs stay idle, offered
// to the negotiator's next cycle, instead of a goroutine and a slot ad
// each waiting without bound. Once the shadows are through, the jobs of
// the refused claims are idle again too.
func TestMatchesBeyondTheShadowsQueueStayIdle(t *testing.T) {
	const (
		running = 64
		waiting = 1024
		jobs    = running + waiting + 100
	)
	n := start(t)
	ctx := context.Background()
	startd, claims, release := slowStartd(t)
	resp := n.submitFile("alice", "executable = /bin/true\ntransfer_executable = false\nqueue "+strconv.Itoa(jobs)+"\n")
	req := &wire.MatchesRequest{Negotiator: "test"}
	for i := range jobs {
		// Each job its own dynamic slot of one partitionable slot.
		req.Matches = append(req.Matches, wire.Match{JobID: strconv.Itoa(resp.Cluster) + "." + strconv.Itoa(i), SlotName: "slot1@exec",
			Startd: startd.Listener.Addr().String(), ClaimID: "offer-1",
			Slot: wire.Ad{"Name": `"slot1@exec"`, "PartitionableSlot": "true", "Arch": `"X86_64"`, "OpSys": `"LINUX"`,
				"Disk": "100000000", "Memory": "100000", "HasFileTransfer": "true", "Requirements": "true"}})
	}
	if err := n.c.Matches(ctx, req); err != nil {
		t.Fatal(err)
	}
	idleJobs := func() int {
		t.Helper()
		idle, err := n.c.Idle(ctx, &wire.IdleRequest{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		return len(idle)
	}
	if got := idleJobs(); got != jobs-running-waiting {
		t.Errorf("%d jobs idle after the cycle, want the %d beyond the shadows' queue", got, jobs-running-waiting)
	}
	deadline := time.Now().Add(20 * time.Second)
	for claims.Load() < running && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if got := claims.Load(); got != running {
		t.Fatalf("%d claims under way, want %d", got, running)
	}
	if got := gauge(t, n, "pond_schedd_starting_shadows"); got != running+waiting {
		t.Errorf("pond_schedd_starting_shadows = %v, want %d", got, running+waiting)
	}
	if got := gauge(t, n, "pond_schedd_deferred_matches_total"); got != jobs-running-waiting {
		t.Errorf("pond_schedd_deferred_matches_total = %v, want %d", got, jobs-running-waiting)
	}
	// A second cycle's matches of the idle jobs are left too while the
	// queue is full.
	if err := n.c.Matches(ctx, &wire.MatchesRequest{Negotiator: "test", Matches: req.Matches[jobs-10:]}); err != nil {
		t.Fatal(err)
	}
	if got := idleJobs(); got != jobs-running-waiting {
		t.Errorf("%d jobs idle after a second cycle with the queue full, want %d", got, jobs-running-waiting)
	}
	release()
	deadline = time.Now().Add(60 * time.Second)
	for idleJobs() < jobs && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := idleJobs(); got != jobs {
		t.Fatalf("%d jobs idle once every claim was refused, want all %d", got, jobs)
	}
	if got := gauge(t, n, "pond_schedd_starting_shadows"); got != 0 {
		t.Errorf("pond_schedd_starting_shadows = %v once the shadows are through, want 0", got)
	}
}

// slowStartd is a startd that refuses each claim only once release is
// called (or the test ends), as a loaded node's would be slow to answer;
// claims counts the claims it was asked for.
func slowStartd(t *testing.T) (startd *httptest.Server, claims *atomic.Int32, release func()) {
	claims = new(atomic.Int32)
	quit := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle(wire.PathPrefix+"startd/claim", wire.Handle(func(ctx context.Context, r *wire.ClaimRequest) (*wire.ClaimResponse, error) {
		claims.Add(1)
		select {
		case <-quit:
		case <-ctx.Done():
		}
		return nil, wire.ErrConflict
	}))
	startd = httptest.NewServer(mux)
	t.Cleanup(startd.Close)
	release = sync.OnceFunc(func() { close(quit) })
	// Before the server's Close, which waits for the claims' answers.
	t.Cleanup(release)
	return startd, claims, release
}

// gauge reads one unlabelled metric of the schedd's.
func gauge(t *testing.T, n *node, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(n.s); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
