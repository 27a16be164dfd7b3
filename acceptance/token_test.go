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
