package acceptance

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/flock"
)

// probeConfig is a pool of two nodes whose gossip is encrypted with a key
// from a sensitive variable.
const probeConfig = `variable "gossip_key" {
  type      = string
  sensitive = true
}

provider "local" {
  encrypt = var.gossip_key
}

pool "probed" {
  nodes    = 2
  replicas = 1
  config   = { NEGOTIATOR_INTERVAL = "5" }
}

output "cm" {
  value = pool.probed.central_manager
}
`

// TestProbeEveryRoute is the sea's probe suite. Against a pool applied by
// pondctl, it calls every route of the agent's API (api.Routes) and of the
// daemons' wire (daemon.Routes) on the central manager and on a worker as
// a client with no token, a token of another authority, an expired token,
// and a token of each scope that does not grant the route, over TLS with
// the sea's CA; and as clients without the CA or with another CA. Every
// call must be refused (401, 403, or no TLS session), no refusal may carry
// a secret, and afterwards nothing it could have changed has changed: the
// agents' tags, membership and keys, the collector's ads, the queue. Then
// no file under the working directory but the nodes' own credentials holds
// the gossip key or a token the test used.
func TestProbeEveryRoute(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	gossipKey := strings.TrimSpace(w.expect(0, "sea", "keygen").stdout)
	w.env = append(w.env, "POND_VAR_gossip_key="+gossipKey)
	w.write("main.pond.hcl", probeConfig)
	apply := w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	show := w.expect(0, "show", "-json")
	apis := nodeAPIs(t, show.stdout)
	if len(apis) != 2 {
		t.Fatalf("%d nodes, want 2", len(apis))
	}
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	seaTLS, err := auth.FindClientTLS(w.getenv, w.dir)
	if err != nil || seaTLS == nil {
		t.Fatalf("the sea's TLS: %v, %v", seaTLS, err)
	}
	authDir := filepath.Join(w.dir, ".pond", "auth")
	signing, err := auth.ReadSigningKey(filepath.Join(authDir, auth.SigningKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.OpenAuthority(authDir)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	all := []auth.Scope{auth.Read, auth.Write, auth.Administrator, auth.Daemon, auth.AdvertiseStartd, auth.AdvertiseSchedd,
		auth.AdvertiseMaster, auth.Negotiator, auth.SeaRead, auth.SeaWrite, auth.SeaAdmin}

	// The credentials of the probe: none, a stranger's, an expired one of
	// the sea's own key (past the agents' leeway), and one of each scope
	// from pondctl token create.
	type cred struct {
		name   string
		token  string
		scopes []auth.Scope // what it grants if it is valid; nil: nothing
	}
	strangerTok, err := stranger.Mint("root", all, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := auth.Mint(signing, auth.Claims{Issuer: a.Issuer(), Subject: "root", Scopes: all,
		IssuedAt: time.Now().Add(-3 * time.Hour), Expires: time.Now().Add(-2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	creds := []cred{{name: "no token"}, {name: "another authority's", token: strangerTok}, {name: "expired", token: expired}}
	used := []string{strangerTok, expired}
	for _, s := range all {
		r := w.expect(0, "token", "create", "-subject", "probe", "-scope", s.Name(), "-lifetime", "1h")
		tok := strings.TrimSpace(r.stdout)
		creds = append(creds, cred{name: s.Name(), token: tok, scopes: []auth.Scope{s}})
		used = append(used, tok)
	}
	admin := w.token()

	secrets := []string{gossipKey}
	for _, n := range []string{"probed-0", "probed-1"} {
		data, err := os.ReadFile(filepath.Join(w.dir, ".pond", "local", "nodes", n, "node.token"))
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, strings.TrimSpace(string(data)))
	}
	secrets = append(secrets, used...)

	// The manager of a pool that keeps a replica tags its epoch once it
	// acts, which under load comes after apply returns: the probe starts
	// from a settled sea.
	var before string
	eventually(t, 30*time.Second, func() error {
		before = probeSnapshot(t, seaTLS, admin, cm, apis)
		if !strings.Contains(before, `"epoch":"`) {
			return fmt.Errorf("the manager has not tagged its epoch yet: %s", before)
		}
		// Both nodes' slots idle in the collector, and announced as spare.
		if !strings.Contains(before, `"flk":"1:2:`) {
			return fmt.Errorf("the manager does not announce its two idle slots yet: %s", before)
		}
		return nil
	})

	// Every route, every credential: refused, with nothing secret.
	type route struct {
		method, path string
		scopes       []auth.Scope
	}
	var routes []route
	for _, r := range api.Routes() {
		if r.Scope == "" || (r.Only != "" && r.Only != api.OnlyFailover) {
			continue // the health check is open; the pool runs no policy and no profiler (but keeps a replica)
		}
		routes = append(routes, route{r.Method, r.Path, []auth.Scope{r.Scope}})
	}
	for _, r := range daemon.Routes() {
		routes = append(routes, route{http.MethodPost, wire.PathPrefix + r.Path, r.Scopes})
	}
	calls := 0
	for _, addr := range apis {
		for _, r := range routes {
			for _, c := range creds {
				granted := slices.ContainsFunc(c.scopes, func(s auth.Scope) bool {
					cl := auth.Claims{Scopes: []auth.Scope{s}}
					return slices.ContainsFunc(r.scopes, cl.Allows)
				})
				if granted {
					continue // a token of the route's scope; the unit tests cover what it may do
				}
				want := http.StatusUnauthorized
				if c.scopes != nil {
					want = http.StatusForbidden
				}
				code, body := probeCall(t, seaTLS, addr, r.method, r.path, c.token)
				calls++
				if code != want {
					t.Errorf("%s %s %s with %s: %d, want %d: %s", addr, r.method, r.path, c.name, code, want, body)
				}
				for _, s := range secrets {
					if strings.Contains(body, s) {
						t.Errorf("%s %s %s with %s: the refusal holds a secret: %s", addr, r.method, r.path, c.name, body)
					}
				}
			}
		}
	}
	t.Logf("%d refused calls over %d routes", calls, len(routes))

	// Without the sea's CA, or with another's, no TLS session is made, so
	// no token is sent; a plain HTTP request gets no route.
	strangerTLS := strangerCA(t, stranger)
	for _, addr := range apis {
		if code, body := probeCall(t, strangerTLS, addr, http.MethodGet, api.PathSelf, admin); code != 0 {
			t.Errorf("%s trusted by a client of another CA: %d %s", addr, code, body)
		}
		code, body := probeCall(t, nil, addr, http.MethodGet, api.PathSelf, "")
		if code != http.StatusBadRequest || strings.Contains(body, "probed") {
			t.Errorf("%s over plain HTTP: %d %s", addr, code, body)
		}
	}

	if after := probeSnapshot(t, seaTLS, admin, cm, apis); after != before {
		t.Errorf("the probe changed the sea:\nbefore %s\nafter  %s", before, after)
	}
	for _, out := range []string{apply.stdout, apply.stderr, show.stdout} {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("pondctl's output holds a secret")
			}
		}
	}
	grepCredentials(t, w.dir, gossipKey, used)
}

// probeCall sends method path to the agent at addr with token over TLS
// cfg (plain HTTP when nil) and returns the status and body; status 0
// when no answer came (a refused TLS session).
func probeCall(t *testing.T, cfg *tls.Config, addr, method, path, token string) (int, string) {
	t.Helper()
	scheme, c := "http://", &http.Client{Timeout: 10 * time.Second}
	if cfg != nil {
		scheme = "https://"
		c.Transport = &http.Transport{TLSClientConfig: cfg}
		defer c.CloseIdleConnections()
	}
	var body io.Reader
	if method != http.MethodGet {
		body = bytes.NewBufferString("{}")
	}
	req, err := http.NewRequest(method, scheme+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// probeSnapshot describes what a probe could change: each agent's tags,
// pond membership and gossip keys, the collector's ads and the queue.
func probeSnapshot(t *testing.T, cfg *tls.Config, token, cm string, apis []string) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	for _, addr := range apis {
		c := api.NewClient(addr).WithTLS(cfg).WithToken(token)
		self, err := c.Self(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pond, err := c.Membership(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := c.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The spare capacity a manager announces carries its expiry,
		// renewed as time goes by: the snapshot keeps the capacity.
		if spare, ok := self.Tags[flock.TagSpare]; ok {
			self.Tags[flock.TagSpare] = spare[:strings.LastIndexByte(spare, ':')+1]
		}
		tags, _ := json.Marshal(self.Tags)
		fmt.Fprintf(&b, "%s tags=%s pond=%v keys=%d;", self.Name, tags, pond != nil, len(keys.Keys))
	}
	wc := wire.NewClient(cm, token).WithTLS(cfg)
	ads, err := wc.Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ad := range ads {
		names = append(names, ad["Name"])
	}
	slices.Sort(names)
	jobs, err := wc.Schedd().Queue(ctx, &wire.QueryJobsRequest{Constraint: "true"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, " slots=%v jobs=%d", names, len(jobs))
	return b.String()
}

// strangerCA is a client TLS configuration that trusts another
// authority's CA.
func strangerCA(t *testing.T, a *auth.Authority) *tls.Config {
	t.Helper()
	if _, _, err := a.IssueCertificate("stranger", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg, err := auth.ClientTLS(a.CAFile(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// grepCredentials fails the test for every file under root that holds the
// gossip key or one of tokens, but where a node keeps its own credentials:
// its configuration file (which sets the key), its serf keyring, its token
// file and its TLS key.
func grepCredentials(t *testing.T, root, gossipKey string, tokens []string) {
	t.Helper()
	own := map[string]bool{"condor_config": true, "node.token": true, "tls.key": true}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || own[d.Name()] || strings.HasSuffix(d.Name(), ".keyring") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), gossipKey) {
			t.Errorf("%s holds the gossip key", path)
		}
		for _, tok := range tokens {
			if strings.Contains(string(data), tok) {
				t.Errorf("%s holds a token the probe used", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
