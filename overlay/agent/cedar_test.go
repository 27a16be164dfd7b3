package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/overlay/cedarport"
)

// TestHTCondorKeyFlag checks -htcondor-key: refused without a trust
// domain, or a key file that others may read or that is missing, naming
// the flag and never showing the key; with a good key, the CEDAR methods
// offer IDTOKENS that accept the authority's tokens (with their scopes)
// and refuse those of another authority, expired or revoked ones.
func TestHTCondorKeyFlag(t *testing.T) {
	a, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := a.HTCondorKeyFile()
	secret, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(t.TempDir(), "POOL")
	// Chmod, not the mode WriteFile takes: an agent this process ran
	// has set its umask to 077.
	if err := os.WriteFile(loose, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	trusted := filepath.Join(a.Dir(), auth.TrustedKeysFile)
	base := []string{"-name", "n", "-trusted-keys", trusted}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-name", "n", "-htcondor-key", keyFile}, "-htcondor-key " + keyFile + ": name the tokens' trust domain with -token-issuer"},
		{append(base, "-token-issuer", a.Issuer(), "-htcondor-key", loose), "chmod 600"},
		{append(base, "-token-issuer", a.Issuer(), "-htcondor-key", loose+".missing"), "no such file"},
	} {
		var out bytes.Buffer
		_, err := ParseArgs(tc.args, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseArgs(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
		if err != nil && (bytes.Contains([]byte(err.Error()), secret) || bytes.Contains(out.Bytes(), secret)) {
			t.Errorf("the error shows the key")
		}
	}

	// Without the key: FS alone.
	cfg, err := ParseArgs(append(base, "-token-issuer", a.Issuer()), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := cedarport.Methods(cfg.cedar()); err != nil || len(ms) != 1 || ms[0].Name() != "FS" {
		t.Fatalf("methods without -htcondor-key: %v, %v", ms, err)
	}
	cfg, err = ParseArgs(append(base, "-token-issuer", a.Issuer(), "-htcondor-key", keyFile), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := cedarport.Methods(cfg.cedar())
	if err != nil || len(ms) != 2 || ms[0].Name() != "TOKEN" || ms[1].Name() != "FS" {
		t.Fatalf("methods with -htcondor-key: %v, %v", ms, err)
	}
	v := ms[0].(*cedar.IDTokens).Verifier
	// With the node's certificate, SSL between the two.
	certFile, keyFile, caFile, err := a.WriteCertificate(t.TempDir(), "n", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = ParseArgs(append(base, "-token-issuer", a.Issuer(), "-htcondor-key", a.HTCondorKeyFile(), "-tls-cert", certFile, "-tls-key", keyFile, "-tls-ca", caFile), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := cedarport.Methods(cfg.cedar()); err != nil || len(ms) != 3 || ms[0].Name() != "TOKEN" || ms[1].Name() != "SSL" || ms[2].Name() != "FS" {
		t.Fatalf("methods with -htcondor-key and TLS: %v, %v", ms, err)
	}

	good, _, err := a.IssueHTCondor("alice", []auth.Scope{auth.Write}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(good)
	if err != nil {
		t.Fatalf("the authority's token: %v", err)
	}
	if c.Subject != "alice" || !c.Allows(auth.Read) || !c.Allows(auth.Write) || c.Allows(auth.Administrator) {
		t.Errorf("claims %+v: want alice with WRITE (and so READ), not ADMINISTRATOR", c)
	}

	other, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, err := other.IssueHTCondor("alice", []auth.Scope{auth.Write}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, err := auth.ReadHTCondorKey(keyFile, auth.HTCondorPoolKey)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := auth.MintHTCondor(key, auth.Claims{Issuer: a.Issuer(), Subject: "alice@" + a.Issuer(),
		Scopes: []auth.Scope{auth.Read}, IssuedAt: time.Now().Add(-2 * time.Hour), Expires: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	revoked, issued, err := a.IssueHTCondor("bob", []auth.Scope{auth.Read}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revoke(issued.ID); err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"another authority's": foreign, "expired": expired, "revoked": revoked} {
		if c, err := v.Verify(tok); err == nil {
			t.Errorf("%s token accepted: %+v", name, c)
		}
	}
}
