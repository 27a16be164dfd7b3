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
