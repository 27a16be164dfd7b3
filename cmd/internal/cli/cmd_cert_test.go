package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// TestCertCreate issues a certificate of the working directory's CA and
// checks the files and the flags printed; bad flags are refused with the
// reason.
func TestCertCreate(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), append([]string{"-chdir=" + dir, "cert", "create"}, args...), strings.NewReader(""), &out, &errOut, nil)
		return code, out.String(), errOut.String()
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "needs -name"},
		{[]string{"-name", "n", "-lifetime", "-1h"}, "Invalid -lifetime"},
		{[]string{"-name", "n", "-dir", filepath.Join(dir, "nope")}, "not a directory"},
		{[]string{"-name", "n", "extra"}, `Unexpected argument "extra"`},
	} {
		if code, _, stderr := run(tc.args...); code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("cert create %q: exit %d, %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
	node := filepath.Join(dir, "node")
	if err := os.Mkdir(node, 0o700); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run("-name", "node-7", "-host", "10.0.0.7, node-7.example", "-dir", node, "-lifetime", "48h")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	flags := strings.Fields(stdout)
	want := []string{"-tls-cert", filepath.Join(node, auth.NodeCertFile), "-tls-key", filepath.Join(node, auth.NodeKeyFile), "-tls-ca", filepath.Join(node, auth.CACertFile)}
	if strings.Join(flags, " ") != strings.Join(want, " ") {
		t.Fatalf("printed %q, want %q", flags, want)
	}
	certs, err := auth.ReadCertificates(filepath.Join(node, auth.NodeCertFile))
	if err != nil {
		t.Fatal(err)
	}
	c := certs[0]
	if c.Subject.CommonName != "node-7" || len(c.IPAddresses) != 1 || c.IPAddresses[0].String() != "10.0.0.7" ||
		len(c.DNSNames) != 1 || c.DNSNames[0] != "node-7.example" || time.Until(c.NotAfter) > 49*time.Hour {
		t.Errorf("certificate: CN %q IPs %v DNS %v until %v", c.Subject.CommonName, c.IPAddresses, c.DNSNames, c.NotAfter)
	}
	// The server and client configurations of the sea take the files.
	if _, err := auth.ServerTLS(want[1], want[3], want[5]); err != nil {
		t.Fatal(err)
	}
}

// TestCertFactory delegates a pool's factory its key and CA: the files
// are what the agent's -factory-key and -factory-ca take, limited to the
// pool's glideins, and the trusted keys name the delegated key with its
// limits; bad flags are refused with the reason.
func TestCertFactory(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), append([]string{"-chdir=" + dir}, args...), strings.NewReader(""), &out, &errOut, nil)
		return code, out.String(), errOut.String()
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "needs -pool"},
		{[]string{"-pool", "campus", "-lifetime", "0s"}, "Invalid -lifetime"},
		{[]string{"-pool", "campus", "-token-lifetime", "-1h"}, "Invalid -lifetime"},
		{[]string{"-pool", "campus", "-dir", filepath.Join(dir, "nope")}, "not a directory"},
		{[]string{"-pool", "campus", "extra"}, `Unexpected argument "extra"`},
	} {
		if code, _, stderr := run(append([]string{"cert", "factory"}, tc.args...)...); code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("cert factory %q: exit %d, %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
	// The sea speaks TLS once a node has a certificate.
	if code, _, stderr := run("cert", "create", "-name", "cm", "-dir", t.TempDir()); code != 0 {
		t.Fatalf("cert create: %d %s", code, stderr)
	}
	out := t.TempDir()
	code, stdout, stderr := run("cert", "factory", "-pool", "campus", "-dir", out, "-lifetime", "2h", "-token-lifetime", "1h")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "-factory-key " + filepath.Join(out, "factory.key") + " -factory-ca " + filepath.Join(out, "factory-ca.pem")
	if strings.TrimSpace(stdout) != want {
		t.Fatalf("printed %q, want %q", stdout, want)
	}
	sub, err := auth.ReadSubCA(filepath.Join(out, "factory-ca.pem"))
	if err != nil || sub.Prefix != "pond-campus-" || time.Until(sub.Cert.NotAfter) > 2*time.Hour {
		t.Fatalf("delegated CA %+v: %v", sub, err)
	}
	k, err := auth.ReadSigningKey(filepath.Join(out, "factory.key"))
	if err != nil {
		t.Fatal(err)
	}
	_, delegated, err := auth.ReadTrustedKeys(filepath.Join(dir, auth.AuthorityDir, auth.TrustedKeysFile))
	if err != nil || len(delegated) != 1 || !delegated[0].Key.Equal(k.Public()) ||
		delegated[0].Limits.SubjectPrefix != "node/pond-campus-" || delegated[0].Limits.MaxLifetime != time.Hour {
		t.Fatalf("trusted delegated keys %+v: %v", delegated, err)
	}
	if _, _, err := sub.Issue("pond-campus-hpc-1", time.Hour); err != nil {
		t.Fatal(err)
	}
}
