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

// TestWatchDelegated checks that a verifier with MoreDelegated from
// WatchDelegated trusts a key delegated after it was made.
func TestWatchDelegated(t *testing.T) {
	a, err := OpenAuthority(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(a.Dir(), TrustedKeysFile)
	keys, delegated, err := ReadTrustedKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	v := &Verifier{Issuer: "pond", Keys: keys, Delegated: delegated, MoreDelegated: WatchDelegated(path)}
	// The watch has looked at the file a moment before the key is
	// delegated: the key is trusted at its first use all the same.
	if got := v.AllDelegated(); len(got) != len(delegated) {
		t.Fatalf("delegated keys before: %d, want %d", len(got), len(delegated))
	}
	limits := KeyLimits{Name: "f", SubjectPrefix: "node/pond-x-", Scopes: []Scope{Daemon}, MaxLifetime: time.Hour}
	k, err := a.Delegate(limits)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := MintDelegated(k, limits, "pond", Claims{Subject: "node/pond-x-1", Scopes: []Scope{Daemon},
		IssuedAt: time.Now(), Expires: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("a key delegated after the verifier was made: %v", err)
	}
	if _, err := (&Verifier{Issuer: "pond", Keys: keys, Delegated: delegated}).Verify(tok); err == nil {
		t.Fatal("a verifier without MoreDelegated trusts the new key: the test shows nothing")
	}
}

// TestSigningKeyTokensLookNoFurther: a token of the verifier's own
// signing key, verified again and again, never has the delegated keys'
// file looked at afresh (a stat with the watch locked): only a key the
// verifier does not know is.
func TestSigningKeyTokensLookNoFurther(t *testing.T) {
	a, err := OpenAuthority(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.Mint("node/n1", []Scope{Daemon}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v := a.Verifier()
	fresh := 0
	v.MoreDelegated = func(f bool) []DelegatedKey {
		if f {
			fresh++
		}
		return nil
	}
	for range 10 {
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	if fresh != 0 {
		t.Errorf("the delegated keys were looked at afresh %d times for a token of the verifier's own key", fresh)
	}
	if v.delegated("no-such-key") != nil || fresh != 1 {
		t.Errorf("an unknown key: looked at afresh %d times, want 1", fresh)
	}
}

// BenchmarkVerifyWatchDelegated verifies a token already verified once,
// from every processor at once, as a central manager's requests do, with
// the delegated keys watched in their file: one a delegated key signed,
// and one of the verifier's own signing key.
func BenchmarkVerifyWatchDelegated(b *testing.B) {
	a, err := OpenAuthority(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(a.Dir(), TrustedKeysFile)
	keys, delegated, err := ReadTrustedKeys(path)
	if err != nil {
		b.Fatal(err)
	}
	limits := KeyLimits{Name: "f", SubjectPrefix: "node/pond-x-", Scopes: []Scope{Daemon}, MaxLifetime: time.Hour}
	k, err := a.Delegate(limits)
	if err != nil {
		b.Fatal(err)
	}
	byDelegated, err := MintDelegated(k, limits, a.Issuer(), Claims{Subject: "node/pond-x-1", Scopes: []Scope{Daemon},
		IssuedAt: time.Now(), Expires: time.Now().Add(30 * time.Minute)})
	if err != nil {
		b.Fatal(err)
	}
	bySigning, err := a.Mint("node/n1", []Scope{Daemon}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, tok string }{{"delegated", byDelegated}, {"signing", bySigning}} {
		b.Run(c.name, func(b *testing.B) {
			v := &Verifier{Issuer: a.Issuer(), Keys: keys, Delegated: delegated, MoreDelegated: WatchDelegated(path)}
			if _, err := v.Verify(c.tok); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := v.Verify(c.tok); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
