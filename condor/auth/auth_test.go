package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func newKey(t testing.TB) *SigningKey {
	t.Helper()
	k, err := NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mint(t testing.TB, k *SigningKey, c Claims) string {
	t.Helper()
	tok, err := Mint(k, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func claims(scopes ...Scope) Claims {
	return Claims{Issuer: "pool-1", Subject: "alice", Scopes: scopes, IssuedAt: t0, Expires: t0.Add(time.Hour)}
}

// TestVerify mints tokens and checks what a verifier makes of them.
func TestVerify(t *testing.T) {
	key, other := newKey(t), newKey(t)
	revoked := mint(t, key, Claims{Issuer: "pool-1", Subject: "bob", Scopes: []Scope{Read}, ID: "gone", IssuedAt: t0, Expires: t0.Add(time.Hour)})
	v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0.Add(time.Minute) },
		Revoked: func(id string) bool { return id == "gone" }}
	good := mint(t, key, claims(Write))
	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"valid", good, nil},
		{"none", "", ErrNoToken},
		{"garbage", "not.a.token", ErrInvalid},
		{"expired", mint(t, key, Claims{Issuer: "pool-1", Subject: "alice", Scopes: []Scope{Read}, IssuedAt: t0.Add(-2 * time.Hour), Expires: t0}), ErrExpired},
		{"issued in the future", mint(t, key, Claims{Issuer: "pool-1", Subject: "alice", Scopes: []Scope{Read}, IssuedAt: t0.Add(time.Hour), Expires: t0.Add(2 * time.Hour)}), ErrInvalid},
		{"untrusted key", mint(t, other, claims(Read)), ErrInvalid},
		{"other issuer", mint(t, key, Claims{Issuer: "pool-2", Subject: "alice", Scopes: []Scope{Read}, IssuedAt: t0, Expires: t0.Add(time.Hour)}), ErrInvalid},
		{"revoked", revoked, ErrRevoked},
		{"payload changed", tamper(t, good), ErrInvalid},
		{"alg none", unsigned(t, key), ErrInvalid},
		{"HMAC keyed with the public key", hmacWithPublic(t, key), ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(tt.token)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if c.Subject != "alice" || c.Issuer != "pool-1" || c.ID == "" || !c.Expires.Equal(t0.Add(time.Hour)) || !c.Allows(Write) {
					t.Fatalf("claims %+v", c)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// tamper grants the token's payload the ADMINISTRATOR scope, keeping its
// signature.
func tamper(t *testing.T, tok string) string {
	parts := strings.Split(tok, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(payload), "condor:/WRITE", "condor:/ADMINISTRATOR", 1)
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(changed))
	return strings.Join(parts, ".")
}

func unsigned(t *testing.T, k *SigningKey) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": "pool-1", "sub": "alice", "jti": "x", "scope": "condor:/ADMINISTRATOR",
		"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	tok.Header["kid"] = k.ID()
	s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hmacWithPublic(t *testing.T, k *SigningKey) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "pool-1", "sub": "alice", "jti": "x", "scope": "condor:/ADMINISTRATOR",
		"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	tok.Header["kid"] = k.ID()
	s, err := tok.SignedString([]byte(k.Public()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMintRefuses(t *testing.T) {
	k := newKey(t)
	for _, c := range []Claims{
		{Subject: "a", Scopes: []Scope{Read}, Expires: t0},
		{Issuer: "p", Scopes: []Scope{Read}, Expires: t0},
		{Issuer: "p", Subject: "a", Expires: t0},
		{Issuer: "p", Subject: "a", Scopes: []Scope{Read}},
	} {
		if _, err := Mint(k, c); err == nil {
			t.Errorf("minted %+v", c)
		}
	}
}

// TestKeyRotation checks that a verifier trusting the old and the new key
// accepts tokens of both, and one trusting the new key alone only the new.
func TestKeyRotation(t *testing.T) {
	oldKey, newK := newKey(t), newKey(t)
	now := func() time.Time { return t0 }
	both := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{oldKey.Public(), newK.Public()}, Now: now}
	only := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{newK.Public()}, Now: now}
	oldTok, newTok := mint(t, oldKey, claims(Read)), mint(t, newK, claims(Read))
	for _, tok := range []string{oldTok, newTok} {
		if _, err := both.Verify(tok); err != nil {
			t.Error(err)
		}
	}
	if _, err := only.Verify(newTok); err != nil {
		t.Error(err)
	}
	if _, err := only.Verify(oldTok); !errors.Is(err, ErrInvalid) {
		t.Errorf("a token of the retired key: %v", err)
	}
}

func TestScopes(t *testing.T) {
	tests := []struct {
		have  []Scope
		need  Scope
		allow bool
	}{
		{[]Scope{Read}, Read, true},
		{[]Scope{Read}, Write, false},
		{[]Scope{Write}, Read, true},
		{[]Scope{Administrator}, Write, true},
		{[]Scope{Administrator}, Daemon, false},
		{[]Scope{Daemon}, AdvertiseStartd, true},
		{[]Scope{Daemon}, Administrator, false},
		{[]Scope{AdvertiseStartd}, AdvertiseSchedd, false},
		{[]Scope{SeaAdmin}, SeaRead, true},
		{[]Scope{SeaWrite}, SeaAdmin, false},
		{[]Scope{Administrator}, SeaAdmin, false},
		{[]Scope{Read, SeaWrite}, SeaRead, true},
		{nil, Read, false},
	}
	for _, tt := range tests {
		c := &Claims{Scopes: tt.have}
		if got := c.Allows(tt.need); got != tt.allow {
			t.Errorf("%v allows %s = %v, want %v", tt.have, tt.need, got, tt.allow)
		}
	}
	for in, want := range map[string]Scope{"READ": Read, "condor:/write": Write, "sea_admin": SeaAdmin, "pond:/SEA_READ": SeaRead} {
		if got, err := ParseScope(in); err != nil || got != want {
			t.Errorf("ParseScope(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseScope("ROOT"); err == nil || !strings.Contains(err.Error(), "SEA_ADMIN") {
		t.Errorf("ParseScope(ROOT): %v", err)
	}
}

func TestRequire(t *testing.T) {
	key := newKey(t)
	v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0 }}
	reached := 0
	h := Require(v, Write, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		c, _ := FromContext(r.Context())
		w.Write([]byte(c.Subject))
	}))
	tests := []struct {
		name   string
		header string
		code   int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"not bearer", "Basic YWxpY2U6c2VjcmV0", http.StatusUnauthorized},
		{"bad token", "Bearer x.y.z", http.StatusUnauthorized},
		{"scope too low", "Bearer " + mint(t, key, claims(Read)), http.StatusForbidden},
		{"allowed", "Bearer " + mint(t, key, claims(Write)), http.StatusOK},
		{"allowed through a higher scope", "bearer " + mint(t, key, claims(Administrator)), http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := reached
			r := httptest.NewRequest(http.MethodPost, "/v1/x", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.code {
				t.Fatalf("code %d, want %d: %s", w.Code, tt.code, w.Body)
			}
			if (reached > before) != (tt.code == http.StatusOK) {
				t.Fatalf("handler reached: %v, code %d", reached > before, w.Code)
			}
			if tt.code == http.StatusOK && w.Body.String() != "alice" {
				t.Fatalf("handler saw subject %q", w.Body)
			}
			if tt.code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("no WWW-Authenticate on a 401")
			}
		})
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	k := newKey(t)
	priv := filepath.Join(dir, "signing.key")
	if err := WriteSigningKey(priv, k); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(priv); fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key mode %04o", fi.Mode().Perm())
	}
	back, err := ReadSigningKey(priv)
	if err != nil || back.ID() != k.ID() {
		t.Fatalf("read back %v, %v", back, err)
	}
	os.Chmod(priv, 0o644)
	if _, err := ReadSigningKey(priv); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable signing key was read: %v", err)
	}
	pub := filepath.Join(dir, "trusted.pem")
	other := newKey(t)
	if err := WritePublicKeys(pub, k.Public(), other.Public()); err != nil {
		t.Fatal(err)
	}
	keys, err := ReadPublicKeys(pub)
	if err != nil || len(keys) != 2 || !keys[0].Equal(k.Public()) || !keys[1].Equal(other.Public()) {
		t.Fatalf("public keys %v, %v", keys, err)
	}
	for name, content := range map[string]string{"empty": "", "text": "hello", "private where public": mustRead(t, priv)} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		if _, err := ReadPublicKeys(p); err == nil {
			t.Errorf("%s: read as public keys", name)
		}
	}
}

func mustRead(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzVerify checks that no input makes Verify panic or accept a token the
// key did not sign.
func FuzzVerify(f *testing.F) {
	key := newKey(f)
	f.Add(mint(f, key, claims(Read)))
	f.Add("a.b.c")
	f.Add("")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0 }}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(tok)
		if err == nil && (c.Issuer != "pool-1" || c.Subject == "") {
			t.Fatalf("accepted %q as %+v", tok, c)
		}
	})
}

// BenchmarkVerify measures what checking one token costs a request.
func BenchmarkVerify(b *testing.B) {
	key := newKey(b)
	tok := mint(b, key, claims(Write))
	v := &Verifier{Issuer: "pool-1", Keys: []ed25519.PublicKey{key.Public()}, Now: func() time.Time { return t0 }}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
