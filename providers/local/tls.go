package local

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
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

// nodeClient returns a client of the agent of entry e at its API address
// that talks only to that node: the server's certificate must come from
// the sea's CA and name e.Node. Whoever else answers there (a process
// that took the port the node had, or another node of the sea) fails the
// handshake before anything is sent, so that the provider looks for the
// node where it is now (refreshAddrs) instead of waiting for a stranger.
func (p *Provider) nodeClient(e *entry) *api.Client {
	c := p.client(e.API)
	base := p.clientTLS()
	if base == nil {
		return c
	}
	return c.WithTLS(p.nodeTLSFor(e.Node, base))
}

// nodeTLSFor returns base checking, on top, that the server is node;
// kept by node, so that the clients of one node share connections.
func (p *Provider) nodeTLSFor(node string, base *tls.Config) *tls.Config {
	p.nodeTLSMu.Lock()
	defer p.nodeTLSMu.Unlock()
	if c := p.nodeTLSCfg[node]; c != nil && p.nodeTLSBase == base {
		return c
	}
	if p.nodeTLSBase != base || p.nodeTLSCfg == nil {
		p.nodeTLSBase, p.nodeTLSCfg = base, map[string]*tls.Config{}
	}
	cfg := auth.RequirePeer(base, func(id auth.Identity) error {
		if id.Node != node {
			return fmt.Errorf("%w: the server is node %q, not %q", auth.ErrNotInSea, id.Node, node)
		}
		return nil
	})
	p.nodeTLSCfg[node] = cfg
	return cfg
}

// refreshAddrs reads the addresses the live agent of e last wrote in its
// data directory (api.InfoFile: a relayed worker writes the ones its relay
// gave it), and records them when they changed; it reports whether they
// did.
func (p *Provider) refreshAddrs(e *entry) bool {
	info, err := api.ReadInfo(e.DataDir)
	if err != nil || info.PID != e.PID || (info.API == e.API && info.Gossip == e.Gossip) || info.API == "" {
		return false
	}
	p.logger.Info("the node is at other addresses now", "node", e.Node, "api", info.API, "was", e.API)
	e.API, e.Gossip = info.API, info.Gossip
	if err := p.journal.write(e); err != nil {
		p.logger.Warn("recording the node's new addresses", "node", e.Node, "err", err)
	}
	return true
}
