package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// delegate issues a delegated CA for prefix into the sea's directory and
// reads it back.
func (s *testSea) delegate(t *testing.T, prefix string, lifetime time.Duration) *SubCA {
	t.Helper()
	data, err := s.a.DelegateCA(prefix, lifetime)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.dir, "factory-ca.pem")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sub, err := ReadSubCA(path)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// writeNode writes a node's certificate files into a directory of its
// own, with the sea's CA file, and returns the directory.
func (s *testSea) writeNode(t *testing.T, name string, certPEM, keyPEM []byte) string {
	t.Helper()
	dir := filepath.Join(s.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(s.a.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	for f, data := range map[string][]byte{NodeCertFile: certPEM, NodeKeyFile: keyPEM, CACertFile: caPEM} {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// forge signs tmpl with the delegated CA's key as a thief of it could,
// whatever its names, and returns the certificate chain and key (PEM).
func forge(t *testing.T, sub *SubCA, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber, _ = serialNumber()
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Minute)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(10 * time.Minute)
	}
	if tmpl.KeyUsage == 0 {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, sub.Cert, pub, sub.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(priv)
	return append(pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: sub.Cert.Raw})...),
		pem.EncodeToMemory(&pem.Block{Type: privateBlock, Bytes: keyDER})
}

// TestDelegatedCA issues a delegated CA for a pool's glideins and checks,
// with real TLS handshakes, that a certificate it issues within its
// limits is accepted by the sea's servers (the API: a client certificate
// requested; the tree: required) and clients, both ways, while what a
// thief of its key could sign beyond them is refused by every peer:
// another node's name, names Go's constraints catch (a DNS name, another
// issuer, an IP address), a leaf with no URI (Go ignores the common
// name), a CA certificate, a leaf that outlives the intermediate, and a
// CA beneath it.
func TestDelegatedCA(t *testing.T) {
	s := newTestSea(t)
	cm := s.node(t, "cm", time.Hour)
	sub := s.delegate(t, "pond-campus-", time.Hour)
	if sub.Prefix != "pond-campus-" || sub.Issuer != s.a.Issuer() || sub.Cert.MaxPathLen != 0 || !sub.Cert.MaxPathLenZero ||
		sub.Cert.KeyUsage != x509.KeyUsageCertSign || sub.Cert.NotAfter.After(time.Now().Add(time.Hour)) {
		t.Fatalf("delegated CA %+v", sub.Cert)
	}
	if _, _, err := sub.Issue("cm", time.Hour); err == nil {
		t.Fatal("the delegated CA issued a certificate for cm")
	}
	certPEM, keyPEM, err := sub.Issue("pond-campus-sec-1", 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	good := s.writeNode(t, "pond-campus-sec-1", certPEM, keyPEM)
	leaf, err := ReadCertificates(filepath.Join(good, NodeCertFile))
	if err != nil || len(leaf) != 2 || leaf[0].NotAfter.After(sub.Cert.NotAfter) {
		t.Fatalf("issued chain %v (%v): want leaf and intermediate, the leaf within the intermediate's life", leaf, err)
	}

	tree := func(dir string) *tls.Config {
		cfg := serverTLS(t, dir).Clone()
		cfg.ClientAuth = tls.RequireAnyClientCert
		return cfg
	}
	// peers checks every way dir's certificate meets the sea's nodes and
	// returns the errors of the side that verifies it.
	peers := func(dir string) map[string]error {
		out := map[string]error{}
		_, _, cErr, _ := handshake(t, serverTLS(t, dir), clientTLS(t, cm, true))
		out["client of its API"] = cErr
		_, _, _, sErr := handshake(t, serverTLS(t, cm), clientTLS(t, dir, true))
		out["API server it calls"] = sErr
		_, _, _, sErr = handshake(t, tree(cm), clientTLS(t, dir, true))
		out["tree server it calls"] = sErr
		_, _, cErr, _ = handshake(t, tree(dir), clientTLS(t, cm, true))
		out["tree client of it"] = cErr
		return out
	}
	for way, err := range peers(good) {
		if err != nil {
			t.Errorf("within its limits, %s: %v", way, err)
		}
	}

	uri := func(name string) []*url.URL {
		return []*url.URL{{Scheme: "pond", Host: s.a.Issuer(), Path: "/" + name}}
	}
	for _, tc := range []struct {
		name string
		tmpl *x509.Certificate
		want string
	}{
		{"another node's name", &x509.Certificate{Subject: pkix.Name{CommonName: "cm"}, URIs: uri("cm")}, "may not certify"},
		{"another node's name, no URI", &x509.Certificate{Subject: pkix.Name{CommonName: "cm"}}, "must name exactly"},
		{"a common name unlike its URI", &x509.Certificate{Subject: pkix.Name{CommonName: "cm"}, URIs: uri("pond-campus-x")}, "must name exactly"},
		{"two URIs", &x509.Certificate{Subject: pkix.Name{CommonName: "pond-campus-x"}, URIs: append(uri("pond-campus-x"), uri("cm")...)}, "must name exactly"},
		{"the bare prefix", &x509.Certificate{Subject: pkix.Name{CommonName: "pond-campus-"}, URIs: uri("pond-campus-")}, "may not certify"},
		{"another issuer", &x509.Certificate{Subject: pkix.Name{CommonName: "pond-campus-x"},
			URIs: []*url.URL{{Scheme: "pond", Host: "other", Path: "/pond-campus-x"}}}, "not permitted"},
		{"a DNS name", &x509.Certificate{Subject: pkix.Name{CommonName: "pond-campus-x"}, URIs: uri("pond-campus-x"),
			DNSNames: []string{"cm.example.org"}}, "not permitted"},
		{"an IP address", &x509.Certificate{Subject: pkix.Name{CommonName: "pond-campus-x"}, URIs: uri("pond-campus-x"),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}, "excluded"},
		{"a CA certificate", &x509.Certificate{Subject: pkix.Name{CommonName: "pond-campus-x"}, URIs: uri("pond-campus-x"),
			BasicConstraintsValid: true, IsCA: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}, "CA certificate"},
		{"outliving the intermediate", &x509.Certificate{Subject: pkix.Name{CommonName: "pond-campus-x"}, URIs: uri("pond-campus-x"),
			NotAfter: sub.Cert.NotAfter.Add(time.Hour)}, "outlives"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM := forge(t, sub, tc.tmpl)
			dir := s.writeNode(t, "forged-"+strings.ReplaceAll(tc.name, " ", "-"), certPEM, keyPEM)
			for way, err := range peers(dir) {
				if !errors.Is(err, ErrNotInSea) && !strings.Contains(errString(err), "bad certificate") {
					t.Errorf("%s: %v, want refused", way, err)
				}
				if errors.Is(err, ErrNotInSea) && !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v, want %q", way, err, tc.want)
				}
			}
		})
	}

	// A CA beneath the delegated one: its certificates are refused (path
	// length), even within the prefix.
	t.Run("a CA beneath it", func(t *testing.T) {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		serial, _ := serialNumber()
		tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "pond-campus-ca"}, URIs: uri("pond-campus-ca*"),
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(10 * time.Minute),
			KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, sub.Cert, pub, sub.key)
		if err != nil {
			t.Fatal(err)
		}
		below, _ := x509.ParseCertificate(der)
		inner := &SubCA{Cert: below, Issuer: s.a.Issuer(), Prefix: "pond-campus-ca", key: priv}
		certPEM, keyPEM, err := inner.Issue("pond-campus-ca1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: sub.Cert.Raw})...)
		dir := s.writeNode(t, "forged-below", certPEM, keyPEM)
		for way, err := range peers(dir) {
			if !errors.Is(err, ErrNotInSea) && !strings.Contains(errString(err), "bad certificate") {
				t.Errorf("%s: %v, want refused", way, err)
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDelegatedCAOldSea delegates a CA in a sea whose CA certificate
// allows no intermediate (path length 0, as pond made them before): the
// authority adds a certificate of the same key that allows one, and a
// node given the new CA file accepts the delegated CA's certificates
// while one with the old file refuses them.
func TestDelegatedCAOldSea(t *testing.T) {
	s := newTestSea(t)
	c, err := s.a.caFiles()
	if err != nil {
		t.Fatal(err)
	}
	// Make the CA certificate again as it was made before: path length 0.
	tmpl := *c.cert
	tmpl.MaxPathLen, tmpl.MaxPathLenZero = 0, true
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, c.key.Public(), c.key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.a.CAFile(), pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	old := s.node(t, "old", time.Hour)
	sub := s.delegate(t, "pond-campus-", time.Hour)
	certs, err := ReadCertificates(s.a.CAFile())
	if err != nil || len(certs) != 2 || certs[1].MaxPathLen != 1 {
		t.Fatalf("CA file %v (%v): want the old certificate and one allowing an intermediate", certs, err)
	}
	certPEM, keyPEM, err := sub.Issue("pond-campus-x", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	glidein := s.writeNode(t, "pond-campus-x", certPEM, keyPEM)
	if _, _, cErr, _ := handshake(t, serverTLS(t, glidein), clientTLS(t, old, true)); !errors.Is(cErr, ErrNotInSea) {
		t.Errorf("a node with the old CA file: %v, want refused", cErr)
	}
	renewed := s.node(t, "renewed", time.Hour)
	if _, _, cErr, sErr := handshake(t, serverTLS(t, glidein), clientTLS(t, renewed, true)); cErr != nil || sErr != nil {
		t.Errorf("a node with the new CA file: %v, %v", cErr, sErr)
	}
	if _, _, cErr, sErr := handshake(t, serverTLS(t, renewed), clientTLS(t, old, true)); cErr != nil || sErr != nil {
		t.Errorf("old and renewed nodes: %v, %v", cErr, sErr)
	}
}
