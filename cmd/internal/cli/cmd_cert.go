package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

func (m *meta) cmdCert(ctx context.Context, args []string) int {
	return m.subcommand(ctx, "cert", args, []subcommand{
		{"create", m.certCreate},
		{"factory", m.certFactory},
	})
}

// certCreate issues a node a certificate of the sea's CA (the working
// directory's authority), for an agent started elsewhere than by the local
// provider: the files are what -tls-cert, -tls-key and -tls-ca take.
func (m *meta) certCreate(ctx context.Context, args []string) int {
	fs := m.newFlagSet("cert create", "cert create -name NODE [-pool POOL] [-host HOST[,HOST...]] [-dir DIR] [-lifetime D]")
	name := fs.String("name", "", "the node's `name` in the sea")
	pool := fs.String("pool", "", "the `pool` the node is a member of: its members then follow it as central manager (fail-over) and take its flocking announcements; none for a free node")
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
	cert, key, ca, err := a.WritePoolCertificate(*dir, *name, *pool, hs, *lifetime)
	if err != nil {
		return m.fail("Cannot issue the certificate", err)
	}
	fmt.Fprintf(m.stdout, "-tls-cert %s -tls-key %s -tls-ca %s\n", cert, key, ca)
	return 0
}

// Files certFactory writes.
const (
	factoryKeyFile = "factory.key"
	factoryCAFile  = "factory-ca.pem"
)

// certFactory delegates to the pilot factory of a pool's central manager
// what it needs to start glideins unattended: a signing key for their
// node tokens (auth.Authority.Delegate, limited to node/pond-POOL-*,
// DAEMON and SEA_READ, -token-lifetime) and, in a sea that speaks TLS, an
// intermediate CA for their certificates (auth.Authority.DelegateCA,
// limited to names pond-POOL-*, for -lifetime). The files are what
// -factory-key and -factory-ca take.
func (m *meta) certFactory(ctx context.Context, args []string) int {
	fs := m.newFlagSet("cert factory", "cert factory -pool POOL [-dir DIR] [-lifetime D] [-token-lifetime D]")
	pool := fs.String("pool", "", "the `pool` whose central manager runs the factory")
	dir := fs.String("dir", ".", "`directory` to write "+factoryKeyFile+" and "+factoryCAFile+" (0600) into")
	lifetime := fs.Duration("lifetime", 7*24*time.Hour, "how long the delegated CA is valid: the longest a glidein's certificate can last")
	tokenLife := fs.Duration("token-lifetime", 5*time.Hour, "the longest a token the delegated key signs may last")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() > 0 {
		return m.errorf("Unexpected argument %q", fs.Arg(0))
	}
	if *pool == "" {
		return m.errorf("cert factory needs -pool")
	}
	if *lifetime <= 0 || *tokenLife <= 0 {
		return m.errorf("Invalid -lifetime %s or -token-lifetime %s: both must be more than zero", *lifetime, *tokenLife)
	}
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		return m.errorf("Invalid -dir %q: not a directory", *dir)
	}
	a, ok := m.authority()
	if !ok {
		return 1
	}
	prefix := api.FactoryPrefix(*pool)
	k, err := a.Delegate(auth.KeyLimits{Name: "factory " + *pool, SubjectPrefix: "node/" + prefix,
		Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, MaxLifetime: *tokenLife})
	if err != nil {
		return m.fail("Cannot delegate the factory's key", err)
	}
	keyPath := filepath.Join(*dir, factoryKeyFile)
	if err := auth.WriteSigningKey(keyPath, k); err != nil {
		return m.fail("Cannot write the factory's key", err)
	}
	flags := "-factory-key " + keyPath
	if _, err := os.Stat(a.CAFile()); err == nil {
		data, err := a.DelegateCA(prefix, *lifetime)
		if err != nil {
			return m.fail("Cannot delegate the factory's CA", err)
		}
		caPath := filepath.Join(*dir, factoryCAFile)
		if err := os.WriteFile(caPath, data, 0o600); err != nil {
			return m.fail("Cannot write the factory's CA", err)
		}
		flags += " -factory-ca " + caPath
	}
	fmt.Fprintln(m.stdout, flags)
	fmt.Fprintf(m.stderr, "Give every node the new trusted keys (%s) and CA certificates (%s), as after a rotation.\n",
		filepath.Join(a.Dir(), auth.TrustedKeysFile), a.CAFile())
	return 0
}
