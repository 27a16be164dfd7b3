package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// startAgents runs in-process agents from cfgs, each joining the first,
// and stops them when the test ends.
func startAgents(t *testing.T, cfgs ...*Config) []*Agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(cfgs))
	var agents []*Agent
	t.Cleanup(func() {
		cancel()
		for range agents {
			<-done
		}
	})
	for i, cfg := range cfgs {
		cfg.Bind, cfg.API, cfg.GossipProfile, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", "fast", t.TempDir()
		cfg.InsecureAPI = cfg.TrustedKeys == ""
		if i > 0 {
			cfg.Join = []string{agents[0].Sea().GossipAddr()}
		}
		a, err := New(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		go func() { a.Run(ctx); done <- struct{}{} }()
	}
	return agents
}

// TestMembershipMovesTheDaemons invites a free node into a pond and
// releases it: its CONDOR_HOST (the daemons' configuration and the cm tag),
// its pond tag and its machine ad follow, and a cm tag set through the API
// moves the daemons too.
func TestMembershipMovesTheDaemons(t *testing.T) {
	t.Parallel()
	agents := startAgents(t,
		&Config{Name: "cm", Role: "cm", Pool: "campus"},
		&Config{Name: "free", Role: "node"})
	cm, free := agents[0], agents[1]
	client := api.NewClient(free.APIAddr())
	ctx := t.Context()

	check := func(t *testing.T, wantCM, wantPond string) {
		t.Helper()
		if got, _ := free.daemons.Master.Config().Get("CONDOR_HOST"); got != wantCM {
			t.Errorf("daemons' CONDOR_HOST = %q, want %q", got, wantCM)
		}
		tags := free.Sea().LocalMember().Tags
		if tags[api.TagCM] != wantCM || tags[api.TagPond] != wantPond {
			t.Errorf("tags cm=%q pond=%q, want %q %q", tags[api.TagCM], tags[api.TagPond], wantCM, wantPond)
		}
		name, _ := free.MachineAd().EvalAttr("PondName").StringValue()
		if name != wantPond {
			t.Errorf("machine ad PondName = %q, want %q", name, wantPond)
		}
	}
	check(t, free.APIAddr(), "")

	// A node of a declared pool declines.
	if r, err := api.NewClient(cm.APIAddr()).Invite(ctx, api.Invitation{Pond: "burst", PondID: "p1", CentralManager: cm.APIAddr()}); err != nil || r.Accepted {
		t.Fatalf("the pool's central manager answered %+v, %v", r, err)
	}
	r, err := client.Invite(ctx, api.Invitation{Pond: "burst", PondID: "p1", CentralManager: cm.APIAddr(), Lease: time.Hour})
	if err != nil || !r.Accepted {
		t.Fatalf("invite: %+v, %v", r, err)
	}
	check(t, cm.APIAddr(), "burst")

	if cur, err := client.Membership(ctx); err != nil || cur == nil || cur.PondID != "p1" {
		t.Fatalf("membership: %+v, %v", cur, err)
	}
	if _, err := client.Invite(ctx, api.Invitation{Pond: "x"}); err == nil {
		t.Fatal("an invitation without pond_id was accepted")
	}
	if _, err := client.Release(ctx, "p1", api.Drain{Mode: "later"}); err == nil || !strings.Contains(err.Error(), `drain mode "later"`) {
		t.Fatalf("release with a bad drain mode: %v", err)
	}
	rr, err := client.Release(ctx, "p1", api.Drain{Mode: api.DrainEvict})
	if err != nil || !rr.Released {
		t.Fatalf("release: %+v, %v", rr, err)
	}
	check(t, free.APIAddr(), "")

	if _, err := client.SetTags(ctx, map[string]string{api.TagCM: cm.APIAddr()}); err != nil {
		t.Fatal(err)
	}
	if got, _ := free.daemons.Master.Config().Get("CONDOR_HOST"); got != cm.APIAddr() {
		t.Errorf("after PUT /v1/tags cm: daemons' CONDOR_HOST = %q, want %q", got, cm.APIAddr())
	}
}

// TestInviteAll invites four agents: one that joins, one of a declared pool
// that declines, one whose answer is lost after it joined, and one that
// cannot be reached.
func TestInviteAll(t *testing.T) {
	t.Parallel()
	agents := startAgents(t,
		&Config{Name: "cm", Role: "cm", Pool: "campus"},
		&Config{Name: "joins", Role: "node"},
		&Config{Name: "lost", Role: "node"})
	cm, joins, lost := agents[0], agents[1], agents[2]
	// The lost answer: a proxy hands the invitation on, then drops the
	// connection instead of answering.
	target, _ := url.Parse("http://" + lost.APIAddr())
	proxy := httputil.NewSingleHostReverseProxy(target)
	lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathInvite {
			proxy.ServeHTTP(w, r)
			return
		}
		proxy.ServeHTTP(httptest.NewRecorder(), r)
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer lossy.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	inv := api.Invitation{Pond: "burst", PondID: "p1", CentralManager: cm.APIAddr()}
	out := api.InviteAll(t.Context(), inv, []string{joins.APIAddr(), cm.APIAddr(), lossy.URL, gone.URL}, "", nil)
	tests := []struct {
		name   string
		agent  *Agent
		out    api.InviteOutcome
		joined bool
	}{
		{"accepts", joins, out[0], true},
		{"member of a pool", cm, out[1], false},
		{"answer lost", lost, out[2], true},
		{"unreachable", nil, out[3], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.out.Joined() != tt.joined {
				t.Fatalf("Joined() = %v, want %v (%+v)", tt.out.Joined(), tt.joined, tt.out)
			}
			if tt.agent != nil && (tt.agent.members.Current() != nil) != tt.joined {
				t.Fatalf("membership %+v, want joined=%v", tt.agent.members.Current(), tt.joined)
			}
		})
	}
	if out[1].Reply.Reason != "member of pool campus" {
		t.Errorf("the pool node's reason = %q", out[1].Reply.Reason)
	}
	if out[3].Err == nil {
		t.Error("an unreachable node gave no error")
	}
}

// TestSelfKeepsSecrets checks that GET /v1/self shows the configuration
// file's knobs but none of the secrets in it.
func TestSelfKeepsSecrets(t *testing.T) {
	key, err := api.GossipKeyGen()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "condor_config")
	conf := "POND_ENCRYPT = " + key + "\nPOOL_PASSWORD = hunter2-pool\nSEC_TOKEN = tok-3141\nSITE_NAME = campus\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseArgs([]string{"-name", "s", "-config", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := startAgents(t, cfg)[0]
	resp, err := http.Get("http://" + a.APIAddr() + api.PathSelf)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, secret := range []string{key, "hunter2-pool", "tok-3141"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("GET /v1/self shows %q:\n%s", secret, body)
		}
	}
	if !strings.Contains(string(body), `"SITE_NAME": "campus"`) && !strings.Contains(string(body), `"SITE_NAME":"campus"`) {
		t.Errorf("GET /v1/self lacks the knob SITE_NAME:\n%s", body)
	}
	if self := a.Self(); !self.Encrypted {
		t.Error("the agent does not say its gossip is encrypted")
	}
}
