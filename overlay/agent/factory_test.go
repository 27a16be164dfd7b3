package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
	"github.com/pond-htc/pond/overlay/reach"
)

// call sends method path with body to a's API and returns the status
// and the body answered.
func call(t *testing.T, a *Agent, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+a.APIAddr()+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestFactoryRoutes sets, shows and removes a factory entry through the
// central manager's API: a bad entry is refused with the field named, a
// good one is kept across a restart of the agent, shown by GET
// /v1/factory and counted in /metrics.
func TestFactoryRoutes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	sshtest.GenerateKey(t, key)
	known := filepath.Join(dir, "known_hosts")
	os.WriteFile(known, nil, 0o600)
	data := filepath.Join(dir, "cm")
	start := func() (*Agent, context.CancelFunc, chan struct{}) {
		cfg := &Config{Name: "cm", Role: "cm", Pool: "campus", Bind: "127.0.0.1:0", API: "127.0.0.1:0",
			GossipProfile: "fast", DataDir: data, InsecureAPI: true}
		ctx, cancel := context.WithCancel(context.Background())
		a, err := New(ctx, cfg, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		return a, cancel, done
	}
	a, cancel, done := start()
	entry := `{"name": "hosts", "site": {"kind": "ssh", "config": {"Hosts": ["127.0.0.1:1"], "KeyFile": "` + key +
		`", "KnownHosts": "` + known + `"}}, "template": {"cpus": 1, "memory_mb": 512, "lifetime": "1h"},
		"limits": {"max_queued": 1, "max_running": 2}}`
	for _, tc := range []struct{ name, path, body, want string }{
		{"not json", "hosts", `{`, "body"},
		{"bad field", "hosts", strings.Replace(entry, `"cpus": 1`, `"cpus": 0`, 1), "template.cpus"},
		{"other name", "other", entry, `the path names \"other\"`},
		{"bad site", "hosts", strings.Replace(entry, `"Hosts": ["127.0.0.1:1"], `, ``, 1), "no hosts"},
		{"unknown kind", "hosts", strings.Replace(entry, `"kind": "ssh"`, `"kind": "lsf"`, 1), "want aws, gridengine, slurm or ssh"},
	} {
		code, body := call(t, a, "PUT", api.PathFactoryEntries+tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.name, code, body, tc.want)
		}
	}
	if code, body := call(t, a, "PUT", api.PathFactoryEntries+"hosts", entry); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	cancel()
	<-done

	a, cancel, done = start()
	defer func() { cancel(); <-done }()
	code, body := call(t, a, "GET", api.PathFactory, "")
	var st api.FactoryStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("GET: %d %s", code, body)
	}
	if st.Pool != "campus" || len(st.Entries) != 1 || st.Entries[0].Name != "hosts" {
		t.Fatalf("after a restart: %s", body)
	}
	if code, body := call(t, a, "GET", api.PathMetrics, ""); code != http.StatusOK ||
		!strings.Contains(body, `pond_factory_glideins{entry="hosts",stage="queued"} 0`) {
		t.Errorf("metrics: %d %s", code, body)
	}
	if code, body := call(t, a, "DELETE", api.PathFactoryEntries+"hosts", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	call(t, a, "GET", api.PathFactory, "")
	if _, body := call(t, a, "GET", api.PathFactory, ""); strings.Contains(body, `"hosts"`) {
		t.Errorf("the entry is still there: %s", body)
	}
	if _, err := os.Stat(filepath.Join(data, "factory", "entries", "hosts.json")); !os.IsNotExist(err) {
		t.Errorf("the entry's file: %v", err)
	}
}

