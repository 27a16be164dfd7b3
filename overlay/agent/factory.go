package agent

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/factory"
	"github.com/pond-htc/pond/overlay/knobs"
)

// startFactory starts the pilot factory (factory.Host) on an agent that
// runs its pool's collector, with a data directory to keep its entries
// and journal in (DATA_DIR/factory).
func (a *Agent) startFactory() error {
	if a.cfg.DataDir == "" || a.cfg.Pool == "" || !a.daemons.Runs(daemon.Collector) {
		return nil
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("factory: the agent's binary: %w", err)
	}
	h, err := factory.NewHost(factory.HostConfig{Pool: a.cfg.Pool, DataDir: a.cfg.DataDir, Binary: bin,
		TLS: a.clientTLS != nil, TLSCA: a.cfg.TLSCA, Verifier: a.verifier, TrustedKeys: a.cfg.TrustedKeys,
		TokenIssuer: a.cfg.TokenIssuer, InsecureAPI: a.cfg.InsecureAPI, FactoryKey: a.cfg.FactoryKey,
		FactoryCA: a.cfg.FactoryCA, Encrypt: a.cfg.Encrypt, Knob: knobs.Reader(a.cfg.Knob),
		Source:     &factory.WirePool{CentralManager: a.CondorHost, Token: a.token, TLS: a.clientTLS},
		CondorHost: func() string { return factory.GlideinCondorHost(a.CondorHost(), a.sea.GossipAddr()) }, GossipAddr: func() string { return a.sea.GossipAddr() }, Logger: a.logger})
	if err != nil {
		return err
	}
	if err := a.metrics.Register(h.Factory()); err != nil {
		return fmt.Errorf("factory metrics: %w", err)
	}
	a.factory = h
	a.bg.Go(func() { h.Run(a.ctx) })
	return nil
}

// factoryRoutes serves the factory's routes on an agent that runs one
// (factory.Host.Routes), and the metrics on every agent.
func (a *Agent) factoryRoutes(m routeMux) {
	m.handle("GET "+api.PathMetrics, promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}).ServeHTTP)
	if a.factory == nil {
		return
	}
	routes := a.factory.Routes()
	for _, p := range slices.Sorted(maps.Keys(routes)) {
		m.handle(p, routes[p])
	}
}
