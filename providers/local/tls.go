package local

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"time"
)

// NodeCertLifetime is how long the certificate the provider issues a node
// at each launch is valid.
const NodeCertLifetime = 365 * 24 * time.Hour

// nodeTLS issues the node name a certificate for its addresses into its
// data directory dir, and returns the agent's flags that name the files.
// A member of a pool (pool not empty) has the pool in its certificate
// (auth.IssuePoolCertificate): the proof its pool's members ask for before
// they follow it as central manager or take its flocking announcement.
func (p *Provider) nodeTLS(dir, name, pool string) ([]string, error) {
	a, err := p.authority()
	if err != nil {
		return nil, err
	}
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if ip := net.ParseIP(p.bindAddr); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		hosts = append(hosts, p.bindAddr)
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	cert, key, ca, err := a.WritePoolCertificate(dir, name, pool, hosts, NodeCertLifetime)
	if err != nil {
		return nil, fmt.Errorf("the node's certificate: %w", err)
	}
	return []string{"-tls-cert", cert, "-tls-key", key, "-tls-ca", ca}, nil
}

// clientTLS is the TLS the provider calls agents with: the sea's CA
// (auth.FindClientTLS), once there is one; nil (plain HTTP) before. A CA
// that cannot be read gives a configuration whose every handshake fails
// with the reason, before anything is sent.
func (p *Provider) clientTLS() *tls.Config { return p.tls.Config(p.workDir) }
