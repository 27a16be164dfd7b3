package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Files of the authority's certificate authority.
const (
	// CACertFile holds the sea's CA certificates (PEM, mode 0600, as
	// everything under .pond, although they are no secret): what
	// agents are given with -tls-ca and clients verify agents with. It
	// may hold several; all are trusted (a CA rotation).
	CACertFile = "ca.pem"
	// CAKeyFile holds the key of the CA certificate the authority issues
	// with (mode 0600).
	CAKeyFile = "ca.key"
)

// Files a node keeps its certificate in, in its data directory.
const (
	NodeCertFile = "tls.crt"
	NodeKeyFile  = "tls.key"
)

// caLifetime is how long the authority's CA certificate is valid.
const caLifetime = 10 * 365 * 24 * time.Hour

// certSkew backdates certificates, for the clocks of the nodes.
const certSkew = 5 * time.Minute

// PEM block type of certificates.
const certBlock = "CERTIFICATE"

// ca is the authority's certificate authority: its certificate and key.
type ca struct {
	cert *x509.Certificate
	key  ed25519.PrivateKey
}

// caFiles reads the CA, making its key and self-signed certificate when
// there are none. The CA has a key of its own, not the token signing key:
// the two are rotated apart, and no signature of one kind can be mistaken
// for the other. The caller holds the directory's lock.
func (a *Authority) caFiles() (*ca, error) {
	keyPath, certPath := filepath.Join(a.dir, CAKeyFile), filepath.Join(a.dir, CACertFile)
	k, err := ReadSigningKey(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return a.newCA(keyPath, certPath)
	}
	if err != nil {
		return nil, err
	}
	certs, err := ReadCertificates(certPath)
	if err != nil {
		return nil, err
	}
	for _, c := range certs {
		if pub, ok := c.PublicKey.(ed25519.PublicKey); ok && pub.Equal(k.Public()) {
			return &ca{cert: c, key: k.priv}, nil
		}
	}
	return nil, fmt.Errorf("%s: no certificate of the CA key %s", certPath, keyPath)
}

// newCA makes the CA's key and certificate: the certificate first, so that
// a crash between the two leaves no key without its certificate.
func (a *Authority) newCA(keyPath, certPath string) (*ca, error) {
	k, err := NewSigningKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: a.issuer + " sea CA", Organization: []string{"pond"}},
		NotBefore:             now.Add(-certSkew),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// One delegated CA may stand between it and a node (DelegateCA).
		MaxPathLen: 1,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k.priv)
	if err != nil {
		return nil, fmt.Errorf("making the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePEM(certPath, []*pem.Block{{Type: certBlock, Bytes: der}}, 0o600); err != nil {
		return nil, err
	}
	if err := WriteSigningKey(keyPath, k); err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: k.priv}, nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// CAFile is the path of the sea's CA certificates (CACertFile).
func (a *Authority) CAFile() string { return filepath.Join(a.dir, CACertFile) }

// IssueCertificate makes a certificate and its key (both PEM) for the
// node or client name, valid for lifetime and for TLS servers and clients
// alike. Its subject's common name is name, and it names
// pond://ISSUER/name as a URI; hosts are its DNS names and IP addresses.
// What a peer verifies is that the certificate comes from the sea's CA,
// not the host names: they are there for other TLS clients.
func (a *Authority) IssueCertificate(name string, hosts []string, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	return a.issueCertificate(name, "", hosts, lifetime)
}

// issueCertificate is IssueCertificate, for a member of pool when pool is
// not empty (see IssuePoolCertificate).
func (a *Authority) issueCertificate(name, pool string, hosts []string, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	if name == "" {
		return nil, nil, errors.New("a certificate needs a name")
	}
	if lifetime <= 0 {
		return nil, nil, errors.New("a certificate's lifetime must be more than zero")
	}
	var c *ca
	if err := a.locked(func() (err error) { c, err = a.caFiles(); return err }); err != nil {
		return nil, nil, fmt.Errorf("authority %s: %w", a.dir, err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"pond"}},
		URIs:         []*url.URL{{Scheme: "pond", Host: a.issuer, Path: "/" + name}},
		NotBefore:    now.Add(-certSkew),
		NotAfter:     now.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if tmpl.NotAfter.After(c.cert.NotAfter) {
		tmpl.NotAfter = c.cert.NotAfter
	}
	if pool != "" {
		tmpl.URIs = append(tmpl.URIs, poolURI(a.issuer, pool))
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing a certificate for %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: privateBlock, Bytes: keyDER}), nil
}

