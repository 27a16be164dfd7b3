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
