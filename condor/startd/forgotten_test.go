package startd

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// TestForgottenClaimChecks checks which answers of the schedd of an idle
// claim release it: only its saying it does not hold the claim, or
// nothing listening at its address. A schedd that answers later than the
// check waits for, or answers with an error, keeps its claim: a busy
// schedd answers late and activates the claim soon after. A claim kept
// goes once idle for CLAIM_IDLE_TIMEOUT all the same.
func TestForgottenClaimChecks(t *testing.T) {
	// slow holds the answers of the slow schedd until the test ends.
	slow := make(chan struct{})
	var once sync.Once
	schedd := func(answer func(w http.ResponseWriter, req *wire.ClaimInfoRequest)) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != wire.PathPrefix+"schedd/claiminfo" {
				http.NotFound(w, r)
				return
			}
			var req wire.ClaimInfoRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			answer(w, &req)
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { once.Do(func() { close(slow) }) }) // before the server closes: its handler waits on it
		return srv.Listener.Addr().String()
	}
	held := func(w http.ResponseWriter, req *wire.ClaimInfoRequest) {
		json.NewEncoder(w).Encode(wire.ClaimInfoResponse{Exists: true})
	}
	// An address nothing listens at: a listener's, closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()

	for _, tt := range []struct {
		name   string
		schedd string
		kept   bool
	}{
		{"schedd that holds it", schedd(held), true},
		{"schedd that answers after the check's timeout", schedd(func(w http.ResponseWriter, req *wire.ClaimInfoRequest) {
			<-slow
			held(w, req)
		}), true},
		{"schedd that answers with an error", schedd(func(w http.ResponseWriter, req *wire.ClaimInfoRequest) {
			http.Error(w, "the queue is busy", http.StatusServiceUnavailable)
		}), true},
		{"schedd that does not hold it", schedd(func(w http.ResponseWriter, req *wire.ClaimInfoRequest) {
			json.NewEncoder(w).Encode(wire.ClaimInfoResponse{})
		}), false},
		{"schedd whose address refuses the connection", gone, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStartd(t, map[string]string{"NUM_CPUS": "1", "MEMORY": "100", "CLAIM_IDLE_TIMEOUT": "1h"})
			t.Cleanup(s.shutdown)
			// Long enough for a loaded machine's answer; the slow
			// schedd answers only once the test is over.
			s.claimCheck = 2 * time.Second
			c, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: testJob(nil),
				Schedd: tt.schedd, ScheddName: "schedd"})
			if err != nil {
				t.Fatal(err)
			}
			// Idle for longer than the check's threshold.
			s.mu.Lock()
			s.claims[c.ClaimID].entered = time.Now().Add(-2 * idleClaimCheck)
			s.mu.Unlock()
			start := time.Now()
			s.releaseForgottenClaims(context.Background())
			if d := time.Since(start); d > s.claimCheck+5*time.Second {
				t.Errorf("the check took %s, with a timeout of %s", d, s.claimCheck)
			}
			s.mu.Lock()
			kept := s.claims[c.ClaimID] != nil
			s.mu.Unlock()
			if kept != tt.kept {
				t.Errorf("claim kept = %v, want %v", kept, tt.kept)
			}
			if !kept {
				return
			}
			// Whatever its schedd says, a claim idle for
			// CLAIM_IDLE_TIMEOUT goes.
			s.mu.Lock()
			s.claims[c.ClaimID].entered = time.Now().Add(-2 * s.idleMax)
			s.mu.Unlock()
			s.releaseIdleClaims()
			s.mu.Lock()
			kept = s.claims[c.ClaimID] != nil
			s.mu.Unlock()
			if kept {
				t.Errorf("the claim outlived CLAIM_IDLE_TIMEOUT (%s)", s.idleMax)
			}
		})
	}
}
