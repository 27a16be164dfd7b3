package auth

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestVerifiedTokenCheckedAgain verifies a token, changes what a
// verifier trusts or the time, and checks that the token presented again
// is judged by the change, not by what was true when its signature was
// checked: a remembered token is refused once revoked, expired, signed by
// a key no longer trusted or beyond its delegated key's new limits.
func TestVerifiedTokenCheckedAgain(t *testing.T) {
	key, dkey := newKey(t), newKey(t)
	limits := KeyLimits{Name: "factory", SubjectPrefix: "node/p-", Scopes: []Scope{Daemon, SeaRead}, MaxLifetime: 2 * time.Hour}
	node := Claims{Subject: "node/p-1", Scopes: []Scope{Daemon}, IssuedAt: t0, Expires: t0.Add(time.Hour)}
	tests := []struct {
		name      string
		delegated bool
		change    func(v *Verifier, now *time.Time, revoked map[string]bool, c *Claims)
		want      error
	}{
		{"unchanged", false, func(*Verifier, *time.Time, map[string]bool, *Claims) {}, nil},
		{"revoked", false, func(_ *Verifier, _ *time.Time, revoked map[string]bool, c *Claims) { revoked[c.ID] = true }, ErrRevoked},
		{"expired", false, func(_ *Verifier, now *time.Time, _ map[string]bool, _ *Claims) {
			*now = t0.Add(time.Hour + 31*time.Second)
		}, ErrExpired},
		{"within the leeway of its expiry", false, func(_ *Verifier, now *time.Time, _ map[string]bool, _ *Claims) {
			*now = t0.Add(time.Hour + 29*time.Second)
		}, nil},
		{"clock set back before its issue", false, func(_ *Verifier, now *time.Time, _ map[string]bool, _ *Claims) { *now = t0.Add(-time.Minute) }, ErrInvalid},
		{"signing key retired", false, func(v *Verifier, _ *time.Time, _ map[string]bool, _ *Claims) {
			v.Keys = []ed25519.PublicKey{newKey(t).Public()}
		}, ErrInvalid},
		{"other issuer required", false, func(v *Verifier, _ *time.Time, _ map[string]bool, _ *Claims) { v.Issuer = "pool-2" }, ErrInvalid},
		{"delegated key withdrawn", true, func(v *Verifier, _ *time.Time, _ map[string]bool, _ *Claims) { v.Delegated = nil }, ErrInvalid},
		{"delegated key's limits narrowed", true, func(v *Verifier, _ *time.Time, _ map[string]bool, _ *Claims) {
			v.Delegated = []DelegatedKey{{Key: dkey.Public(), Limits: KeyLimits{Name: "factory", SubjectPrefix: "node/p-", Scopes: []Scope{SeaRead}, MaxLifetime: 2 * time.Hour}}}
		}, ErrInvalid},
		{"delegated key now trusted fully", true, func(v *Verifier, _ *time.Time, _ map[string]bool, _ *Claims) {
			v.Delegated = nil
			v.Keys = append(v.Keys, dkey.Public())
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(time.Minute)
			revoked := map[string]bool{}
			v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Leeway: 30 * time.Second,
				Delegated: []DelegatedKey{{Key: dkey.Public(), Limits: limits}},
				Now:       func() time.Time { return now }, Revoked: func(id string) bool { return revoked[id] }}
			tok := mint(t, key, claims(Write))
			if tt.delegated {
				var err error
				if tok, err = MintDelegated(dkey, limits, "pool-1", node); err != nil {
					t.Fatal(err)
				}
			}
			first, err := v.Verify(tok)
			if err != nil {
				t.Fatal(err)
			}
			if len(v.verified.m) != 1 {
				t.Fatalf("%d tokens remembered after one verified, want 1", len(v.verified.m))
			}
			tt.change(v, &now, revoked, first)
			for i := range 2 {
				c, err := v.Verify(tok)
				if !errors.Is(err, tt.want) || (tt.want == nil) != (c != nil) {
					t.Fatalf("verified again (%d): %+v, %v; want %v", i, c, err, tt.want)
				}
				if c != nil && (c.Subject != first.Subject || c.ID != first.ID || !c.Expires.Equal(first.Expires) || len(c.Scopes) != len(first.Scopes)) {
					t.Fatalf("claims %+v, first %+v", c, first)
				}
			}
			if tt.want != nil && len(v.verified.m) != 0 {
				t.Errorf("a refused token is still remembered")
			}
		})
	}
}

// TestVerifiedClaimsNotShared changes the claims Verify returned and
// checks that the next Verify of the same token is not changed with them.
func TestVerifiedClaimsNotShared(t *testing.T) {
	key := newKey(t)
	v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0.Add(time.Minute) }}
	tok := mint(t, key, claims(Read))
	for range 2 {
		c, err := v.Verify(tok)
		if err != nil {
			t.Fatal(err)
		}
		if c.Subject != "alice" || len(c.Scopes) != 1 || c.Scopes[0] != Read {
			t.Fatalf("claims %+v", c)
		}
		c.Subject, c.Scopes[0] = "mallory", Administrator
		c.Scopes = append(c.Scopes, SeaAdmin)
	}
}

// TestVerifiedTokensBounded verifies more distinct tokens than a verifier
// remembers and checks that it remembers at most verifiedMax of them and
// still accepts every one.
func TestVerifiedTokensBounded(t *testing.T) {
	key := newKey(t)
	v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0.Add(time.Minute) }}
	toks := make([]string, verifiedMax+verifiedMax/4)
	for i := range toks {
		c := claims(Read)
		c.Subject = fmt.Sprintf("user%d", i)
		toks[i] = mint(t, key, c)
	}
	for round := range 2 {
		for i, tok := range toks {
			c, err := v.Verify(tok)
			if err != nil || c.Subject != fmt.Sprintf("user%d", i) {
				t.Fatalf("round %d, token %d: %+v, %v", round, i, c, err)
			}
			if n := len(v.verified.m); n > verifiedMax {
				t.Fatalf("%d tokens remembered, at most %d wanted", n, verifiedMax)
			}
		}
	}
}

// TestVerifiedTokenNotParsedAgain checks that a token presented again is
// not parsed and its signature not checked again: its verification
// allocates a fraction of what the first one does.
func TestVerifiedTokenNotParsedAgain(t *testing.T) {
	key := newKey(t)
	v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0.Add(time.Minute) },
		Revoked: func(string) bool { return false }}
	fresh := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0.Add(time.Minute) }}
	tok := mint(t, key, claims(Read, Write))
	full := testing.AllocsPerRun(50, func() {
		fresh.verified.m = nil
		if _, err := fresh.Verify(tok); err != nil {
			t.Fatal(err)
		}
	})
	again := testing.AllocsPerRun(50, func() {
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	})
	if again*4 > full {
		t.Errorf("a remembered token's verification allocates %.0f times, a full one %.0f", again, full)
	}
}

// BenchmarkVerifyFirst is the verification of a token not seen before:
// parsed and its signature checked (BenchmarkVerify is the same token
// presented again, as each request of a daemon carries its node's token).
func BenchmarkVerifyFirst(b *testing.B) {
	key := newKey(b)
	v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0 }}
	tok := mint(b, key, claims(Write))
	b.ReportAllocs()
	for b.Loop() {
		v.verified.m = nil
		if _, err := v.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
