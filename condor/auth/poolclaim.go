package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// PoolURIScheme is the scheme of the URI by which a node's certificate
// says the authority made the node a member of a pool:
// pond-pool://ISSUER/POOL. Only the sea's CA itself certifies it: a
// certificate below a delegated CA names exactly one URI (checkChain), so
// a pilot factory cannot make a member of any pool.
const PoolURIScheme = "pond-pool"

func poolURI(issuer, pool string) *url.URL {
	return &url.URL{Scheme: PoolURIScheme, Host: issuer, Path: "/" + pool}
}

// checkPoolName refuses a pool name that a URI's path would not carry
// as it is.
func checkPoolName(pool string) error {
	if strings.ContainsAny(pool, "/?#%\\ \t\r\n") {
		return fmt.Errorf("pool name %q: a certificate cannot name it", pool)
	}
	return nil
}

// IssuePoolCertificate is IssueCertificate for a member of pool: the
// certificate also names pond-pool://ISSUER/POOL, which a member of the
// pool checks (CertIdentity) before it follows the node as the pool's
// central manager or takes its flocking announcement.
func (a *Authority) IssuePoolCertificate(name, pool string, hosts []string, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	if pool == "" {
		return nil, nil, errors.New("a pool certificate needs a pool")
	}
	if err := checkPoolName(pool); err != nil {
		return nil, nil, err
	}
	return a.issueCertificate(name, pool, hosts, lifetime)
}

// Identity is what a verified node certificate says of its holder.
type Identity struct {
	// Node is the node's name: the certificate's common name.
	Node string
	// Pool is the pool the sea's CA made it a member of, "" for none.
	Pool string
}

// CertIdentity reads the identity of the leaf of a chain that the sea's
// TLS verified (tls.ConnectionState.PeerCertificates): the node's name and
// the pool its certificate names, if one. A certificate that names two
// pools names none.
func CertIdentity(chain []*x509.Certificate) (Identity, error) {
	if len(chain) == 0 {
		return Identity{}, fmt.Errorf("%w: no certificate", ErrNotInSea)
	}
	leaf := chain[0]
	id := Identity{Node: leaf.Subject.CommonName}
	n := 0
	for _, u := range leaf.URIs {
		if u.Scheme == PoolURIScheme {
			id.Pool = strings.TrimPrefix(u.Path, "/")
			n++
		}
	}
	if n > 1 {
		id.Pool = ""
	}
	return id, nil
}

// RequirePeer returns a copy of cfg that, once cfg's own checks of the
// peer's chain pass, accepts the peer only if check accepts the identity
// its certificate gives (CertIdentity): a client that must reach one node,
// or a member of one pool, and not whoever answers at its address.
func RequirePeer(cfg *tls.Config, check func(Identity) error) *tls.Config {
	cfg = cfg.Clone()
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		id, err := CertIdentity(cs.PeerCertificates)
		if err != nil {
			return err
		}
		return check(id)
	}
	return cfg
}
