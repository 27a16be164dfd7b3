package agent

import (
	"fmt"
	"path/filepath"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/health"
	"github.com/pond-htc/pond/overlay/machinead"
	"github.com/pond-htc/pond/overlay/nodedaemons"
)

// startDaemons starts the daemons, reporting to the node's CONDOR_HOST,
// and serves their routes under wire.PathPrefix.
func (a *Agent) startDaemons() error {
	c := nodedaemons.New(a.cfg.ConfigFile, a.cfg.Role, a.cfg.Pool, a.daemonKnobs(), a.logger)
	cfg, err := c.Config()
	if err != nil {
		return fmt.Errorf("condor configuration: %w", err)
	}
	attrs := machinead.StartdAttrs(a.ad.Static, a.APIAddr(), a.Reach(), a.RelayName())
	dir := ""
	if a.cfg.DataDir != "" {
		dir = filepath.Join(a.cfg.DataDir, "condor")
	}
	quarantines := &health.Quarantines{DataDir: a.cfg.DataDir, SetTags: a.SetTags, Logger: a.logger}
	quarantine, err := quarantines.Load()
	if err != nil {
		return fmt.Errorf("starting the daemons: %w", err)
	}
	m, err := daemon.Start(a.ctx, daemon.Options{
		Config:  cfg,
		Name:    a.cfg.Name,
		Address: a.APIAddr(),
		DataDir: dir,
		Logger:  a.logger.With("component", "condor"),
		Attrs:   attrs,
		Reload:  c.Config,
		// The daemons check tokens as the agent's API does, and present
		// the node's token to other daemons.
		Verifier: a.verifier,
		Token:    a.token,
		TLS:      a.clientTLS,
		// A quarantine shows in the node's tags and its API.
		OnQuarantine: quarantines.Changed,
		Quarantine:   quarantine,
		// The schedd flocks to the pools the central manager finds
		// willing (startFlock).
		FlockTargets: a.flockTargets,
		// The collector takes flocked submitters only from the pools
		// the pool's flocks accept.
		AcceptSubmitters: a.acceptSubmitters,
	})
	if err != nil {
		return fmt.Errorf("starting the daemons: %w", err)
	}
	c.Master = m
	a.daemons = c
	a.mux.Handle(wire.PathPrefix, m.Handler())
	if quarantine != nil {
		// Shown again in the node's tags, as when it began.
		quarantines.Changed(quarantine)
	}
	return nil
}