// TestFactoryRoutesAuthorization calls every factory route of a central
// manager that requires tokens with no token, a reader's and an
// administrator's: each route takes exactly the scope api.Routes gives it,
// and a delegated glidein token, within its limits, reads but never sets.
func TestFactoryRoutesAuthorization(t *testing.T) {
	t.Parallel()
	key := mustKey(t)
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted.pem")
	if err := auth.WritePublicKeys(trusted, key.Public()); err != nil {
		t.Fatal(err)
	}
	a := startAgents(t, &Config{Name: "cm", Role: "cm", Pool: "campus", TrustedKeys: trusted, TokenIssuer: "sea-1"})[0]
	if a.factory == nil {
		t.Fatal("a central manager with a data directory runs no factory")
	}
	now := time.Now()
	tok := func(scopes ...auth.Scope) string {
		s, err := auth.Mint(key, auth.Claims{Issuer: "sea-1", Subject: "tester", Scopes: scopes, IssuedAt: now, Expires: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tokens := map[string]string{"none": "", "read": tok(auth.SeaRead), "node": tok(auth.Daemon, auth.SeaRead),
		"admin": tok(auth.SeaAdmin)}
	n := 0
	for _, r := range api.Routes() {
		if r.Only != api.OnlyFactory && r.Path != api.PathMetrics {
			continue
		}
		n++
		for name, token := range tokens {
			req, _ := http.NewRequest(r.Method, "http://"+a.APIAddr()+strings.Replace(r.Path, "{name}", "x", 1), strings.NewReader("{}"))
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			allowed := (&auth.Claims{Scopes: map[string][]auth.Scope{"none": nil, "read": {auth.SeaRead},
				"node": {auth.Daemon, auth.SeaRead}, "admin": {auth.SeaAdmin}}[name]}).Allows(r.Scope)
			switch {
			case r.Changes && (name == "read" || name == "node") && resp.StatusCode != http.StatusForbidden:
				t.Errorf("%s with %s: %s: only an administrator changes the factory", r.Pattern(), name, resp.Status)
			case name == "none" && resp.StatusCode != http.StatusUnauthorized:
				t.Errorf("%s without a token: %s", r.Pattern(), resp.Status)
			case name != "none" && !allowed && resp.StatusCode != http.StatusForbidden:
				t.Errorf("%s with %s: %s, want 403", r.Pattern(), name, resp.Status)
			case allowed && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
				t.Errorf("%s with %s: %s", r.Pattern(), name, resp.Status)
			}
		}
	}
	if n != 5 {
		t.Errorf("%d factory routes and metrics, want 5", n)
	}
}

// TestFactoryGlideinGossipKey checks that a glidein of an encrypted sea's
// factory gets the sea's gossip key in its private configuration file,
// and never on its command line.
func TestFactoryGlideinGossipKey(t *testing.T) {
	t.Parallel()
	const key = "2dzU8m6GuDHusXDtE8bLUE5uHpgGyHwFtKj5IvPSSG8="
	for _, encrypt := range []string{"", key} {
		cfg := &Config{Name: "cm", Role: "cm", Pool: "campus", Bind: "127.0.0.1:0", API: "127.0.0.1:0",
			GossipProfile: "fast", DataDir: t.TempDir(), InsecureAPI: true, Encrypt: encrypt}
		ctx, cancel := context.WithCancel(context.Background())
		a, err := New(ctx, cfg, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		e := api.FactoryEntrySpec{Name: "hpc", Site: api.FactorySite{Kind: "slurm"},
			Template: api.FactoryTemplate{CPUs: 1, MemoryMB: 512, Lifetime: api.Duration(time.Hour)}}
		req, err := a.factory.Request(e, api.FactoryPrefix("campus")+"hpc-1-abcd")
		cancel()
		<-done
		if err != nil {
			t.Fatal(err)
		}
		conf := string(req.Files["condor_config"])
		if has := strings.Contains(conf, "POND_ENCRYPT = "+key); has != (encrypt != "") {
			t.Errorf("sea key %q: the glidein's configuration is %q", encrypt, conf)
		}
		if strings.Contains(strings.Join(req.Args, " "), key) {
			t.Errorf("the gossip key is on the glidein's command line: %q", req.Args)
		}
	}
}

// TestFactoryGlideinCondorHost checks the central manager address a
// factory's glidein is told: never a wildcard, which names no machine to
// a glidein elsewhere, when the central manager listens on every address;
// an entry's -condor-host comes last, and so wins.
func TestFactoryGlideinCondorHost(t *testing.T) {
	t.Parallel()
	const key = "2dzU8m6GuDHusXDtE8bLUE5uHpgGyHwFtKj5IvPSSG8="
	for _, tc := range []struct {
		name, bind string
		extra      []string
		want       func(a *Agent, got string) bool
	}{
		{"loopback", "127.0.0.1", nil, func(a *Agent, got string) bool { return got == a.APIAddr() }},
		{"every address", "0.0.0.0", nil, func(a *Agent, got string) bool {
			h, _, err := net.SplitHostPort(got)
			gh, _, _ := net.SplitHostPort(a.sea.GossipAddr())
			return err == nil && !reach.Unspecified(got) && h == gh
		}},
		{"entry's own", "0.0.0.0", []string{"-condor-host", "cm.example.org:9618"}, func(a *Agent, got string) bool { return got == "cm.example.org:9618" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Name: "cm", Role: "cm", Pool: "campus", Bind: tc.bind + ":0", API: tc.bind + ":0",
				GossipProfile: "fast", DataDir: t.TempDir(), InsecureAPI: true, Encrypt: key}
			ctx, cancel := context.WithCancel(context.Background())
			a, err := New(ctx, cfg, nil)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { a.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			e := api.FactoryEntrySpec{Name: "hpc", Site: api.FactorySite{Kind: "aws"},
				Template: api.FactoryTemplate{CPUs: 1, MemoryMB: 512, Lifetime: api.Duration(time.Hour), AgentArgs: tc.extra}}
			req, err := a.factory.Request(e, api.FactoryPrefix("campus")+"hpc-1-abcd")
			if err != nil {
				t.Fatal(err)
			}
			// The last -condor-host is the one the agent's flags keep.
			got := ""
			for i, arg := range req.Args[:len(req.Args)-1] {
				if arg == "-condor-host" {
					got = req.Args[i+1]
				}
			}
			if !tc.want(a, got) {
				t.Errorf("the glidein is told -condor-host %q (the central manager's API %s, gossip %s): %q", got, a.APIAddr(), a.sea.GossipAddr(), req.Args)
			}
		})
	}
}
