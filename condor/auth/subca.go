package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A delegated CA is an intermediate certificate authority the authority
// issues to a program that must give certificates to nodes it starts
// without holding the sea's CA key: the pilot factory of a central
// manager, which gives each glidein a certificate as it gives it a token
// with its delegated key (Delegate). The intermediate may only certify
// node names that start with its prefix, for at most its own short life,
// and no further CA: peers check that in every handshake (poolCache.verify).
//
// Go's crypto/x509 enforces name constraints on the subject alternative
// names only, and on a URI only its host, while pond's node certificates
// name pond://ISSUER/NAME (and NAME as the common name). So the
// intermediate carries x509 name constraints that Go enforces (URIs of
// the issuer's host only; no DNS name, IP address or e-mail address at
// all) and names its prefix as its own URI, pond://ISSUER/PREFIX*, which
// the sea's peers enforce on top of Go: a leaf below an intermediate must
// name exactly pond://ISSUER/NAME with NAME its common name and under the
// prefix, must not be a CA, and must not outlive any certificate above it.

// noDomain is the only DNS domain and e-mail domain a delegated CA may
// certify: a reserved name (RFC 6761) no certificate names, so none may.
const noDomain = "pond.invalid"

// SubCA is a delegated CA: its certificate, its key, and the names it may
// certify.
type SubCA struct {
	// Cert is the intermediate certificate.
	Cert *x509.Certificate
	// Issuer is the sea's issuer, the host of its nodes' pond:// URIs.
	Issuer string
	// Prefix starts every node name it may certify.
	Prefix string
	key    ed25519.PrivateKey
}

// checkPrefix reports what is wrong with a delegated CA's name prefix.
func checkPrefix(prefix string) error {
	if len(prefix) < 2 {
		return fmt.Errorf("name prefix %q: want at least two characters", prefix)
	}
	for _, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("name prefix %q: %q is not a letter, digit, '-', '_' or '.'", prefix, r)
		}
	}
	return nil
}

// DelegateCA issues an intermediate CA certificate that may certify node
// names starting with prefix (such as "pond-campus-", a pool's glideins),
// valid for lifetime (bounded by the sea's CA), and returns it with its
// new key as one PEM file (certificate, then key), for ReadSubCA: the
// caller gives it to the program that issues with it (the factory's
// -factory-ca), mode 0600. A CA made before delegation existed allows no
// intermediate (path length 0): DelegateCA then adds a certificate of the
// same CA key that allows one to the CA file, which every node must be
// given again, as after a CA rotation.
func (a *Authority) DelegateCA(prefix string, lifetime time.Duration) ([]byte, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("delegated CA: %w", err)
	}
	if lifetime <= 0 {
		return nil, errors.New("delegated CA: the lifetime must be more than zero")
	}
	var parent *ca
	err := a.locked(func() error {
		c, err := a.caFiles()
		if err != nil {
			return err
		}
		parent, err = a.delegatingCA(c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("authority %s: %w", a.dir, err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: prefix + "* delegated CA", Organization: []string{"pond"}},
		URIs:                        []*url.URL{{Scheme: "pond", Host: a.issuer, Path: "/" + prefix + "*"}},
		NotBefore:                   now.Add(-certSkew),
		NotAfter:                    now.Add(lifetime),
		KeyUsage:                    x509.KeyUsageCertSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedURIDomains:         []string{a.issuer},
		PermittedDNSDomains:         []string{noDomain},
		PermittedEmailAddresses:     []string{noDomain},
		ExcludedIPRanges:            []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
	}
	if tmpl.NotAfter.After(parent.cert.NotAfter) {
		tmpl.NotAfter = parent.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent.cert, pub, parent.key)
	if err != nil {
		return nil, fmt.Errorf("issuing the delegated CA %s*: %w", prefix, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: privateBlock, Bytes: keyDER})...), nil
}

