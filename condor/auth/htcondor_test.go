package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHTCondorKeyFile checks the pool key's file: made with the
// authority, 0600 in a 0700 directory, in HTCondor's scrambled form, read
// back to the same key, and refused when others may read it.
func TestHTCondorKeyFile(t *testing.T) {
	a, err := OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(a.Dir(), HTCondorKeysDir)
	path := filepath.Join(dir, HTCondorPoolKey)
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: %v, want %04o (%v)", p, fi.Mode().Perm(), want, err)
		}
	}
	raw, _ := os.ReadFile(path)
	if len(raw) != htcondorKeyLen || bytes.Equal(raw, a.htcondor.password) || bytes.IndexByte(raw, 0) >= 0 {
		t.Fatalf("key file of %d bytes: not the scrambled password", len(raw))
	}
	k, err := ReadHTCondorKey(path, HTCondorPoolKey)
	if err != nil || !bytes.Equal(k.password, a.htcondor.password) {
		t.Fatalf("read back: %v", err)
	}
	// Reopened, the authority keeps its key.
	again, err := OpenAuthority(a.Dir())
	if err != nil || !bytes.Equal(again.htcondor.password, a.htcondor.password) {
		t.Fatalf("reopened: %v", err)
	}
	// HTCondor stops at the first NUL, in the file and once unscrambled.
	if err := os.WriteFile(path, append(scrambled([]byte("abc\x00def")), 0, 'x'), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := ReadHTCondorKey(path, HTCondorPoolKey); err != nil || string(k.password) != "abc" {
		t.Fatalf("NUL-cut key: %q, %v", k.password, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHTCondorKey(path, HTCondorPoolKey); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key others may read: %v", err)
	}
	if _, err := NewHTCondorKey("../x"); err == nil {
		t.Fatal("a key ID with a path in it was accepted")
	}
}

// TestHTCondorKeyDerivation pins the HS256 key HTCondor derives from a
// signing key: HKDF-SHA256 of the password (twice over for POOL), salt
// "htcondor", info "master jwt".
func TestHTCondorKeyDerivation(t *testing.T) {
	pool := &HTCondorKey{id: HTCondorPoolKey, password: []byte("secret")}
	named := &HTCondorKey{id: "other", password: []byte("secretsecret")}
	if !bytes.Equal(pool.jwtKey(), named.jwtKey()) {
		t.Error("the pool key is not derived from its password twice over")
	}
	if bytes.Equal(pool.jwtKey(), (&HTCondorKey{id: "other", password: []byte("secret")}).jwtKey()) {
		t.Error("a named key is derived like the pool's")
	}
}

// TestHTCondorVerify issues an HTCondor-format token and checks what the
// authority's verifier makes of it, and of tokens it must refuse.
func TestHTCondorVerify(t *testing.T) {
	a, err := OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := OpenAuthority(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	v := a.HTCondorVerifier()
	tok, rec, err := a.IssueHTCondor("alice", []Scope{Write, AdvertiseStartd}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Format != FormatHTCondor || rec.Subject != "alice@"+a.Issuer() {
		t.Fatalf("record %+v", rec)
	}
	hdr, pl, err := parseHTCondorToken(tok[:strings.LastIndexByte(tok, '.')])
	if err != nil || hdr.Alg != "HS256" || hdr.Kid != "POOL" || pl.Issuer != a.Issuer() || pl.Subject != "alice@"+a.Issuer() ||
		pl.Scope != "condor:/WRITE condor:/ADVERTISE_STARTD" || pl.ID != rec.ID || pl.Expires == nil || pl.Issued == nil {
		t.Fatalf("token %+v %+v %v", hdr, pl, err)
	}
	c, err := v.Verify(tok)
	if err != nil || c.Subject != "alice" || !c.Allows(Read) || !c.Allows(AdvertiseStartd) || c.Allows(Administrator) {
		t.Fatalf("claims %+v, %v", c, err)
	}
	// pond's own tokens are not HTCondor's.
	own, _, _ := a.Issue("alice", []Scope{Read}, time.Hour)
	if _, err := v.Verify(own); !errors.Is(err, ErrInvalid) {
		t.Errorf("pond's own token: %v", err)
	}
	if _, _, err := a.IssueHTCondor("@x", []Scope{Read}, time.Hour); err == nil {
		t.Error("a subject without a user was accepted")
	}

	key := a.htcondor
	mint := func(c Claims) string {
		t.Helper()
		s, err := MintHTCondor(key, c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	base := Claims{Issuer: a.Issuer(), Subject: "bob@" + a.Issuer(), Scopes: []Scope{Read}, Expires: now.Add(time.Hour)}
	with := func(f func(*Claims)) Claims { c := base; f(&c); return c }
	foreign, _, _ := other.IssueHTCondor("alice", []Scope{Read}, time.Hour)
	key = other.htcondor
	sameDomain := mint(base)
	key = a.htcondor
	revoked, rec2, _ := a.IssueHTCondor("carol", []Scope{Read}, time.Hour)
	if _, err := a.Revoke(rec2.ID); err != nil {
		t.Fatal(err)
	}
	body, sig, _ := cutLast(mint(base))
	root, _, _ := cutLast(mint(with(func(c *Claims) { c.Subject, c.Scopes = "root@"+a.Issuer(), []Scope{Administrator} })))
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"expired", mint(with(func(c *Claims) { c.IssuedAt, c.Expires = now.Add(-2*time.Hour), now.Add(-time.Minute) })), ErrExpired},
		{"issued in the future", mint(with(func(c *Claims) { c.IssuedAt = now.Add(time.Hour) })), ErrInvalid},
		{"another authority", foreign, ErrInvalid},
		{"another key, same trust domain", sameDomain, ErrInvalid},
		{"revoked", revoked, ErrRevoked},
		{"tampered", root + "." + sig, ErrInvalid},
		{"no signature", body + ".", ErrInvalid},
		{"not a JWT", "x", ErrInvalid},
		{"alg none", b64.EncodeToString([]byte(`{"alg":"none","kid":"POOL"}`)) + body[strings.IndexByte(body, '.'):] + "." + sig, ErrInvalid},
		{"unknown kid", b64.EncodeToString([]byte(`{"alg":"HS256","kid":"NOPE"}`)) + body[strings.IndexByte(body, '.'):] + "." + sig, ErrInvalid},
		{"no expiry", noExpiry(t, key, a.Issuer()), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := v.Verify(tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("got %+v, %v; want %v", c, err, tc.want)
			}
		})
	}
}

// noExpiry makes a token HTCondor would make with no lifetime: pond
// refuses those.
func noExpiry(t *testing.T, k *HTCondorKey, issuer string) string {
	hdr := b64.EncodeToString([]byte(`{"alg":"HS256","kid":"POOL"}`))
	pl := b64.EncodeToString([]byte(`{"iss":"` + issuer + `","sub":"x@y","jti":"1","iat":` + "1700000000" + `,"scope":"condor:/READ"}`))
	return hdr + "." + pl + "." + base64.RawURLEncoding.EncodeToString(hs256(k.jwtKey(), hdr+"."+pl))
}

// FuzzHTCondorToken feeds arbitrary tokens to the parser and the verifier:
// nothing may panic, and whatever verifies was signed with the key.
func FuzzHTCondorToken(f *testing.F) {
	k := &HTCondorKey{id: HTCondorPoolKey, password: []byte("fuzz")}
	good, _ := MintHTCondor(k, Claims{Issuer: "d", Subject: "a@d", Scopes: []Scope{Read}, Expires: time.Unix(1<<33, 0)})
	f.Add(good)
	f.Add("e30.e30.")
	f.Add(b64.EncodeToString([]byte(`{"alg":"HS256","kid":"POOL"}`)) + "." + b64.EncodeToString([]byte(`{"exp":1e308,"iat":-1e308}`)) + ".x")
	v := &HTCondorVerifier{Issuer: "d", Keys: map[string]*HTCondorKey{HTCondorPoolKey: k}}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(tok)
		if err != nil {
			return
		}
		body, sig, _ := cutLast(tok)
		if want := b64.EncodeToString(hs256(k.jwtKey(), body)); strings.TrimRight(sig, "=") != want || c.Issuer != "d" {
			t.Fatalf("verified %q: %+v", tok, c)
		}
	})
}

