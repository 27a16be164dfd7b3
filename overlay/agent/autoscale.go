package agent

import (
	"context"
	"strconv"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/autoscale"
)

// The agent is the node its pond policy acts for.
var _ autoscale.Node = (*Agent)(nil)

// startAutoscale starts the pond policy when the agent's configuration
// turns it on (POND_POLICY = true) and the node runs a schedd. Its state is
// served at GET /v1/policy.
func (a *Agent) startAutoscale() error {
	enabled, cfg, err := autoscale.ParseConfig(a.cfg.Knob)
	if err != nil || !enabled {
		return err
	}
	if !a.daemons.Runs(daemon.Schedd) {
		a.logger.Warn("pond policy: the node runs no schedd; the policy stays off")
		return nil
	}
	pool := &autoscale.WirePool{Schedd: a.APIAddr(), CentralManager: a.CondorHost, Token: a.token, TLS: a.clientTLS}
	p, err := autoscale.New(a, pool, autoscale.Options{
		Name:    a.cfg.Name,
		API:     a.APIAddr(),
		Token:   a.token,
		TLS:     a.clientTLS,
		DataDir: a.cfg.DataDir,
		Config:  cfg,
		Logger:  a.logger,
	})
	if err != nil {
		return err
	}
	a.policy = p
	a.fastInterval = strconv.FormatFloat(cfg.MinInterval.Seconds(), 'f', -1, 64)
	a.logger.Info("pond policy on", "max_members", cfg.MaxMembers, "max_ponds", cfg.MaxPonds,
		"query_interval", cfg.QueryInterval, "grace", cfg.Grace)
	a.bg.Go(func() { p.Run(a.ctx) })
	return nil
}

// Query implements autoscale.Node: it runs a tree query with the node as
// root.
func (a *Agent) Query(ctx context.Context, q api.Query) (*api.Answer, error) {
	return a.tree.Query(ctx, q)
}

// FastNegotiation implements autoscale.Node: while on, the negotiator runs
// its cycles at the policy's NEGOTIATOR_MIN_INTERVAL.
func (a *Agent) FastNegotiation(ctx context.Context, on bool) error {
	v := ""
	if on {
		v = a.fastInterval
	}
	return a.daemons.Set(map[string]string{"NEGOTIATOR_MIN_INTERVAL": v})
}
