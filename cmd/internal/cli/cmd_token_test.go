package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
)

// TestTokenCreateHTCondor makes an HTCondor-format token with pondctl
// token create -htcondor and checks it with the working directory's
// authority: it verifies as an IDTOKENS token of the subject and scopes
// asked, not as one of pond's own, is listed and revoked like any, and the
// signing key is never printed.
func TestTokenCreateHTCondor(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), append([]string{"-chdir=" + dir, "token"}, args...), strings.NewReader(""), &out, &errOut, nil)
		return code, out.String(), errOut.String()
	}
	code, stdout, stderr := run("create", "-htcondor", "-subject", "alice", "-scope", "READ,ADVERTISE_STARTD", "-lifetime", "1h")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	tok := strings.TrimSpace(stdout)
	a, err := auth.OpenAuthority(filepath.Join(dir, ".pond", "auth"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.HTCondorVerifier().Verify(tok)
	if err != nil || c.Subject != "alice" || !c.Allows(auth.Read) || !c.Allows(auth.AdvertiseStartd) || c.Allows(auth.Write) {
		t.Fatalf("token %q: %+v, %v", tok, c, err)
	}
	if _, err := a.Verifier().Verify(tok); err == nil {
		t.Error("an HTCondor-format token verifies as one of pond's own")
	}
	key, err := os.ReadFile(filepath.Join(dir, ".pond", "auth", auth.HTCondorKeysDir, auth.HTCondorPoolKey))
	if err != nil || len(key) == 0 {
		t.Fatalf("pool key: %v", err)
	}
	if bytes.Contains([]byte(stdout+stderr), key) {
		t.Error("the signing key was printed")
	}
	_, list, _ := run("list")
	if !strings.Contains(list, "alice@"+a.Issuer()) {
		t.Fatalf("token list:\n%s", list)
	}
	id := strings.Fields(strings.Split(strings.TrimSpace(list), "\n")[1])[0]
	if code, _, stderr := run("revoke", id); code != 0 {
		t.Fatalf("revoke: %s", stderr)
	}
	if _, err := a.HTCondorVerifier().Verify(tok); !errors.Is(err, auth.ErrRevoked) {
		t.Fatalf("revoked token: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-htcondor", "-subject", "@x", "-scope", "READ"}, "invalid subject"},
		{[]string{"-htcondor", "-subject", "bob", "-scope", "ROOT"}, "unknown scope"},
		{[]string{"-htcondor", "-subject", "bob", "-scope", "READ", "-lifetime", "0s"}, "Invalid -lifetime"},
	} {
		if code, _, stderr := run(append([]string{"create"}, tc.args...)...); code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("token create %q: exit %d, %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
