package agent

import (
	"context"
	"net"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/overlay/cedarport"
)

// cedar is how the agent's CEDAR clients authenticate (cedarport.Methods).
func (c *Config) cedar() cedarport.Config {
	return cedarport.Config{Name: c.Name, HTCondorKey: c.HTCondorKey, TokenIssuer: c.TokenIssuer, TrustedKeys: c.TrustedKeys,
		TLSCert: c.TLSCert, TLSKey: c.TLSKey, TLSCA: c.TLSCA, Leeway: tokenLeeway}
}

// cedarListener shares the API's port with CEDAR (cedarport.Listener).
func (a *Agent) cedarListener(ctx context.Context, ln net.Listener) net.Listener {
	master := func() *daemon.Master {
		if a.daemons == nil {
			return nil
		}
		return a.daemons.Master
	}
	return cedarport.Listener(ctx, ln, a.cfg.cedar(), a.APIAddr, master, a.logger)
}
