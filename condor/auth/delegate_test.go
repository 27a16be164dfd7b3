package auth

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDelegatedKey gives a factory a delegated key and checks that the
// verifiers built from the trusted keys accept its tokens within the
// limits and refuse every token beyond them, and that a reader that knows
// no limits refuses the file instead of trusting the key fully.
func TestDelegatedKey(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mint("pondctl", []Scope{SeaAdmin}, time.Minute); err != nil {
		t.Fatal(err)
	}
	limits := KeyLimits{Name: "factory campus", SubjectPrefix: "node/pond-campus-", Scopes: []Scope{Daemon, SeaRead},
		MaxLifetime: 2 * time.Hour}
	for _, bad := range []KeyLimits{
		{Name: "x", SubjectPrefix: "pondctl", Scopes: []Scope{Daemon}, MaxLifetime: time.Hour},
		{Name: "x", SubjectPrefix: "node/", Scopes: []Scope{Daemon}, MaxLifetime: time.Hour},
		{Name: "x", SubjectPrefix: "node/p-", Scopes: []Scope{SeaAdmin}, MaxLifetime: time.Hour},
		{Name: "x", SubjectPrefix: "node/p-", Scopes: []Scope{Administrator}, MaxLifetime: time.Hour},
		{Name: "x", SubjectPrefix: "node/p-", Scopes: []Scope{Daemon}},
	} {
		if _, err := a.Delegate(bad); err == nil {
			t.Errorf("delegated %+v", bad)
		}
	}
	k, err := a.Delegate(limits)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, TrustedKeysFile)
	if _, err := ReadPublicKeys(path); err == nil {
		t.Fatal("ReadPublicKeys read a file with a delegated key: it would trust the key without limits")
	}
	keys, delegated, err := ReadTrustedKeys(path)
	if err != nil || len(keys) != 1 || len(delegated) != 1 {
		t.Fatalf("ReadTrustedKeys: %d keys, %d delegated, %v", len(keys), len(delegated), err)
	}
	v := &Verifier{Issuer: a.Issuer(), Keys: keys, Delegated: delegated}
	now := time.Now()
	ok := Claims{Issuer: a.Issuer(), Subject: "node/pond-campus-hpc-1-abcd", Scopes: []Scope{Daemon, SeaRead},
		IssuedAt: now, Expires: now.Add(time.Hour)}
	tok, err := MintDelegated(k, delegated[0].Limits, a.Issuer(), ok)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := v.Verify(tok); err != nil || c.Subject != ok.Subject {
		t.Fatalf("a token within the limits: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Claims)
		want string
	}{
		{"other subject", func(c *Claims) { c.Subject = "pondctl" }, "subject"},
		{"other pool", func(c *Claims) { c.Subject = "node/pond-other-1" }, "subject"},
		{"admin scope", func(c *Claims) { c.Scopes = []Scope{SeaAdmin} }, "scope"},
		{"condor admin", func(c *Claims) { c.Scopes = []Scope{Daemon, Administrator} }, "scope"},
		{"unknown scope", func(c *Claims) { c.Scopes = []Scope{"pond:/FUTURE_ROOT"} }, "scope"},
		{"too long", func(c *Claims) { c.Expires = c.IssuedAt.Add(3 * time.Hour) }, "lifetime"},
		{"pond grant", func(c *Claims) { c.CentralManager, c.PondID = "127.0.0.1:1", "p" }, "grant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			if _, err := MintDelegated(k, delegated[0].Limits, a.Issuer(), c); err == nil {
				t.Error("MintDelegated made it")
			}
			// Signed directly, as a thief of the key would.
			tok, err := Mint(k, c)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(tok)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify: %v, want invalid for its %s", err, tc.want)
			}
		})
	}
	// The authority's own key is unaffected.
	admin, _ := a.Mint("pondctl", []Scope{SeaAdmin}, time.Minute)
	if _, err := v.Verify(admin); err != nil {
		t.Fatalf("the authority's token: %v", err)
	}
}
