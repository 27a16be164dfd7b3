package member

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// TestInvitationsNeedAGrant shows that, behind authentication, a node
// changes its central manager only for an invitation whose token the
// authority bound to that central manager (and pond), and that a pond
// grant releases only members of its own pond.
func TestInvitationsNeedAGrant(t *testing.T) {
	key, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	v := &auth.Verifier{Issuer: "sea", Keys: []ed25519.PublicKey{key.Public()}}
	mint := func(c auth.Claims) string {
		t.Helper()
		c.Issuer, c.Expires = "sea", time.Now().Add(time.Minute)
		tok, err := auth.Mint(key, c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	const cm, evil = "10.0.0.1:7947", "10.6.6.6:7947"
	admin := mint(auth.Claims{Subject: "admin", Scopes: []auth.Scope{auth.SeaAdmin}})
	reader := mint(auth.Claims{Subject: "reader", Scopes: []auth.Scope{auth.SeaRead}, CentralManager: cm})
	grantP1 := mint(auth.Claims{Subject: "pondctl", Scopes: []auth.Scope{auth.SeaWrite}, CentralManager: cm, PondID: "p1"})
	grantP2 := mint(auth.Claims{Subject: "pondctl", Scopes: []auth.Scope{auth.SeaWrite}, CentralManager: cm, PondID: "p2"})
	cmGrant := mint(auth.Claims{Subject: "node/cm", Scopes: []auth.Scope{auth.SeaWrite}, CentralManager: cm})
	evilGrant := mint(auth.Claims{Subject: "node/evil", Scopes: []auth.Scope{auth.SeaWrite}, CentralManager: evil})

	type call struct {
		path, token, body string
		want              int
		member            string // pond ID the node belongs to after the call; "" free
	}
	invite := func(pond, cm string) string {
		return `{"pond":"` + pond + `","pond_id":"` + pond + `","central_manager":"` + cm + `"}`
	}
	tests := []struct {
		name  string
		calls []call
	}{
		{"a grant of the pond and central manager", []call{
			{api.PathInvite, grantP1, invite("p1", cm), 200, "p1"},
		}},
		{"a central manager's own grant, any pond of its", []call{
			{api.PathInvite, cmGrant, invite("p9", cm), 200, "p9"},
		}},
		{"an admin token binds no central manager", []call{
			{api.PathInvite, admin, invite("p1", cm), 403, ""},
		}},
		{"a grant of another central manager", []call{
			{api.PathInvite, evilGrant, invite("p1", cm), 403, ""},
		}},
		{"a grant bound elsewhere cannot name its own central manager", []call{
			{api.PathInvite, grantP1, invite("p1", evil), 403, ""},
		}},
		{"a grant of another pond", []call{
			{api.PathInvite, grantP2, invite("p1", cm), 403, ""},
		}},
		{"a reader", []call{
			{api.PathInvite, reader, invite("p1", cm), 403, ""},
		}},
		{"no token", []call{
			{api.PathInvite, "", invite("p1", cm), 401, ""},
		}},
		{"release by another pond's grant", []call{
			{api.PathInvite, grantP1, invite("p1", cm), 200, "p1"},
			{api.PathRelease, grantP2, `{"pond_id":"p1","drain":{"mode":"evict"}}`, 403, "p1"},
			{api.PathRelease, grantP2, `{"drain":{"mode":"evict"}}`, 403, "p1"},
			{api.PathRelease, evilGrant, `{"drain":{"mode":"evict"}}`, 403, "p1"},
		}},
		{"release by the pond's grant, its central manager's, an admin", []call{
			{api.PathInvite, grantP1, invite("p1", cm), 200, "p1"},
			{api.PathRelease, grantP1, `{"drain":{"mode":"evict"}}`, 200, ""},
			{api.PathInvite, cmGrant, invite("p2", cm), 200, "p2"},
			{api.PathRelease, cmGrant, `{"pond_id":"p2","drain":{"mode":"evict"}}`, 200, ""},
			{api.PathInvite, grantP2, invite("p2", cm), 200, "p2"},
			{api.PathRelease, admin, `{"drain":{"mode":"evict"}}`, 200, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, t.TempDir(), "", "")
			h := auth.Require(v, auth.SeaWrite, n.m.Handler())
			for i, c := range tt.calls {
				req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, c.path, strings.NewReader(c.body))
				if c.token != "" {
					req.Header.Set("Authorization", "Bearer "+c.token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != c.want {
					t.Fatalf("call %d %s: status %d, want %d: %s", i, c.path, rec.Code, c.want, rec.Body)
				}
				got := ""
				if cur := n.m.Current(); cur != nil {
					got = cur.PondID
				}
				if got != c.member {
					t.Fatalf("call %d %s: member of %q, want %q", i, c.path, got, c.member)
				}
			}
		})
	}
}
