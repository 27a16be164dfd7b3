package schedd_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

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
			var claims atomic.Int32
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
			startd := httptest.NewServer(mux)
			t.Cleanup(startd.Close)
			t.Cleanup(func() { close(quit) })
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
