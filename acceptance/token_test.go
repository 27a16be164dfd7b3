package acceptance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTokens issues tokens with pondctl token, runs an agent that trusts
// the working directory's keys, and calls it: pondctl's own token from the
// working directory, a user's token by scope, none, and a revoked one.
func TestTokens(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	var created struct {
		Token  string `json:"token"`
		Issuer string `json:"issuer"`
		ID     string `json:"id"`
	}
	r := w.expect(0, "token", "create", "-subject", "alice", "-scope", "SEA_READ", "-lifetime", "1h", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.Token == "" || created.Issuer == "" {
		t.Fatalf("token create -json: %v\n%s", err, r)
	}
	w.expect(1, "token", "create", "-subject", "bob", "-scope", "ROOT")
	authDir := filepath.Join(w.dir, ".pond", "auth")
	if fi, err := os.Stat(authDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v", authDir, fi.Mode(), err)
	}

	// An agent that trusts the working directory's keys, with a
	// certificate of its CA.
	gossipKey := strings.TrimSpace(w.expect(0, "sea", "keygen").stdout)
	data := filepath.Join(w.dir, "agent")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	tlsFlags := strings.Fields(w.expect(0, "cert", "create", "-name", "guarded", "-host", "127.0.0.1", "-dir", data).stdout)
	if len(tlsFlags) != 6 || tlsFlags[0] != "-tls-cert" {
		t.Fatalf("cert create printed %q", tlsFlags)
	}
	agent := execPond(w, append([]string{"agent", "-name", "guarded", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-data-dir", data,
		"-gossip-profile", "fast", "-encrypt", gossipKey, "-trusted-keys", filepath.Join(authDir, "trusted.pem"), "-token-issuer", created.Issuer},
		tlsFlags...)...)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Signal(syscall.SIGTERM); agent.Wait() })
	var api string
	eventually(t, 30*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join(data, "agent.json"))
		if err != nil {
			return err
		}
		var info struct{ API string }
		if err := json.Unmarshal(b, &info); err != nil {
			return err
		}
		api = info.API
		return nil
	})

	// pondctl in the working directory presents a token of its own.
	if r := w.expect(0, "sea", "members", "-sea", api); !strings.Contains(r.stdout, "guarded") {
		t.Fatalf("sea members:\n%s", r)
	}
	w.expect(0, "sea", "keys", "-sea", api, "list")

	// Elsewhere, without the sea's CA: the agent speaks only TLS.
	other := newWorkdir(t, "")
	if r := other.expect(1, "sea", "members", "-sea", api); !strings.Contains(r.stderr, "speaks TLS") {
		t.Fatalf("sea members without the CA:\n%s", r)
	}
	// With it, but without a token: refused.
	other.env = append(other.env, "POND_TLS_CA="+filepath.Join(authDir, "ca.pem"))
	if r := other.expect(1, "sea", "members", "-sea", api); !strings.Contains(r.stderr, "401") {
		t.Fatalf("sea members without a token:\n%s", r)
	}
	// Alice's token reads the sea but may not manage its keys.
	other.env = append(other.env, "POND_TOKEN="+created.Token)
	other.expect(0, "sea", "members", "-sea", api)
	if r := other.expect(1, "sea", "keys", "-sea", api, "list"); !strings.Contains(r.stderr, "403") {
		t.Fatalf("sea keys with a read token:\n%s", r)
	}
	// Revoked, it reads nothing.
	w.expect(0, "token", "revoke", created.ID[:10])
	if r := other.expect(1, "sea", "members", "-sea", api); !strings.Contains(r.stderr, "token revoked") {
		t.Fatalf("sea members with a revoked token:\n%s", r)
	}
	var list []struct {
		Subject string `json:"subject"`
		Revoked bool   `json:"revoked"`
	}
	r = w.expect(0, "token", "list", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || !list[0].Revoked || list[0].Subject != "alice" {
		t.Fatalf("token list -json: %v\n%s", err, r)
	}
	if r := w.expect(0, "token", "list"); !strings.Contains(r.stdout, "revoked") {
		t.Fatalf("token list:\n%s", r)
	}
	// The token never reached a file of the working directory.
	filepath.Walk(w.dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), created.Token) {
				t.Errorf("%s holds the token", p)
			}
		}
		return nil
	})
}

