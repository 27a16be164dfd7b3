package cli

import (
	"bytes"
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// TestCondorClientConfigTokens checks the tokens client-config writes:
// with the working directory's authority, an HTCondor-format token of the
// user in tokens.d (what HTCondor's clients offer) and pond's own token
// beside it, each of the subject and scopes asked; with -token-file, the
// token where its kind says.
func TestCondorClientConfigTokens(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), append([]string{"-chdir=" + dir, "condor", "client-config", "-pool", "127.0.0.1:9"}, args...),
			strings.NewReader(""), &out, &errOut, nil)
		return code, out.String() + errOut.String()
	}
	a, err := auth.OpenAuthority(filepath.Join(dir, ".pond", "auth"))
	if err != nil {
		t.Fatal(err)
	}
	// The sea's CA, made as a sea with TLS makes it.
	if _, _, err := a.IssueCertificate("n", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if code, out := run("-dir", "c", "-subject", "alice", "-scope", "READ"); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if c, err := a.HTCondorVerifier().Verify(read("c/tokens.d/pond")); err != nil || c.Subject != "alice" || !c.Allows(auth.Read) || c.Allows(auth.Write) {
		t.Errorf("tokens.d/pond: %+v, %v; want an HTCondor token of alice with READ", c, err)
	}
	if c, err := a.Verifier().Verify(read("c/pond.token")); err != nil || c.Subject != "alice" || c.Allows(auth.Write) {
		t.Errorf("pond.token: %+v, %v; want pond's token of alice with READ", c, err)
	}

	certs, err := auth.ReadCertificates(filepath.Join(dir, "c", "cert.pem"))
	if err != nil || len(certs) != 1 || certs[0].Subject.CommonName != "alice" {
		t.Errorf("cert.pem: %v, %v; want alice's certificate", certs, err)
	} else if _, err := certs[0].Verify(x509.VerifyOptions{Roots: caPool(t, filepath.Join(dir, "c", "ca.pem")),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("cert.pem does not verify with the sea's CA: %v", err)
	}
	htok, _, err := a.IssueHTCondor("bob", []auth.Scope{auth.Read}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "h.tok"), []byte(htok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := run("-dir", "h", "-token-file", filepath.Join(dir, "h.tok")); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if read("h/tokens.d/pond") != htok {
		t.Error("an HTCondor token of -token-file is not in tokens.d")
	}
	if _, err := os.Stat(filepath.Join(dir, "h", "pond.token")); err == nil {
		t.Error("an HTCondor token of -token-file was written as pond's")
	}
}

func caPool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	certs, err := auth.ReadCertificates(path)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
