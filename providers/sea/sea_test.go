package sea

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
)

// node describes one agent of a test sea.
type node struct {
	name string
	// role is "cm" or "node" (the default); pool the declared pool, ""
	// for a free node.
	role, pool string
	// score, when positive, is the node's Score machine attribute, which
	// the tests rank by.
	score int
	// config is the text of the node's configuration file: daemon and
	// agent knobs (POND_JOIN_POLICY, ...).
	config string
	// cm, when set, names the node (started before) whose agent is the
	// node's central manager (-condor-host).
	cm string
}

// fastDaemons are the knobs that make a node's daemons react at once, as
// condor/daemon/testpool's FastKnobs do: one core and a second's updates.
const fastDaemons = `NEGOTIATOR_INTERVAL = 1
NEGOTIATOR_MIN_INTERVAL = 0
UPDATE_INTERVAL = 1
STARTER_POLL_INTERVAL = 0.1s
CLAIM_IDLE_TIMEOUT = 3
NUM_CPUS = 1
MEMORY = 1024
`

// testSea is a sea of in-process agents on loopback, started as
// "pondctl agent" starts one, and stopped when the test ends.
type testSea struct {
	t *testing.T
	// token is what the test's own clients present; "" for an open sea.
	token string
	// tls is the sea's TLS the test's clients use; nil for plain HTTP.
	tls    *tls.Config
	nodes  map[string]node
	agents map[string]*agent.Agent
	stops  map[string]func()
}

// startSea runs an agent for each node, every one joining the first, and
// waits until the sea has converged: every agent sees every other alive,
// and a tree query rooted at each agent reaches all of them.
func startSea(t *testing.T, nodes ...node) *testSea {
	t.Helper()
	return startSeaWith(t, "", "", nil, nodes...)
}