// TestTokenPrune checks that pondctl token list hides expired tokens
// unless asked for -all, and that pondctl token prune forgets the tokens
// that expired over a day ago, keeping the others and the revocation of
// those that have not expired.
func TestTokenPrune(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	ids := map[string]string{}
	for _, name := range []string{"old", "old-revoked", "recent", "fresh", "fresh-revoked"} {
		var created struct {
			ID string `json:"id"`
		}
		r := w.expect(0, "token", "create", "-subject", name, "-scope", "READ", "-lifetime", "1h", "-json")
		if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.ID == "" {
			t.Fatalf("token create -json: %v\n%s", err, r)
		}
		ids[name] = created.ID
	}
	w.expect(0, "token", "revoke", ids["old-revoked"])
	w.expect(0, "token", "revoke", ids["fresh-revoked"])
	// Two days pass for "old" and "old-revoked", an hour for "recent".
	record := filepath.Join(w.dir, ".pond", "auth", "authority.json")
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	for _, tok := range rec["tokens"].([]any) {
		tok := tok.(map[string]any)
		switch tok["subject"] {
		case "old", "old-revoked":
			tok["expires"] = time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)
		case "recent":
			tok["expires"] = time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		}
	}
	if data, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(record, data, 0o600); err != nil {
		t.Fatal(err)
	}
	subjects := func(args ...string) string {
		t.Helper()
		var list []struct {
			Subject string `json:"subject"`
		}
		r := w.expect(0, append([]string{"token", "list", "-json"}, args...)...)
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatalf("token list -json: %v\n%s", err, r)
		}
		var s []string
		for _, l := range list {
			s = append(s, l.Subject)
		}
		return strings.Join(s, " ")
	}

	if got := subjects(); got != "fresh fresh-revoked" {
		t.Errorf("token list: %q, want the tokens that have not expired", got)
	}
	if r := w.expect(0, "token", "list"); strings.Contains(r.stdout, "old") || strings.Contains(r.stdout, "recent") ||
		!strings.Contains(r.stdout, "fresh-revoked") || !strings.Contains(r.stdout, "3 expired tokens not shown (-all shows them") {
		t.Errorf("token list:\n%s", r)
	}
	if got := subjects("-all"); got != "old old-revoked recent fresh fresh-revoked" {
		t.Errorf("token list -all: %q, want every token", got)
	}
	if r := w.expect(0, "token", "list", "-all"); !strings.Contains(r.stdout, "expired") || strings.Contains(r.stdout, "not shown") {
		t.Errorf("token list -all:\n%s", r)
	}

	w.expect(1, "token", "prune", "now")
	if r := w.expect(0, "token", "prune"); !strings.Contains(r.stdout, "Removed the records of 2 tokens that expired over a day ago") {
		t.Errorf("token prune:\n%s", r)
	}
	if got := subjects("-all"); got != "recent fresh fresh-revoked" {
		t.Errorf("token list -all after prune: %q, want the tokens that expired less than a day ago or not at all", got)
	}
	revoked, err := os.ReadFile(filepath.Join(w.dir, ".pond", "auth", "revoked"))
	if err != nil || strings.TrimSpace(string(revoked)) != ids["fresh-revoked"] {
		t.Errorf("revoked file after prune: %q, %v; want only fresh-revoked's ID", revoked, err)
	}
	if r := w.expect(0, "token", "prune"); !strings.Contains(r.stdout, "Removed the records of 0 tokens") {
		t.Errorf("token prune again:\n%s", r)
	}
}
