package auth

import (
	"errors"
	"testing"
	"time"
)

// TestGrants shows that a pond grant's binding survives signing and
// verification, and that FindGrant mints one bound to the pond and central
// manager it is asked for, unless the user brings a token.
func TestGrants(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenAuthority(dir + "/.pond/auth")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	tok, err := FindGrant(getenv, dir, "p1", "10.0.0.1:7947")
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Verifier().Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.PondID != "p1" || c.CentralManager != "10.0.0.1:7947" || !c.Allows(SeaWrite) || c.Allows(SeaAdmin) {
		t.Fatalf("grant claims = %+v", c)
	}
	if err := c.MayInvite("p1", "10.0.0.1:7947"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{{"p2", "10.0.0.1:7947"}, {"p1", "10.0.0.2:7947"}} {
		if err := c.MayInvite(bad[0], bad[1]); !errors.Is(err, ErrNoGrant) {
			t.Errorf("MayInvite(%s, %s) = %v, want ErrNoGrant", bad[0], bad[1], err)
		}
	}

	cmTok, iss, err := a.IssueGrant("node/cm", []Scope{Daemon, SeaWrite}, "10.0.0.1:7947", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if iss.CentralManager != "10.0.0.1:7947" {
		t.Errorf("record = %+v", iss)
	}
	c, err = a.Verifier().Verify(cmTok)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MayInvite("any", "10.0.0.1:7947"); err != nil {
		t.Errorf("a central manager's grant refused for a pond of its own: %v", err)
	}
	if _, _, err := a.IssueGrant("node/cm", []Scope{SeaWrite}, "", time.Hour); err == nil {
		t.Error("a grant without a central manager was issued")
	}

	env["POND_TOKEN"] = "users-own"
	if tok, err := FindGrant(getenv, dir, "p1", "10.0.0.1:7947"); err != nil || tok != "users-own" {
		t.Errorf("FindGrant with POND_TOKEN = %q, %v", tok, err)
	}
	if tok, err := FindGrant(func(string) string { return "" }, t.TempDir(), "p1", "x:1"); err != nil || tok != "" {
		t.Errorf("FindGrant without an authority = %q, %v", tok, err)
	}
}
