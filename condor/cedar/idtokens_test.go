package cedar_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/cedar/cedartest"
	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/wire"
)

// serveCollector serves a collector holding two slots over CEDAR on a
// loopback port with methods, and returns the port's address.
func serveCollector(t *testing.T, log *syncBuffer, methods ...cedar.Method) (string, *cedar.Server, *collector.Collector) {
	t.Helper()
	c := collector.New(collector.Options{})
	if _, err := c.Update(context.Background(), &wire.UpdateRequest{Type: wire.TypeMachine, Source: "n1", Ads: []wire.Ad{
		{"Name": `"slot1@n1"`, "Cpus": "4", "MyType": `"Machine"`},
		{"Name": `"slot2@n1"`, "Cpus": "8", "MyType": `"Machine"`},
	}}); err != nil {
		t.Fatal(err)
	}
	srv := cedar.NewServer(cedar.Options{Methods: methods, Commands: collector.CedarCommands(collector.CedarOptions{Current: func() *collector.Collector { return c }}), Timeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	addr := cedartest.Serve(t, srv)
	return addr, srv, c
}

// syncBuffer is a buffer the server's log goes to, safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Take returns what was logged since the last call.
func (b *syncBuffer) Take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}

// queryResult is what the Python client saw: the slots' names, or the
// error it raised.
type queryResult struct {
	Names []string `json:"names"`
	Error string   `json:"error"`
}

// queryWith runs HTCondor's Python client against addr with the
// authentication methods methods and a token directory holding tokens
// (one file each), and returns what it saw.
func queryWith(t *testing.T, addr, methods string, tokens ...string) queryResult {
	t.Helper()
	return queryEnv(t, addr, methods, nil, tokens...)
}

// queryEnv is queryWith with more of the client's environment.
func queryEnv(t *testing.T, addr, methods string, env []string, tokens ...string) queryResult {
	t.Helper()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	dir := t.TempDir()
	for i, tok := range tokens {
		if err := os.WriteFile(filepath.Join(dir, "token"+string(rune('a'+i))), []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := `
import htcondor2, json, os
htcondor2.param['SEC_CLIENT_AUTHENTICATION_METHODS'] = os.environ['METHODS']
htcondor2.param['SEC_TOKEN_DIRECTORY'] = os.environ['TOKENS']
if os.environ.get('CEDAR_DEBUG'):
    htcondor2.param['TOOL_DEBUG'] = 'D_SECURITY:2 D_FULLDEBUG'
htcondor2.enable_debug()
try:
    ads = htcondor2.Collector(os.environ['ADDR']).query(htcondor2.AdType.Startd, projection=['Name'])
    print(json.dumps({'names': sorted(a['Name'] for a in ads)}))
except Exception as e:
    print(json.dumps({'error': '%s: %s' % (type(e).__name__, e)}))
`
	cmd := exec.Command("python3", "-c", src)
	cmd.Env = append(os.Environ(), "ADDR="+addr, "METHODS="+methods, "TOKENS="+dir, "HOME="+t.TempDir(),
		"_CONDOR_SEC_PASSWORD_DIRECTORY="+t.TempDir(), "_CONDOR_SEC_PASSWORD_FILE="+filepath.Join(t.TempDir(), "none"))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r queryResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	// The exception says little; the client's log says why.
	for _, l := range lines {
		if _, e, ok := strings.Cut(l, " ERROR: "); ok {
			r.Error += "; " + e
		}
	}
	if os.Getenv("CEDAR_DEBUG") != "" {
		t.Logf("client:\n%s", out)
	}
	return r
}

// readPoolKey reads the authority's pool key from its directory, as an
// HTCondor daemon given a copy would.
func readPoolKey(t *testing.T, a *auth.Authority) *auth.HTCondorKey {
	t.Helper()
	k, err := auth.ReadHTCondorKey(filepath.Join(a.Dir(), auth.HTCondorKeysDir, auth.HTCondorPoolKey), auth.HTCondorPoolKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tamper replaces the payload of tok with its own, edited by f, keeping
// the header and the signature.
func tamper(t *testing.T, tok string, f func(map[string]any)) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var pl map[string]any
	if err := json.Unmarshal(raw, &pl); err != nil {
		t.Fatal(err)
	}
	f(pl)
	raw, _ = json.Marshal(pl)
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

func TestIDTokensFromHTCondorClient(t *testing.T) {
	a, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	addr, srv, _ := serveCollector(t, log, &cedar.IDTokens{Verifier: a.HTCondorVerifier()})

	good, _, err := a.IssueHTCondor("alice", []auth.Scope{auth.Read}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, err := other.IssueHTCondor("alice", []auth.Scope{auth.Read}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Another authority that took this one's trust domain: its key is
	// still not the one trusted.
	sameName, err := auth.MintHTCondor(readPoolKey(t, other), auth.Claims{Issuer: a.Issuer(), Subject: "alice@" + a.Issuer(),
		Scopes: []auth.Scope{auth.Read}, Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := auth.MintHTCondor(readPoolKey(t, a), auth.Claims{Issuer: a.Issuer(), Subject: "alice@" + a.Issuer(),
		Scopes: []auth.Scope{auth.Read}, IssuedAt: time.Now().Add(-2 * time.Hour), Expires: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// The expired token made to look valid, and a writer's token made to
	// look an administrator's: the signature no longer matches.
	extended := tamper(t, expired, func(pl map[string]any) { pl["exp"] = time.Now().Add(time.Hour).Unix() })
	noScope, _, err := a.IssueHTCondor("bob", []auth.Scope{auth.SeaRead}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	escalated := tamper(t, noScope, func(pl map[string]any) { pl["scope"] = "condor:/READ" })
	revoked, rec, err := a.IssueHTCondor("carol", []auth.Scope{auth.Read}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revoke(rec.ID); err != nil {
		t.Fatal(err)
	}

	want := "slot1@n1,slot2@n1"
	if r := queryWith(t, addr, "IDTOKENS", good); r.Error != "" || strings.Join(r.Names, ",") != want {
		t.Fatalf("a good token: %+v", r)
	}
	for _, tc := range []struct {
		name    string
		methods string
		tokens  []string
		errText string
		why     string // what the server logs
	}{
		{"no token", "IDTOKENS", nil, "SECMAN:2005", "no authentication method in common"},
		{"expired", "IDTOKENS", []string{expired}, "Failed to authenticate using IDTOKENS", "token expired"},
		{"another authority", "IDTOKENS", []string{foreign}, "Failed to authenticate using IDTOKENS", "the client has no usable token"},
		{"another key of the same trust domain", "IDTOKENS", []string{sameName}, "Failed to authenticate using IDTOKENS", "does not carry the signature"},
		{"expiry tampered with", "IDTOKENS", []string{extended}, "Failed to authenticate using IDTOKENS", "does not carry the signature"},
		{"scope tampered with", "IDTOKENS", []string{escalated}, "Failed to authenticate using IDTOKENS", "does not carry the signature"},
		{"revoked", "IDTOKENS", []string{revoked}, "Failed to authenticate using IDTOKENS", "token revoked"},
		{"a token without the scope", "IDTOKENS", []string{noScope}, "DENIED", "may not run"},
		{"CLAIMTOBE", "CLAIMTOBE", []string{good}, "SECMAN:2005", "no authentication method in common"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log.Take()
			sessions := srv.Sessions()
			r := queryWith(t, addr, tc.methods, tc.tokens...)
			if r.Error == "" || r.Names != nil {
				t.Fatalf("refused client got an answer: %+v", r)
			}
			t.Logf("refused: %s", r.Error)
			if !strings.Contains(r.Error, tc.errText) {
				t.Errorf("error %q, want it to say %q", r.Error, tc.errText)
			}
			// The server logs once the connection ends, maybe after the
			// client has gone.
			got := log.Take()
			for deadline := time.Now().Add(5 * time.Second); !strings.Contains(got, tc.why) && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
				got += log.Take()
			}
			if !strings.Contains(got, tc.why) {
				t.Errorf("server log %q, want it to say %q", got, tc.why)
			}
			if tc.errText != "DENIED" && srv.Sessions() != sessions {
				t.Errorf("a refused client left a session: %d, was %d", srv.Sessions(), sessions)
			}
			// The server still serves the next good client.
			if r := queryWith(t, addr, "IDTOKENS", good); r.Error != "" || strings.Join(r.Names, ",") != want {
				t.Fatalf("a good token after a refused one: %+v", r)
			}
		})
	}
}

// TestIDTokensKeyFromHTCondor gives HTCondor's client a copy of the
// authority's pool key file instead of a token, as a daemon of an HTCondor
// pool would hold it: the client mints its own token with the key it
// derives (HTCondor's derivation, from HTCondor's file format) and pond
// verifies it. The token grants no scope, so the query is denied, to the
// identity HTCondor gives itself (condor@password).
func TestIDTokensKeyFromHTCondor(t *testing.T) {
	a, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	addr, _, _ := serveCollector(t, log, &cedar.IDTokens{Verifier: a.HTCondorVerifier()})
	keys := t.TempDir()
	key, err := os.ReadFile(filepath.Join(a.Dir(), auth.HTCondorKeysDir, auth.HTCondorPoolKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, auth.HTCondorPoolKey), key, 0o600); err != nil {
		t.Fatal(err)
	}
	r := queryEnv(t, addr, "IDTOKENS", []string{"_CONDOR_TRUST_DOMAIN=" + a.Issuer(), "_CONDOR_SEC_PASSWORD_DIRECTORY=" + keys,
		"_CONDOR_SEC_TOKEN_POOL_SIGNING_KEY_FILE=" + filepath.Join(keys, auth.HTCondorPoolKey)})
	if !strings.Contains(r.Error, `"DENIED" from server for user condor@`) || !strings.Contains(r.Error, "using method IDTOKENS") {
		t.Fatalf("client with the pool key: %+v", r)
	}
	got := log.Take()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(got, "may not run") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		got += log.Take()
	}
	if !strings.Contains(got, "may not run") {
		t.Fatalf("server log %q: want the token verified and the command denied", got)
	}
}