// WriteCertificate issues a certificate for name and hosts (see
// IssueCertificate) into dir: NodeCertFile, NodeKeyFile (mode 0600) and a
// copy of the CA certificates, CACertFile. It returns the three paths.
func (a *Authority) WriteCertificate(dir, name string, hosts []string, lifetime time.Duration) (certFile, keyFile, caFile string, err error) {
	return a.WritePoolCertificate(dir, name, "", hosts, lifetime)
}

// WritePoolCertificate is WriteCertificate for a member of pool (see
// IssuePoolCertificate); an empty pool claims none.
func (a *Authority) WritePoolCertificate(dir, name, pool string, hosts []string, lifetime time.Duration) (certFile, keyFile, caFile string, err error) {
	if err := checkPoolName(pool); err != nil {
		return "", "", "", err
	}
	certPEM, keyPEM, err := a.issueCertificate(name, pool, hosts, lifetime)
	if err != nil {
		return "", "", "", err
	}
	caPEM, err := os.ReadFile(a.CAFile())
	if err != nil {
		return "", "", "", err
	}
	certFile, keyFile, caFile = filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile), filepath.Join(dir, CACertFile)
	// The key first: a server that sees the new certificate finds its key.
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{keyFile, keyPEM, 0o600}, {certFile, certPEM, 0o600}, {caFile, caPEM, 0o600}} {
		if err := WriteFile(f.path, f.data, f.mode); err != nil {
			return "", "", "", err
		}
	}
	return certFile, keyFile, caFile, nil
}

// ReadCertificates reads the PEM certificates of a file.
func ReadCertificates(path string) ([]*x509.Certificate, error) {
	blocks, err := readPEM(path, certBlock)
	if err != nil {
		return nil, err
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s: no certificate", path)
	}
	out := make([]*x509.Certificate, 0, len(blocks))
	for _, der := range blocks {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// FindAuthorityDir returns the directory of the authority of the sea a
// working directory manages: the one POND_AUTHORITY names, for a working
// directory whose pools join a sea another one made, else its own
// AuthorityDir. getenv reads the environment.
func FindAuthorityDir(getenv func(string) string, workDir string) string {
	if d := getenv("POND_AUTHORITY"); d != "" {
		return d
	}
	return filepath.Join(workDir, filepath.FromSlash(AuthorityDir))
}

// FindCA returns the CA file a client of a working directory verifies
// agents with: POND_TLS_CA, else the CACertFile of FindAuthorityDir when
// there is one, else "" (the client speaks plain HTTP). getenv reads the
// environment.
func FindCA(getenv func(string) string, workDir string) string {
	if f := getenv("POND_TLS_CA"); f != "" {
		return f
	}
	path := filepath.Join(FindAuthorityDir(getenv, workDir), CACertFile)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	return ""
}

// FindClientTLS returns the TLS configuration a client of a working
// directory (pondctl, the providers) calls agents with: ClientTLS of
// FindCA's file, without a certificate of its own; nil when there is no
// CA.
func FindClientTLS(getenv func(string) string, workDir string) (*tls.Config, error) {
	caFile := FindCA(getenv, workDir)
	if caFile == "" {
		return nil, nil
	}
	return ClientTLS(caFile, "", "")
}

// ServerTLS returns the TLS configuration of a server of the sea: it
// presents the certificate in certFile with the key in keyFile, and asks
// clients for theirs, which must then come from a CA of caFile. A client
// without a certificate is let through (a pondctl that holds only a
// token): the handler finds a verified certificate in
// Request.TLS.PeerCertificates. Set ClientAuth to
// tls.RequireAnyClientCert for a server that only the sea's nodes may
// call. The three files are read again when they change, so a node's
// certificate is renewed without a restart.
func ServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	certs, err := newCertCache(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	pool, err := newPoolCache(caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return certs.get()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil // ClientAuth decides whether one is needed
			}
			return pool.verify(cs.PeerCertificates, x509.ExtKeyUsageClientAuth, "client")
		},
	}, nil
}

// ClientTLS returns the TLS configuration of a client of the sea: it
// talks only to servers whose certificate comes from a CA of caFile,
// whatever their address (a node's address may change; membership in the
// sea is what is proven), and presents the certificate in certFile with
// the key in keyFile when they are given (mutual TLS between nodes). The
// files are read again when they change.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := newPoolCache(caFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is verified by VerifyConnection, against the sea's
		// CA and without the host name: see the comment above.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return pool.verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth, "server")
		},
	}
	if certFile != "" || keyFile != "" {
		certs, err := newCertCache(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return certs.get()
		}
	}
	return cfg, nil
}

