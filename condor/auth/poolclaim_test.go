package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPoolCertificates: a certificate the sea's CA issues for a member of
// a pool names the pool, one for no pool names none, a peer reads both
// from a verified handshake, and a pool name a URI would not carry as it
// is is refused.
func TestPoolCertificates(t *testing.T) {
	s := newTestSea(t)
	for _, tc := range []struct{ name, pool string }{{"campus-1", "campus"}, {"free-0", ""}} {
		dir := filepath.Join(s.dir, tc.name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := s.a.WritePoolCertificate(dir, tc.name, tc.pool, []string{"127.0.0.1"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		var got Identity
		client := clientTLS(t, dir, false)
		verify := client.VerifyConnection
		client.VerifyConnection = func(cs tls.ConnectionState) error {
			if err := verify(cs); err != nil {
				return err
			}
			var err error
			got, err = CertIdentity(cs.PeerCertificates)
			return err
		}
		if _, _, cerr, serr := handshake(t, serverTLS(t, dir), client); cerr != nil || serr != nil {
			t.Fatalf("%s: handshake: %v, %v", tc.name, cerr, serr)
		}
		if got != (Identity{Node: tc.name, Pool: tc.pool}) {
			t.Errorf("%s: identity %+v, want node %q of pool %q", tc.name, got, tc.name, tc.pool)
		}
	}
	for _, pool := range []string{"a/b", "a b", "a?b", "a#b", "a%2f"} {
		if _, _, err := s.a.IssuePoolCertificate("n", pool, nil, time.Hour); err == nil || !strings.Contains(err.Error(), "cannot name it") {
			t.Errorf("pool %q: %v, want refused", pool, err)
		}
	}
	if _, _, err := s.a.IssuePoolCertificate("n", "", nil, time.Hour); err == nil {
		t.Error("a pool certificate for no pool was issued")
	}
	if _, err := CertIdentity(nil); err == nil {
		t.Error("an identity from no certificate")
	}
}

// TestDelegatedCannotClaimAPool: a delegated CA (a pool's pilot factory)
// that signs a certificate naming a pool makes one that no peer of the
// sea accepts, so that only the authority makes members of a pool.
func TestDelegatedCannotClaimAPool(t *testing.T) {
	s := newTestSea(t)
	sub := s.delegate(t, "glide-", time.Hour)
	certPEM, keyPEM := forge(t, sub, &x509.Certificate{
		Subject: pkix.Name{CommonName: "glide-1"},
		URIs:    []*url.URL{{Scheme: "pond", Host: sub.Issuer, Path: "/glide-1"}, poolURI(sub.Issuer, "campus")},
	})
	dir := s.writeNode(t, "glide-1", certPEM, keyPEM)
	if _, _, cerr, _ := handshake(t, serverTLS(t, dir), clientTLS(t, dir, false)); cerr == nil {
		t.Fatal("a peer accepted a delegated certificate that names a pool")
	}
}