// delegatingCA returns a certificate of the CA key c that allows one
// intermediate, adding one to the CA file if there is none. The caller
// holds the directory's lock.
func (a *Authority) delegatingCA(c *ca) (*ca, error) {
	certPath := filepath.Join(a.dir, CACertFile)
	certs, err := ReadCertificates(certPath)
	if err != nil {
		return nil, err
	}
	for _, cert := range certs {
		if pub, ok := cert.PublicKey.(ed25519.PublicKey); ok && pub.Equal(c.key.Public()) &&
			cert.MaxPathLen >= 1 && time.Now().Before(cert.NotAfter) {
			return &ca{cert: cert, key: c.key}, nil
		}
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               c.cert.Subject,
		SubjectKeyId:          c.cert.SubjectKeyId,
		NotBefore:             time.Now().Add(-certSkew),
		NotAfter:              c.cert.NotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, c.key.Public(), c.key)
	if err != nil {
		return nil, fmt.Errorf("making a CA certificate that allows delegation: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	if err := WriteFile(certPath, append(data, pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: der})...), 0o600); err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: c.key}, nil
}

// ReadSubCA reads a delegated CA's file (DelegateCA): its certificate and
// its key.
func ReadSubCA(path string) (*SubCA, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	var keys [][]byte
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		switch b.Type {
		case certBlock:
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			certs = append(certs, c)
		case privateBlock:
			keys = append(keys, b.Bytes)
		default:
			return nil, fmt.Errorf("%s: a %q block in a delegated CA's file", path, b.Type)
		}
	}
	if len(trimSpace(data)) != 0 {
		return nil, errors.New(path + ": not a PEM file")
	}
	if len(certs) != 1 || len(keys) != 1 {
		return nil, fmt.Errorf("%s: want one certificate and one key, not %d and %d", path, len(certs), len(keys))
	}
	k, err := x509.ParsePKCS8PrivateKey(keys[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	cert := certs[0]
	if pub, ok := cert.PublicKey.(ed25519.PublicKey); !ok || !pub.Equal(priv.Public()) {
		return nil, fmt.Errorf("%s: the key is not the certificate's", path)
	}
	issuer, prefix, err := delegatedNames(cert)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &SubCA{Cert: cert, Issuer: issuer, Prefix: prefix, key: priv}, nil
}

// delegatedNames returns the issuer and the name prefix a delegated CA
// certificate names (pond://ISSUER/PREFIX*).
func delegatedNames(c *x509.Certificate) (issuer, prefix string, err error) {
	if !c.IsCA || len(c.URIs) != 1 || c.URIs[0].Scheme != "pond" || !strings.HasSuffix(c.URIs[0].Path, "*") {
		return "", "", fmt.Errorf("certificate %q is no delegated CA of a sea (pond://ISSUER/PREFIX*)", c.Subject.CommonName)
	}
	prefix = strings.TrimSuffix(strings.TrimPrefix(c.URIs[0].Path, "/"), "*")
	if err := checkPrefix(prefix); err != nil {
		return "", "", fmt.Errorf("certificate %q: %w", c.Subject.CommonName, err)
	}
	return c.URIs[0].Host, prefix, nil
}

// Issue makes a node certificate for name, which must start with the
// CA's prefix, and its key (both PEM; the certificate file holds the
// intermediate after the leaf, so peers can verify the chain), valid for
// TLS servers and clients for lifetime, bounded by the intermediate's
// life. It names no host: peers verify membership, not addresses.
func (s *SubCA) Issue(name string, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	if !strings.HasPrefix(name, s.Prefix) || len(name) == len(s.Prefix) {
		return nil, nil, fmt.Errorf("delegated CA %s*: may not certify %q", s.Prefix, name)
	}
	if lifetime <= 0 {
		return nil, nil, errors.New("a certificate's lifetime must be more than zero")
	}
	now := time.Now()
	if !now.Before(s.Cert.NotAfter) {
		return nil, nil, fmt.Errorf("delegated CA %s*: expired at %s", s.Prefix, s.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"pond"}},
		URIs:         []*url.URL{{Scheme: "pond", Host: s.Issuer, Path: "/" + name}},
		NotBefore:    now.Add(-certSkew),
		NotAfter:     now.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if tmpl.NotAfter.After(s.Cert.NotAfter) {
		tmpl.NotAfter = s.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.Cert, pub, s.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing a certificate for %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: s.Cert.Raw})...),
		pem.EncodeToMemory(&pem.Block{Type: privateBlock, Bytes: keyDER}), nil
}

// checkChain enforces what Go's verification does not, on a chain it
// verified (leaf first, root last): the leaf is no CA and outlives no
// certificate above it, and a leaf below a delegated CA names exactly
// pond://ISSUER/NAME, NAME its common name and under the CA's prefix.
func checkChain(chain []*x509.Certificate) error {
	leaf := chain[0]
	if leaf.IsCA {
		return errors.New("a CA certificate is no node's")
	}
	for _, c := range chain[1:] {
		if leaf.NotAfter.After(c.NotAfter) {
			return fmt.Errorf("it outlives its issuer %q (%s after %s)", c.Subject.CommonName,
				leaf.NotAfter.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	if len(chain) <= 2 {
		return nil
	}
	for _, inter := range chain[1 : len(chain)-1] {
		issuer, prefix, err := delegatedNames(inter)
		if err != nil {
			return err
		}
		name := leaf.Subject.CommonName
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != (&url.URL{Scheme: "pond", Host: issuer, Path: "/" + name}).String() ||
			len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
			return fmt.Errorf("a certificate below the delegated CA %s* must name exactly pond://%s/%s", prefix, issuer, name)
		}
		if !strings.HasPrefix(name, prefix) || len(name) == len(prefix) {
			return fmt.Errorf("the delegated CA %s* may not certify %q", prefix, name)
		}
	}
	return nil
}
