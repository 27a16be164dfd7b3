package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

func (m *meta) cmdCert(ctx context.Context, args []string) int {
	return m.subcommand(ctx, "cert", args, []subcommand{
		{"create", m.certCreate},
	})
}

// certCreate issues a node a certificate of the sea's CA (the working
// directory's authority), for an agent started elsewhere than by the local
// provider: the files are what -tls-cert, -tls-key and -tls-ca take.
func (m *meta) certCreate(ctx context.Context, args []string) int {
	fs := m.newFlagSet("cert create", "cert create -name NODE [-host HOST[,HOST...]] [-dir DIR] [-lifetime D]")
	name := fs.String("name", "", "the node's `name` in the sea")
	hosts := fs.String("host", "", "comma-separated DNS names and IP addresses of the node (informative: peers verify the CA, not the address)")
	dir := fs.String("dir", ".", "`directory` to write "+auth.NodeCertFile+", "+auth.NodeKeyFile+" (0600) and "+auth.CACertFile+" into")
	lifetime := fs.Duration("lifetime", 365*24*time.Hour, "how long the certificate is valid")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	if *name == "" {
		return m.errorf("cert create needs -name")
	}
	if *lifetime <= 0 {
		return m.errorf("Invalid -lifetime %s: a certificate must last more than zero", *lifetime)
	}
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		return m.errorf("Invalid -dir %q: not a directory", *dir)
	}
	a, ok := m.authority()
	if !ok {
		return 1
	}
	var hs []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hs = append(hs, h)
		}
	}
	cert, key, ca, err := a.WriteCertificate(*dir, *name, hs, *lifetime)
	if err != nil {
		return m.fail("Cannot issue the certificate", err)
	}
	fmt.Fprintf(m.stdout, "-tls-cert %s -tls-key %s -tls-ca %s\n", cert, key, ca)
	return 0
}
