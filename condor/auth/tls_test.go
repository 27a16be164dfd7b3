package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testSea is an authority and the certificate files of its nodes.
type testSea struct {
	a   *Authority
	dir string
}

func newTestSea(t testing.TB) *testSea {
	t.Helper()
	dir := t.TempDir()
	a, err := OpenAuthority(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	// The CA is made with the first certificate.
	if _, _, err := a.IssueCertificate("first", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	return &testSea{a: a, dir: dir}
}

// node issues a certificate for name into a directory of its own and
// returns the directory.
func (s *testSea) node(t testing.TB, name string, lifetime time.Duration) string {
	t.Helper()
	dir := filepath.Join(s.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.a.WriteCertificate(dir, name, []string{"127.0.0.1", "localhost"}, lifetime); err != nil {
		t.Fatal(err)
	}
	return dir
}

func serverTLS(t *testing.T, dir string) *tls.Config {
	t.Helper()
	cfg, err := ServerTLS(filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile), filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func clientTLS(t *testing.T, dir string, withCert bool) *tls.Config {
	t.Helper()
	cert, key := "", ""
	if withCert {
		cert, key = filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile)
	}
	cfg, err := ClientTLS(filepath.Join(dir, CACertFile), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// handshake runs one TLS connection between a server and a client
// configured so, and returns what each side saw of the other: the CN of
// the peer's certificate ("" for none) and the side's handshake error.
func handshake(t *testing.T, server, client *tls.Config) (clientSaw, serverSaw string, clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			serverErr = err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		if serverErr = tc.Handshake(); serverErr != nil {
			return
		}
		if pcs := tc.ConnectionState().PeerCertificates; len(pcs) > 0 {
			serverSaw = pcs[0].Subject.CommonName
		}
		// Let the client's read see the end of the handshake.
		_, _ = tc.Write([]byte("ok"))
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, client)
	clientErr = tc.Handshake()
	if clientErr == nil {
		// In TLS 1.3 the server's verdict on the client's certificate
		// comes after the client's handshake: read it.
		var b [2]byte
		_, clientErr = io.ReadFull(tc, b[:])
		clientSaw = tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	tc.Close()
	wg.Wait()
	return clientSaw, serverSaw, clientErr, serverErr
}

// TestCertificates issues node certificates and checks what a TLS server
// and client of the sea make of them: the same CA's certificates pass,
// with or without a client certificate, whatever the address; another
// CA's or an expired one are refused on either side.
func TestCertificates(t *testing.T) {
	sea := newTestSea(t)
	other := newTestSea(t)
	n1 := sea.node(t, "node-1", time.Hour)
	n2 := sea.node(t, "node-2", time.Hour)
	expired := sea.node(t, "expired", time.Nanosecond)
	intruder := other.node(t, "intruder", time.Hour)

	for name, want := range map[string]os.FileMode{CACertFile: 0o600, CAKeyFile: 0o600} {
		fi, err := os.Stat(filepath.Join(sea.a.Dir(), name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", name, fi.Mode().Perm(), want, err)
		}
	}
	certs, err := ReadCertificates(filepath.Join(n1, NodeCertFile))
	if err != nil {
		t.Fatal(err)
	}
	leaf := certs[0]
	if leaf.Subject.CommonName != "node-1" || len(leaf.URIs) != 1 || leaf.URIs[0].String() != "pond://"+sea.a.Issuer()+"/node-1" ||
		len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || len(leaf.DNSNames) != 1 {
		t.Errorf("certificate: CN %q URIs %v IPs %v DNS %v", leaf.Subject.CommonName, leaf.URIs, leaf.IPAddresses, leaf.DNSNames)
	}
	if len(leaf.ExtKeyUsage) != 2 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || leaf.ExtKeyUsage[1] != x509.ExtKeyUsageClientAuth {
		t.Errorf("key usages %v", leaf.ExtKeyUsage)
	}
	if fi, err := os.Stat(filepath.Join(n1, NodeKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", fi.Mode(), err)
	}
	// A reopened authority keeps its CA.
	again, err := OpenAuthority(sea.a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := again.caFiles(); err != nil || !c.cert.Equal(mustCA(t, sea.a)) {
		t.Fatalf("reopened authority has another CA: %v", err)
	}

	for _, tc := range []struct {
		name                 string
		server               *tls.Config
		client               *tls.Config
		clientSaw, serverSaw string
		clientErr, serverErr bool
	}{
		{name: "mutual", server: serverTLS(t, n1), client: clientTLS(t, n2, true), clientSaw: "node-1", serverSaw: "node-2"},
		{name: "client without a certificate", server: serverTLS(t, n1), client: clientTLS(t, n2, false), clientSaw: "node-1"},
		{name: "server of another CA", server: serverTLS(t, intruder), client: clientTLS(t, n2, true), clientErr: true, serverErr: true},
		{name: "client of another CA", server: serverTLS(t, n1), client: clientTLS(t, intruder, true), clientErr: true, serverErr: true},
		{name: "expired server", server: serverTLS(t, expired), client: clientTLS(t, n2, true), clientErr: true, serverErr: true},
		{name: "expired client", server: serverTLS(t, n1), client: clientTLS(t, expired, true), clientErr: true, serverErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientSaw, serverSaw, clientErr, serverErr := handshake(t, tc.server, tc.client)
			if (clientErr != nil) != tc.clientErr || (serverErr != nil) != tc.serverErr {
				t.Fatalf("client error %v, server error %v; want errors %v, %v", clientErr, serverErr, tc.clientErr, tc.serverErr)
			}
			if tc.clientErr {
				return
			}
			if clientSaw != tc.clientSaw || serverSaw != tc.serverSaw {
				t.Errorf("client saw %q, server saw %q; want %q, %q", clientSaw, serverSaw, tc.clientSaw, tc.serverSaw)
			}
		})
	}

	// The error says why.
	_, _, err, _ = handshake(t, serverTLS(t, intruder), clientTLS(t, n2, true))
	if !errors.Is(err, ErrNotInSea) || !strings.Contains(err.Error(), "intruder") {
		t.Errorf("client's error: %v", err)
	}
	_, _, _, err = handshake(t, serverTLS(t, n1), clientTLS(t, expired, true))
	if !errors.Is(err, ErrNotInSea) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("server's error: %v", err)
	}
}

func mustCA(t *testing.T, a *Authority) *x509.Certificate {
	t.Helper()
	c, err := a.caFiles()
	if err != nil {
		t.Fatal(err)
	}
	return c.cert
}

// TestCertificateRotation replaces a node's certificate files under a
// running server and client configuration: the next connections use the
// new certificates, a half-written pair keeps the old one served, and a
// CA file replaced by another CA's refuses the old sea's servers.
func TestCertificateRotation(t *testing.T) {
	sea := newTestSea(t)
	n1 := sea.node(t, "node-1", time.Hour)
	n2 := sea.node(t, "node-2", time.Hour)
	server, client := serverTLS(t, n1), clientTLS(t, n2, true)
	serial := func() string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				tc := tls.Server(c, server)
				_ = tc.Handshake()
				_, _ = tc.Write([]byte("ok"))
				tc.Close()
			}
		}()
		c, err := tls.Dial("tcp", ln.Addr().String(), client)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	if again := serial(); again != first {
		t.Fatalf("unchanged files, new certificate: %s then %s", first, again)
	}
	// Renewed in place (a renewal may keep the file sizes; let the
	// modification time differ).
	// The files are looked at once every fileCheckInterval.
	time.Sleep(10 * time.Millisecond)
	if _, _, _, err := sea.a.WriteCertificate(n1, "node-1", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fileCheckInterval)
	second := serial()
	if second == first {
		t.Fatal("the renewed certificate was not picked up")
	}
	// A certificate whose key is not there yet: the old pair is served.
	certPEM, _, err := sea.a.IssueCertificate("node-1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n1, NodeCertFile), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fileCheckInterval)
	if got := serial(); got != second {
		t.Fatalf("with a mismatched key the server served %s, want the previous %s", got, second)
	}
	// The client's CA file now names another CA: the sea's servers are
	// refused.
	other := newTestSea(t)
	data, err := os.ReadFile(other.a.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n2, CACertFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fileCheckInterval)
	if _, err := tls.Dial("tcp", "127.0.0.1:1", client); err == nil {
		t.Fatal("dialled a closed port")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = tls.Server(c, server).Handshake()
			c.Close()
		}
	}()
	if c, err := tls.Dial("tcp", ln.Addr().String(), client); !errors.Is(err, ErrNotInSea) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a client whose CA changed: %v", err)
	}
}

// TestFindCA finds the CA a working directory's clients use: none before
// there is an authority, the authority's, that of the authority
// POND_AUTHORITY names (whose tokens FindToken then makes), and
// POND_TLS_CA.
func TestFindCA(t *testing.T) {
	wd := t.TempDir()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if f := FindCA(getenv, wd); f != "" {
		t.Fatalf("no authority, CA %q", f)
	}
	if cfg, err := FindClientTLS(getenv, wd); cfg != nil || err != nil {
		t.Fatalf("no authority: %v %v", cfg, err)
	}
	a, err := OpenAuthority(filepath.Join(wd, filepath.FromSlash(AuthorityDir)))
	if err != nil {
		t.Fatal(err)
	}
	if f := FindCA(getenv, wd); f != "" {
		t.Fatalf("an authority that issued no certificate: CA %q", f)
	}
	if _, _, err := a.IssueCertificate("n", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if f := FindCA(getenv, wd); f != a.CAFile() {
		t.Fatalf("CA %q, want %q", f, a.CAFile())
	}
	// Another directory's authority, the sea's: its CA, and tokens it
	// signs.
	other := t.TempDir()
	b, err := OpenAuthority(filepath.Join(other, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.IssueCertificate("n", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	env["POND_AUTHORITY"] = b.Dir()
	if f := FindCA(getenv, wd); f != b.CAFile() {
		t.Fatalf("with POND_AUTHORITY, CA %q, want %q", f, b.CAFile())
	}
	tok, err := FindToken(getenv, wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verifier().Verify(tok); err != nil {
		t.Fatalf("with POND_AUTHORITY, the token is not of that authority: %v", err)
	}
	if _, err := a.Verifier().Verify(tok); err == nil {
		t.Fatal("with POND_AUTHORITY, the token is of the working directory's authority")
	}
	env["POND_TLS_CA"] = filepath.Join(wd, "nope.pem")
	if _, err := FindClientTLS(getenv, wd); err == nil || !strings.Contains(err.Error(), "nope.pem") {
		t.Fatalf("a missing POND_TLS_CA: %v", err)
	}
}

// BenchmarkHandshake measures one mutual TLS handshake between two nodes
// of a sea over loopback TCP: what the sea's certificates cost a new
// connection (agents keep theirs open).
func BenchmarkHandshake(b *testing.B) {
	sea := &testSea{dir: b.TempDir()}
	var err error
	if sea.a, err = OpenAuthority(filepath.Join(sea.dir, "auth")); err != nil {
		b.Fatal(err)
	}
	mk := func(name string) (server, client *tls.Config) {
		dir := filepath.Join(sea.dir, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		cert, key, ca, err := sea.a.WriteCertificate(dir, name, nil, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		if server, err = ServerTLS(cert, key, ca); err != nil {
			b.Fatal(err)
		}
		if client, err = ClientTLS(ca, cert, key); err != nil {
			b.Fatal(err)
		}
		return server, client
	}
	server, _ := mk("node-1")
	_, client := mk("node-2")
	server = server.Clone()
	server.ClientAuth = tls.RequireAnyClientCert
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := tls.Server(c, server)
				if tc.Handshake() == nil {
					_, _ = tc.Write([]byte("ok"))
				}
				tc.Close()
			}()
		}
	}()
	b.ResetTimer()
	for range b.N {
		c, err := tls.Dial("tcp", ln.Addr().String(), client)
		if err != nil {
			b.Fatal(err)
		}
		var buf [2]byte
		if _, err := io.ReadFull(c, buf[:]); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// TestFileCacheLooksOncePerInterval checks that a file cache serves its
// value without looking at its files again within fileCheckInterval, and
// loads a changed file at the first look after it.
func TestFileCacheLooksOncePerInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "value")
	if err := os.WriteFile(path, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	loads := 0
	c := fileCache[string]{paths: []string{path}, load: func() (string, error) {
		loads++
		b, err := os.ReadFile(path)
		return string(b), err
	}}
	if v, err := c.get(); err != nil || v != "a" {
		t.Fatalf("first get: %q, %v", v, err)
	}
	looked := time.Now()
	if err := os.WriteFile(path, []byte("bb"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := c.get()
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(looked) < fileCheckInterval/2 && (v != "a" || loads != 1) {
		t.Errorf("within the interval: %q after %d loads, want the value served, %q after 1", v, loads, "a")
	}
	time.Sleep(fileCheckInterval)
	if v, err := c.get(); err != nil || v != "bb" {
		t.Fatalf("after the interval: %q, %v; want the changed file's %q", v, err, "bb")
	}
}

// BenchmarkServerCertificate asks for a server's certificate as TLS
// handshakes do, from every processor at once.
func BenchmarkServerCertificate(b *testing.B) {
	sea := newTestSea(b)
	dir := sea.node(b, "node-1", time.Hour)
	c, err := newCertCache(filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile))
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.get(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