// RefuseTLS returns a client TLS configuration whose every handshake
// fails with err before anything is sent: for a client that could not
// read the sea's CA, which must not fall back to plain text.
func RefuseTLS(err error) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // every server is refused below
		VerifyConnection:   func(tls.ConnectionState) error { return err },
	}
}

// ErrNotInSea is the error of a TLS handshake with a peer whose
// certificate does not come from the sea's CA.
var ErrNotInSea = errors.New("the peer did not prove it belongs to the sea")

// poolCache holds the CA certificates of a file, read again when it changes.
type poolCache struct {
	path  string
	cache fileCache[*x509.CertPool]
}

func newPoolCache(path string) (*poolCache, error) {
	if path == "" {
		return nil, errors.New("TLS: no CA file")
	}
	p := &poolCache{path: path}
	p.cache = fileCache[*x509.CertPool]{paths: []string{path}, load: func() (*x509.CertPool, error) {
		certs, err := ReadCertificates(path)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		for _, c := range certs {
			pool.AddCert(c)
		}
		return pool, nil
	}}
	if _, err := p.cache.get(); err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	return p, nil
}

// verify checks that chain (leaf first) leads to a CA of the pool and that
// its leaf may serve as usage.
func (p *poolCache) verify(chain []*x509.Certificate, usage x509.ExtKeyUsage, role string) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: the %s presented no certificate", ErrNotInSea, role)
	}
	pool, err := p.cache.get()
	if err != nil {
		return fmt.Errorf("TLS CA: %w", err)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	chains, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("%w: the %s's certificate (%s) is not valid for the CA of %s: %w", ErrNotInSea, role, chain[0].Subject.CommonName, p.path, err)
	}
	// Go verified the signatures, lifetimes, usages and the name
	// constraints on alternative names; pond's own rules come on top
	// (checkChain), and one chain that keeps them is enough.
	for _, c := range chains {
		if err = checkChain(c); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: the %s's certificate (%s): %w", ErrNotInSea, role, chain[0].Subject.CommonName, err)
}

// certCache holds a certificate and its key, read again when either file
// changes.
type certCache struct {
	cache fileCache[*tls.Certificate]
}

func newCertCache(certFile, keyFile string) (*certCache, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS: a certificate needs both its certificate and its key file")
	}
	c := &certCache{cache: fileCache[*tls.Certificate]{paths: []string{certFile, keyFile}, load: func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		return &cert, nil
	}}}
	if _, err := c.cache.get(); err != nil {
		return nil, fmt.Errorf("TLS certificate %s: %w", certFile, err)
	}
	return c, nil
}

func (c *certCache) get() (*tls.Certificate, error) { return c.cache.get() }

// fileCache is a value loaded from files, loaded again when any of them
// changes (size or modification time), which it checks at most once every
// fileCheckInterval: every TLS handshake asks for the certificate, and a
// check is a stat of each file, made with the cache locked. Hundreds of
// handshakes at once (a central manager's agents reconnecting) queued
// behind each other's stats. A load that fails keeps the last good value,
// and is tried again at the next check: a certificate caught half-written
// keeps the old one served.
type fileCache[T any] struct {
	paths []string
	load  func() (T, error)

	mu      sync.Mutex
	checked time.Time // when the files were last looked at
	stamps  []fileStamp
	val     T
	ok      bool
}

// fileCheckInterval is how often a fileCache looks at its files: a
// certificate or CA renewed on disk is served or trusted within it.
const fileCheckInterval = time.Second

type fileStamp struct {
	mod  time.Time
	size int64
}

func (c *fileCache[T]) get() (T, error) { return c.look(false) }

// look is get, looking at the files whatever the time since the last
// look when fresh.
func (c *fileCache[T]) look(fresh bool) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if !fresh && c.ok && now.Sub(c.checked) < fileCheckInterval && now.After(c.checked) {
		return c.val, nil
	}
	stamps := make([]fileStamp, len(c.paths))
	for i, p := range c.paths {
		if fi, err := os.Stat(p); err == nil {
			stamps[i] = fileStamp{fi.ModTime(), fi.Size()}
		}
	}
	c.checked = now
	if c.ok && equalStamps(stamps, c.stamps) {
		return c.val, nil
	}
	v, err := c.load()
	if err != nil {
		if c.ok {
			return c.val, nil
		}
		return v, err
	}
	c.val, c.ok, c.stamps = v, true, stamps
	return v, nil
}

func equalStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}
