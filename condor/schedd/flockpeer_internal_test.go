package schedd

import (
	"context"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
)

// TestFlockPeer: the negotiator that calls is told apart by the node of
// its credential, and, on a call without credentials, by the node it
// names: a negotiator of a pool flocked to is held to the flock (its
// max_jobs) whether the API asks for credentials or not, one of a pool no
// longer flocked to is refused, and a credential always outweighs the
// name a request states.
func TestFlockPeer(t *testing.T) {
	t.Parallel()
	s := newTestSchedd(t)
	s.mu.Lock()
	s.fl.flocked = []FlockTarget{{Pool: "spare", Node: "spare-0", MaxJobs: 1}}
	s.fl.known = map[string]bool{"spare-0": true, "old-0": true}
	s.mu.Unlock()
	node := func(name string) context.Context {
		return auth.WithClaims(context.Background(), &auth.Claims{Subject: "node/" + name})
	}
	for _, tc := range []struct {
		name            string
		ctx             context.Context
		stated          string
		flocked, refuse bool
	}{
		{"no credentials, a flocked pool's negotiator", context.Background(), "spare-0", true, false},
		{"no credentials, in another case", context.Background(), "SPARE-0", true, false},
		{"no credentials, the pool's own negotiator", context.Background(), "busy-0", false, false},
		{"no credentials, no name", context.Background(), "", false, false},
		{"no credentials, a pool no longer flocked to", context.Background(), "old-0", false, true},
		{"a node's credential", node("spare-0"), "", true, false},
		{"a node's credential outweighs the name stated", node("busy-0"), "spare-0", false, false},
		{"a credential of no node outweighs the name stated", auth.WithClaims(context.Background(), &auth.Claims{Subject: "alice"}), "spare-0", false, false},
		{"a former pool's credential", node("old-0"), "spare-0", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.mu.Lock()
			tg, flocked, refused := s.flockPeer(tc.ctx, tc.stated)
			s.mu.Unlock()
			if flocked != tc.flocked || refused != tc.refuse {
				t.Fatalf("flocked %v, refused %v; want %v, %v", flocked, refused, tc.flocked, tc.refuse)
			}
			if flocked && (tg.Pool != "spare" || tg.MaxJobs != 1) {
				t.Fatalf("target %+v, want spare's", tg)
			}
		})
	}
}
