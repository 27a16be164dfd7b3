package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/metrics"
)

// registerMetrics registers what the agent's /metrics serves besides the
// Go runtime, the process and the pilot factory (startFactory): the
// daemons running now, gossip, the relay, tree queries and the expiry of
// the agent's credentials. Each engine is its own collector.
func (a *Agent) registerMetrics() error {
	cs := []prometheus.Collector{a.daemons.Master, a.sea, a.tree, a.credentials()}
	if a.relay != nil {
		cs = append(cs, a.relay)
	}
	for _, c := range cs {
		if err := a.metrics.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// credentials are the agent's credentials whose expiry /metrics shows:
// the node token (read again as its file changes), the TLS certificate
// and the pilot factory's delegated CA, those the agent has.
func (a *Agent) credentials() metrics.Credentials {
	var cs metrics.Credentials
	if a.cfg.TokenFile != "" {
		cs = append(cs, metrics.Credential{Kind: "node_token", Expiry: func() (time.Time, bool, error) {
			c, err := auth.ReadClaims(a.token())
			if err != nil {
				return time.Time{}, false, err
			}
			return c.Expires, !c.Expires.IsZero(), nil
		}})
	}
	for kind, path := range map[string]string{"tls_certificate": a.cfg.TLSCert, "factory_ca": a.cfg.FactoryCA} {
		if path != "" {
			cs = append(cs, metrics.Credential{Kind: kind, Expiry: func() (time.Time, bool, error) { return metrics.CertificateExpiry(path) }})
		}
	}
	return cs
}
