package member

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
)

// TestInviteAll invites four agents: one that joins, one that declines, one
// whose answer is lost after it joined, and one that cannot be reached.
func TestInviteAll(t *testing.T) {
	serve := func(t *testing.T, busy string, loseAnswer bool) (*node, string) {
		n := newNode(t, t.TempDir(), "", busy)
		h := n.m.Handler()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !loseAnswer || r.URL.Path != api.PathInvite {
				h.ServeHTTP(w, r)
				return
			}
			// Join, then drop the connection before answering.
			h.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		t.Cleanup(srv.Close)
		return n, srv.URL
	}
	joins, joinsAddr := serve(t, "", false)
	busy, busyAddr := serve(t, "member of pool campus", false)
	lost, lostAddr := serve(t, "", true)
	gone := httptest.NewServer(http.NotFoundHandler())
	goneAddr := gone.URL
	gone.Close()

	out := InviteAll(t.Context(), inv("p1"), []string{joinsAddr, busyAddr, lostAddr, goneAddr})
	tests := []struct {
		name   string
		node   *node
		out    Outcome
		joined bool
	}{
		{"accepts", joins, out[0], true},
		{"busy", busy, out[1], false},
		{"answer lost", lost, out[2], true},
		{"unreachable", nil, out[3], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.out.Joined() != tt.joined {
				t.Fatalf("Joined() = %v, want %v (%+v)", tt.out.Joined(), tt.joined, tt.out)
			}
			if tt.node != nil && (tt.node.m.Current() != nil) != tt.joined {
				t.Fatalf("node membership %+v, want joined=%v", tt.node.m.Current(), tt.joined)
			}
		})
	}
	if out[1].Reply.Reason != "member of pool campus" {
		t.Errorf("busy node's reason = %q", out[1].Reply.Reason)
	}
	if out[3].Err == nil {
		t.Error("an unreachable node gave no error")
	}
}
