package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAuthority issues, lists and revokes tokens of a working directory's
// authority, and checks what its verifier makes of them.
func TestAuthority(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".pond", "auth")
	// Opened at once by several: one key, one issuer.
	var wg sync.WaitGroup
	auths := make([]*Authority, 4)
	for i := range auths {
		wg.Go(func() {
			a, err := OpenAuthority(dir)
			if err != nil {
				t.Error(err)
			}
			auths[i] = a
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	a := auths[0]
	for _, b := range auths[1:] {
		if b.Issuer() != a.Issuer() || b.key.ID() != a.key.ID() {
			t.Fatalf("two openings disagree: %s/%s and %s/%s", a.Issuer(), a.key.ID(), b.Issuer(), b.key.ID())
		}
	}
	for name, want := range map[string]os.FileMode{"": 0o700, SigningKeyFile: 0o600, recordFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %04o (%v)", name, fi.Mode().Perm(), want, err)
		}
	}

	alice, aliceRec, err := a.Issue("alice", []Scope{Write}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := a.Issue("bob", []Scope{SeaRead}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Issue("carol", []Scope{Read}, 0); err == nil {
		t.Error("a token without a lifetime was issued")
	}
	list, err := a.List()
	if err != nil || len(list) != 2 || list[0].Subject != "alice" || list[1].Subject != "bob" {
		t.Fatalf("list %+v, %v", list, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, recordFile))
	if strings.Contains(string(data), alice) {
		t.Fatal("the record holds a token itself")
	}

	// A verifier of another process: the same directory opened again.
	again, err := OpenAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	v := again.Verifier()
	if c, err := v.Verify(alice); err != nil || c.Subject != "alice" || !c.Allows(Read) {
		t.Fatalf("alice's token: %+v, %v", c, err)
	}
	if _, err := a.Revoke(aliceRec.ID[:8]); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(alice); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a revoked token: %v", err)
	}
	if _, err := v.Verify(bob); err != nil {
		t.Fatalf("bob's token after alice's was revoked: %v", err)
	}
	list, _ = a.List()
	if !list[0].Revoked || list[1].Revoked {
		t.Fatalf("list after the revocation: %+v", list)
	}
	for _, id := range []string{"", "ffffffff"} {
		if _, err := a.Revoke(id); err == nil {
			t.Errorf("revoked %q", id)
		}
	}
	// A token minted for pondctl's own calls is valid and not recorded.
	own, err := a.Mint("pondctl", []Scope{SeaAdmin}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(own); err != nil {
		t.Fatal(err)
	}
	if list, _ := a.List(); len(list) != 2 {
		t.Fatalf("Mint recorded its token: %+v", list)
	}
}

// TestAuthorityPrune checks that pruning drops the records of tokens that
// expired before the given time, and their revoked IDs, and keeps those of
// the others, whose revocation still holds.
func TestAuthorityPrune(t *testing.T) {
	a, err := OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	tokens := map[string]string{}
	for _, tc := range []struct {
		name string
		life time.Duration
	}{{"short", time.Hour}, {"short-revoked", 2 * time.Hour}, {"long", 48 * time.Hour}, {"long-revoked", 48 * time.Hour}} {
		tok, iss, err := a.Issue(tc.name, []Scope{Read}, tc.life)
		if err != nil {
			t.Fatal(err)
		}
		ids[tc.name], tokens[tc.name] = iss.ID, tok
	}
	for _, n := range []string{"short-revoked", "long-revoked"} {
		if _, err := a.Revoke(ids[n]); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := a.Prune(time.Now()); err != nil || len(got) != 0 {
		t.Fatalf("pruning before anything expired: %v, %v", got, err)
	}
	pruned, err := a.Prune(time.Now().Add(3 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pruned {
		names = append(names, p.Subject)
	}
	if strings.Join(names, " ") != "short short-revoked" {
		t.Errorf("pruned %v, want short and short-revoked", names)
	}
	list, err := a.List()
	if err != nil || len(list) != 2 || list[0].Subject != "long" || list[1].Subject != "long-revoked" || !list[1].Revoked {
		t.Errorf("after pruning: %+v, %v", list, err)
	}
	revoked, err := os.ReadFile(filepath.Join(a.Dir(), RevokedFile))
	if err != nil || string(revoked) != ids["long-revoked"]+"\n" {
		t.Errorf("revoked file %q, %v; want only long-revoked's ID", revoked, err)
	}
	v := a.Verifier()
	if _, err := v.Verify(tokens["long-revoked"]); !errors.Is(err, ErrRevoked) {
		t.Errorf("a revoked token that has not expired, after pruning: %v, want revoked", err)
	}
	if _, err := v.Verify(tokens["long"]); err != nil {
		t.Errorf("a valid token after pruning: %v", err)
	}
}