// startGuardedSea is startSea with agents that answer their API only to
// tokens of authority a, over TLS with certificates of a's CA.
func startGuardedSea(t *testing.T, a *auth.Authority, nodes ...node) *testSea {
	t.Helper()
	token, err := a.Mint("test", []auth.Scope{auth.SeaAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	knobs := fmt.Sprintf("POND_TRUSTED_KEYS = %s\nPOND_TOKEN_ISSUER = %s\n", filepath.Join(a.Dir(), auth.TrustedKeysFile), a.Issuer())
	return startSeaWith(t, knobs, token, a, nodes...)
}

// startSeaWith is startSea with knobs added to every node's configuration
// and token presented by the test's clients; with an authority ca, the
// agents get certificates of its CA and the test's clients verify them.
func startSeaWith(t *testing.T, knobs, token string, ca *auth.Authority, nodes ...node) *testSea {
	t.Helper()
	s := &testSea{t: t, token: token, nodes: map[string]node{}, agents: map[string]*agent.Agent{}, stops: map[string]func(){}}
	if ca != nil {
		// The authority makes its CA with its first certificate.
		if _, _, err := ca.IssueCertificate("test", nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		var err error
		if s.tls, err = auth.ClientTLS(ca.CAFile(), "", ""); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.stopAll)
	var first string
	for _, n := range nodes {
		dir := t.TempDir()
		cfgFile := filepath.Join(dir, "condor_config")
		if err := os.WriteFile(cfgFile, []byte(fastDaemons+knobs+n.config), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"-name", n.name, "-config", cfgFile, "-data-dir", filepath.Join(dir, "data"),
			"-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-gossip-profile", "fast"}
		if n.role != "" {
			args = append(args, "-role", n.role)
		}
		if !strings.Contains(knobs, "POND_TRUSTED_KEYS") {
			args = append(args, "-insecure-api")
		}
		if n.pool != "" {
			args = append(args, "-pool", n.pool)
		}
		if n.cm != "" {
			args = append(args, "-condor-host", s.agents[n.cm].APIAddr())
		}
		if n.score > 0 {
			args = append(args, "-attr", fmt.Sprintf("Score=%d", n.score))
		}
		if first != "" {
			args = append(args, "-join", first)
		}
		if ca != nil {
			cert, key, caFile, err := ca.WriteCertificate(dir, n.name, []string{"127.0.0.1"}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			args = append(args, "-tls-cert", cert, "-tls-key", key, "-tls-ca", caFile)
		}
		cfg, err := agent.ParseArgs(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		a, err := agent.New(ctx, cfg, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		s.nodes[n.name] = n
		s.agents[n.name] = a
		s.stops[n.name] = func() { cancel(); <-done }
		if first == "" {
			first = a.Sea().GossipAddr()
		}
	}
	s.waitConverged()
	return s
}

// stopAll stops the agents still running, all at once.
func (s *testSea) stopAll() {
	done := make(chan struct{})
	for _, stop := range s.stops {
		go func() { stop(); done <- struct{}{} }()
	}
	for range s.stops {
		<-done
	}
	s.stops = map[string]func(){}
}

// stop stops the agent name; it leaves the sea gracefully.
func (s *testSea) stop(name string) {
	s.t.Helper()
	stop, ok := s.stops[name]
	if !ok {
		s.t.Fatalf("no running agent %s", name)
	}
	delete(s.stops, name)
	stop()
}

// waitConverged waits until every running agent sees the others alive and
// a query rooted at any of them covers them all.
func (s *testSea) waitConverged() {
	s.t.Helper()
	n := len(s.stops)
	eventually(s.t, 20*time.Second, "the sea to converge", func() error {
		for name := range s.stops {
			a := s.agents[name]
			alive := 0
			for _, m := range a.Sea().Members() {
				if m.Status == api.StatusAlive {
					alive++
				}
			}
			if alive != n {
				return fmt.Errorf("%s sees %d of %d members alive", name, alive, n)
			}
			ans, err := s.client(name).Query(s.t.Context(), api.Query{Requirements: "true", Deadline: time.Now().Add(2 * time.Second)})
			if err != nil {
				return err
			}
			if ans.Stats.Covered != n || ans.Stats.Members != n {
				return fmt.Errorf("a query at %s covers %d of %d members, want %d", name, ans.Stats.Covered, ans.Stats.Members, n)
			}
		}
		return nil
	})
}

// api is the API address of agent name.
func (s *testSea) api(name string) string {
	s.t.Helper()
	a, ok := s.agents[name]
	if !ok {
		s.t.Fatalf("no agent %s", name)
	}
	return a.APIAddr()
}

// score is node name's Score.
func (s *testSea) score(name string) int { return s.nodes[name].score }

// client is an API client of agent name.
func (s *testSea) client(name string) *api.Client {
	return api.NewClient(s.api(name)).WithTLS(s.tls).WithToken(s.token)
}

// membership is the pond membership agent name reports through its API.
func (s *testSea) membership(name string) *api.Membership {
	s.t.Helper()
	m, err := s.client(name).Membership(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

// self is what agent name says of itself through its API.
func (s *testSea) self(name string) *api.Self {
	s.t.Helper()
	self, err := s.client(name).Self(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	return self
}

// checkMember checks, through its API, that agent name serves the pond at
// address with id, its CONDOR_HOST (and cm tag) pointing at cm.
func (s *testSea) checkMember(t *testing.T, name, address, id, cm string) {
	t.Helper()
	self := s.self(name)
	if self.Pond != address || self.Tags[api.TagPond] != address {
		t.Errorf("%s: pond %q (tag %q), want %q", name, self.Pond, self.Tags[api.TagPond], address)
	}
	if self.CondorHost != cm || self.Tags[api.TagCM] != cm {
		t.Errorf("%s: CONDOR_HOST %q (cm tag %q), want the central manager %s", name, self.CondorHost, self.Tags[api.TagCM], cm)
	}
	if m := s.membership(name); m == nil || m.PondID != id || m.Pond != address || m.CentralManager != cm {
		t.Errorf("%s: membership %+v, want pond %s (%s) at %s", name, m, address, id, cm)
	}
}

// checkFree checks that agent name is back in the sea: no pond, its own
// central manager.
func (s *testSea) checkFree(t *testing.T, name string) {
	t.Helper()
	self := s.self(name)
	if self.Pond != "" || self.Tags[api.TagPond] != "" || self.CondorHost != self.API || self.Tags[api.TagCM] != self.API {
		t.Errorf("%s is not free: pond %q (tag %q), CONDOR_HOST %q (cm tag %q), want its own %s",
			name, self.Pond, self.Tags[api.TagPond], self.CondorHost, self.Tags[api.TagCM], self.API)
	}
	if m := s.membership(name); m != nil {
		t.Errorf("%s still has a membership: %+v", name, m)
	}
}

// eventually retries cond until it returns nil or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// configured returns a sea provider configured with seaAddr as the sea
// address given to pondctl (-sea) and no provider block.
func configured(t *testing.T, seaAddr string) providers.Provider {
	t.Helper()
	return configuredIn(t, t.TempDir(), seaAddr)
}

// configuredIn is configured for the working directory workDir.
func configuredIn(t *testing.T, workDir, seaAddr string) providers.Provider {
	t.Helper()
	p := New()
	pc, err := providertest.Object(p.Schema().Provider, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.Err(p.Configure(t.Context(), providers.ConfigureRequest{Config: pc, WorkDir: workDir, SeaAddr: seaAddr}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// object builds a value of sc's type from attrs, the others null.
func object(t *testing.T, sc *providers.Schema, attrs map[string]cty.Value) cty.Value {
	t.Helper()
	v, err := providertest.Object(sc, attrs)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// names returns the names of a list of members or matches.
func names(v cty.Value) []string {
	var out []string
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	for _, e := range v.AsValueSlice() {
		out = append(out, e.GetAttr("name").AsString())
	}
	return out
}

// strs returns a list of strings.
func strs(v cty.Value) []string {
	var out []string
	for _, e := range v.AsValueSlice() {
		out = append(out, e.AsString())
	}
	return out
}

// warnings returns the summaries of diags' warnings.
func warnings(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			out = append(out, d.Summary)
		}
	}
	return out
}

// joined is what a list of names reads as in a failure message.
func joined(ss []string) string { return "[" + strings.Join(ss, " ") + "]" }
