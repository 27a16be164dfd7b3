package agent

import (
	"context"
	"net"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/schedd"
)

// fsScopes is what a local user FS proves may do: read, and manage its
// own jobs (WRITE, as on the API); root, HTCondor's queue super user, may
// manage anyone's (ADMINISTRATOR).
func fsScopes(uid uint32) []auth.Scope {
	if uid == 0 {
		return []auth.Scope{auth.Read, auth.Write, auth.Administrator}
	}
	return []auth.Scope{auth.Read, auth.Write}
}

// cedarCommands are the CEDAR commands of the node's collector and schedd,
// each following the daemon its master runs now.
func (a *Agent) cedarCommands() map[int]cedar.Command {
	cmds := collector.CedarCommands(collector.CedarOptions{
		Current: func() *collector.Collector {
			if a.daemons == nil || a.daemons.master == nil {
				return nil
			}
			return a.daemons.master.Collector()
		},
		Name:    a.cfg.Name,
		Address: a.APIAddr,
	})
	for n, c := range schedd.CedarCommands(func() *schedd.Schedd {
		if a.daemons == nil || a.daemons.master == nil {
			return nil
		}
		return a.daemons.master.Schedd()
	}) {
		cmds[n] = c
	}
	return cmds
}

// cedarListener shares the API's port with CEDAR, so that HTCondor's own
// clients reach the node's collector at the agent's address
// (CONDOR_HOST = the API address): a connection whose first byte starts a
// CEDAR packet goes to the CEDAR server, every other one (TLS, HTTP) to
// the API. A client proves who it is with FS (same host); any local user
// so proven may read, as the READ scope allows on the API.
func (a *Agent) cedarListener(ctx context.Context, ln net.Listener) net.Listener {
	srv := cedar.NewServer(cedar.Options{
		Methods: []cedar.Method{&cedar.FS{Domain: a.cfg.Name, Grant: func(uid uint32, user string) *auth.Claims {
			return &auth.Claims{Subject: user + "@" + a.cfg.Name, Scopes: fsScopes(uid)}
		}}},
		Commands: a.cedarCommands(),
		Logger:   a.logger.With("component", "cedar"),
	})
	return cedar.Split(ctx, ln, srv, cedar.SplitOptions{Logger: a.logger.With("component", "cedar")})
}
