package failover

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// TestClaimsProveMembership proves a member's claim to belong to its pool
// with a real TLS listener and the sea's certificates: the claim holds
// only for the node and pool the certificate names.
func TestClaimsProveMembership(t *testing.T) {
	dir := t.TempDir()
	a, err := auth.OpenAuthority(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cert, key, ca, err := a.WritePoolCertificate(filepath.Join(dir, "n1"), "n1", "p1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := auth.ServerTLS(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) { _ = c.(*tls.Conn).Handshake(); c.Close() }(c)
		}
	}()
	ccert, ckey, _, err := a.WritePoolCertificate(filepath.Join(dir, "n2"), "n2", "p1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := auth.ClientTLS(ca, ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()

	var open Claims
	if !open.Proven(t.Context(), "anyone", Claim{API: addr, Pool: "p9"}, true) {
		t.Error("a sea without certificates: a claim should hold as it is")
	}
	c := &Claims{TLS: cli, Self: "n2"}
	for _, tc := range []struct {
		name, node, pool string
		want             bool
	}{
		{"own node", "n2", "p1", true},
		{"named node and pool", "n1", "p1", true},
		{"another pool", "n1", "p2", false},
		{"another node", "n3", "p1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := Claim{API: addr, Pool: tc.pool}
			if got := c.Proven(t.Context(), tc.node, k, true); got != tc.want {
				t.Errorf("Proven = %v, want %v", got, tc.want)
			}
			if got := c.Known(tc.node, k); got != tc.want {
				t.Errorf("Known = %v, want %v", got, tc.want)
			}
		})
	}
}