// TestIsHTCondorToken checks that the authority's two kinds of token are
// told apart, and that what is no token is neither.
func TestIsHTCondorToken(t *testing.T) {
	a, err := OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	if got := a.HTCondorKeyFile(); got != filepath.Join(a.Dir(), "passwords.d", "POOL") {
		t.Errorf("HTCondorKeyFile = %s", got)
	}
	htok, _, err := a.IssueHTCondor("alice", []Scope{Read}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ptok, _, err := a.Issue("alice", []Scope{Read}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]bool{htok: true, ptok: false, "": false, "a.b.c": false, "not a token": false} {
		if got := IsHTCondorToken(tok); got != want {
			t.Errorf("IsHTCondorToken(%.20q) = %v, want %v", tok, got, want)
		}
	}
}

// TestValidKeyID checks the key IDs taken against the pattern they
// follow, ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$.
func TestValidKeyID(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	for _, id := range []string{
		"", "a", "POOL", "_x", "k.1-2_3", ".hidden", "-x", "a/b", "../x", "a b", "a\x00", "é", "a\n",
		strings.Repeat("k", 128), strings.Repeat("k", 129), "0" + strings.Repeat(".", 127), "0" + strings.Repeat("-", 128),
	} {
		if got, want := validKeyID(id), pattern.MatchString(id); got != want {
			t.Errorf("validKeyID(%q) = %v, want %v", id, got, want)
		}
	}
}
