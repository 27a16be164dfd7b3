package agent

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// TestAPIAuthorization runs an agent that trusts a key and calls every
// route of its API with no token, a token of another key, an expired one,
// and tokens of each sea scope: a route answers only a token of its scope,
// and a refused call changes nothing.
func TestAPIAuthorization(t *testing.T) {
	t.Parallel()
	key, stranger := mustKey(t), mustKey(t)
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted.pem")
	if err := auth.WritePublicKeys(trusted, key.Public()); err != nil {
		t.Fatal(err)
	}
	a := startAgents(t, &Config{Name: "guarded", Role: "node", TrustedKeys: trusted, TokenIssuer: "sea-1", EnableDebug: true})[0]
	now := time.Now()
	tok := func(k *auth.SigningKey, exp time.Time, scopes ...auth.Scope) string {
		s, err := auth.Mint(k, auth.Claims{Issuer: "sea-1", Subject: "tester", Scopes: scopes, IssuedAt: now.Add(-2 * time.Hour), Expires: exp})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	later := now.Add(time.Hour)
	tokens := map[string]string{
		"none":     "",
		"stranger": tok(stranger, later, auth.SeaAdmin),
		"expired":  tok(key, now.Add(-time.Hour), auth.SeaAdmin),
		"read":     tok(key, later, auth.SeaRead),
		"write":    tok(key, later, auth.SeaWrite),
		"condor":   tok(key, later, auth.Administrator),
		"admin":    tok(key, later, auth.SeaAdmin),
	}
	// Refused calls change nothing.
	for _, name := range []string{"none", "stranger", "expired", "read", "condor"} {
		c := api.NewClient(a.APIAddr()).WithToken(tokens[name])
		if _, err := c.SetTags(t.Context(), map[string]string{api.TagRole: "cm"}); err == nil {
			t.Errorf("%s: PUT /v1/tags taken", name)
		}
		if r, err := c.Invite(t.Context(), api.Invitation{Pond: "p", PondID: "id-0", CentralManager: "127.0.0.1:9"}); err == nil {
			t.Errorf("%s: invitation taken: %+v", name, r)
		}
		if err := c.Leave(t.Context()); err == nil {
			t.Errorf("%s: POST /v1/leave taken", name)
		}
	}
	if role := a.Sea().LocalMember().Tags[api.TagRole]; role != "node" || a.members.Current() != nil {
		t.Fatalf("refused calls changed the agent: role %q, membership %+v", role, a.members.Current())
	}
	select {
	case <-a.leave:
		t.Fatal("a refused POST /v1/leave stopped the agent")
	default:
	}

	// Every route of api.Routes, each with every token. The routes that
	// change the agent get a body it refuses after authorization (an
	// invalid key, a release of a pond it is not in), but for PUT
	// /v1/tags, checked below.
	bodies := map[string]string{
		api.PathQuery:             `{"requirements": "true", "k": 1}`,
		api.PathMatch:             `{"requirements": "true"}`,
		api.PathInvite:            `{"pond": "p", "pond_id": "id-1", "central_manager": "127.0.0.1:9", "lease": 1}`,
		api.PathRelease:           `{"pond_id": "id-1"}`,
		api.PathTags:              `{"role": "cm", "cm": "127.0.0.1:9"}`,
		api.PathKeys + "/install": `{"key": "not-a-key"}`,
		api.PathKeys + "/use":     `{"key": "not-a-key"}`,
		api.PathKeys + "/remove":  `{"key": "not-a-key"}`,
	}
	scopes := map[string][]auth.Scope{
		"read": {auth.SeaRead}, "write": {auth.SeaWrite}, "admin": {auth.SeaAdmin}, "condor": {auth.Administrator},
		"grant": {auth.SeaWrite},
	}
	tokens["grant"], _ = auth.Mint(key, auth.Claims{Issuer: "sea-1", Subject: "pondctl", Scopes: scopes["grant"],
		Expires: later, CentralManager: "127.0.0.1:9", PondID: "id-1"})
	served := map[string]bool{}
	for _, r := range a.served {
		served[r.Pattern()] = true
	}
	for _, r := range api.Routes() {
		if r.Path == api.PathLeave {
			continue // below, once
		}
		if r.Only == api.OnlyPolicy {
			continue // the agent runs no policy
		}
		if r.Only == api.OnlyFactory && a.factory == nil {
			continue // the agent runs no collector
		}
		if r.Only == api.OnlyFailover && a.fo == nil {
			continue // the agent's pool keeps no replicas
		}
		if !served[r.Pattern()] {
			t.Errorf("%s is in api.Routes but not served", r.Pattern())
			continue
		}
		for name, token := range tokens {
			allowed := r.Scope == "" || slices.ContainsFunc(scopes[name], func(s auth.Scope) bool {
				c := auth.Claims{Scopes: []auth.Scope{s}}
				return c.Allows(r.Scope)
			})
			// An invitation needs a pond grant, whatever the scope.
			if r.Path == api.PathInvite {
				allowed = name == "grant"
			}
			t.Run(r.Pattern()+" with "+name, func(t *testing.T) {
				url := "http://" + a.APIAddr() + r.Path
				if r.Only == api.OnlyDebug {
					url += "?seconds=1" // a profile or trace lasts 30 s by default
				}
				req, _ := http.NewRequest(r.Method, url, bytes.NewBufferString(bodies[r.Path]))
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case allowed && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
					t.Fatalf("refused with %s: %s", resp.Status, body)
				case allowed:
				case token != "" && name != "stranger" && name != "expired":
					if resp.StatusCode != http.StatusForbidden {
						t.Fatalf("%s, want 403 Forbidden", resp.Status)
					}
				case resp.StatusCode != http.StatusUnauthorized:
					t.Fatalf("%s, want 401 Unauthorized", resp.Status)
				}
				if !allowed && strings.Contains(string(body), a.cfg.Name) {
					t.Errorf("a refused call learnt the node's name: %s", body)
				}
			})
		}
	}
	for _, r := range a.served {
		if !slices.Contains(api.Routes(), r) {
			t.Errorf("%s is served but not in api.Routes", r.Pattern())
		}
	}
	// The refused calls changed nothing; the allowed PUT /v1/tags did.
	tags := a.Sea().LocalMember().Tags
	if tags[api.TagRole] != "cm" {
		t.Errorf("an administrator's tag change did not happen: %v", tags)
	}
	if h, err := api.NewClient(a.APIAddr()).Health(t.Context()); err != nil || h.Name != "guarded" {
		t.Fatalf("health without a token: %+v, %v", h, err)
	}
	if _, err := api.NewClient(a.APIAddr()).Self(t.Context()); err == nil {
		t.Fatal("the client without a token read /v1/self")
	}
	if self, err := api.NewClient(a.APIAddr()).WithToken(tokens["read"]).Self(t.Context()); err != nil || self.Name != "guarded" {
		t.Fatalf("the client with a read token: %+v, %v", self, err)
	}
}

func mustKey(t testing.TB) *auth.SigningKey {
	t.Helper()
	k, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
