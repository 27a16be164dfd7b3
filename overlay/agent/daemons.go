package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/health"
	"github.com/pond-htc/pond/overlay/machinead"
)

// daemons hosts the node's HTCondor-compatible daemons under its master,
// configured from the agent's configuration file and the knobs the agent
// sets at run time.
type daemons struct {
	agent  *Agent
	master *daemon.Master

	mu    sync.Mutex
	extra map[string]string // knobs set at run time (CONDOR_HOST, NEGOTIATOR_MIN_INTERVAL)
	// stamps are the machine attributes a pond stamps on its members
	// (name -> ClassAd expression text), added to STARTD_ATTRS.
	stamps map[string]string
}

// daemonsFor is the DAEMON_LIST of a node that does not set one: a central
// manager and a free node (its own central manager) run everything; a pool
// member runs a schedd and a startd that report to its central manager.
func daemonsFor(role, pool string) string {
	if role == api.RoleCM || pool == "" {
		return "MASTER COLLECTOR NEGOTIATOR SCHEDD STARTD"
	}
	return "MASTER SCHEDD STARTD"
}

// config builds the daemons' configuration: the agent's file, the DAEMON_LIST
// of its role when the file sets none, and the knobs set at run time.
func (c *daemons) config() (*config.Config, error) {
	var cfg *config.Config
	if path := c.agent.cfg.ConfigFile; path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
	} else {
		cfg = config.New(config.Options{})
	}
	if err := machinead.RefuseSecretAttrs(cfg.Get); err != nil {
		return nil, err
	}
	if src, ok := cfg.Source("DAEMON_LIST"); !ok || src.File == "<default>" {
		if err := cfg.Set("DAEMON_LIST", daemonsFor(c.agent.cfg.Role, c.agent.cfg.Pool)); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.extra {
		if err := cfg.Set(k, v); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	if len(c.stamps) > 0 {
		names := make([]string, 0, len(c.stamps))
		for k := range c.stamps {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if err := cfg.Set(k, c.stamps[k]); err != nil {
				return nil, fmt.Errorf("pond attribute %s: %w", k, err)
			}
		}
		base, _ := cfg.Get("STARTD_ATTRS")
		if err := cfg.Set("STARTD_ATTRS", strings.TrimSpace(base+" "+strings.Join(names, " "))); err != nil {
			return nil, fmt.Errorf("STARTD_ATTRS: %w", err)
		}
	}
	return cfg, nil
}

// setStamps replaces the pond attributes the startd advertises; they take
// effect at the next reconfiguration.
func (c *daemons) setStamps(stamps map[string]string) {
	c.mu.Lock()
	c.stamps = stamps
	c.mu.Unlock()
}

// runs reports whether the daemons' configuration runs daemon.
func (c *daemons) runs(name string) bool {
	for _, d := range c.master.Config().List("DAEMON_LIST") {
		if strings.EqualFold(d, name) {
			return true
		}
	}
	return false
}

// set changes run-time knobs and reconfigures the daemons.
func (c *daemons) set(knobs map[string]string) error {
	c.mu.Lock()
	for k, v := range knobs {
		if v == "" {
			delete(c.extra, k)
		} else {
			c.extra[k] = v
		}
	}
	c.mu.Unlock()
	cfg, err := c.config()
	if err != nil {
		return err
	}
	return c.master.Reconfig(cfg)
}

// setCondorHost moves the daemons to the central manager at addr.
func (c *daemons) setCondorHost(addr string) error {
	return c.set(map[string]string{"CONDOR_HOST": addr})
}

// startDaemons starts the daemons, reporting to the node's CONDOR_HOST,
// and serves their routes under wire.PathPrefix.
func (a *Agent) startDaemons() error {
	c := &daemons{agent: a, extra: a.daemonKnobs()}
	cfg, err := c.config()
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
		Reload:  c.config,
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
	c.master = m
	a.daemons = c
	a.mux.Handle(wire.PathPrefix, m.Handler())
	if quarantine != nil {
		// Shown again in the node's tags, as when it began.
		quarantines.Changed(quarantine)
	}
	return nil
}

// stop stops the daemons, killing the jobs they run, within ten seconds.
func (c *daemons) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.master.Stop(ctx); err != nil {
		c.agent.logger.Warn("stopping the daemons", "err", err)
	}
}

// drain empties the startd before the node leaves a pond; the function it
// returns lets the startd take jobs again.
func (c *daemons) drain(ctx context.Context, evict bool) (api.DrainResult, func()) {
	sd := c.master.Startd()
	if sd == nil {
		return api.DrainResult{}, func() {}
	}
	r := sd.Drain(ctx, evict)
	return api.DrainResult{Finished: r.Finished, Evicted: r.Evicted, Took: r.Took}, sd.Resume
}

// nodeLost tells the node's daemons that the sea declared the node name
// failed or gone.
func (c *daemons) nodeLost(ctx context.Context, name string) {
	if c == nil {
		return
	}
	c.master.NodeLost(ctx, name)
}

// cpusInUse counts the cores of the startd's claimed slots (dynamic and
// static: a partitionable slot lends its cores to its dynamic ones). It
// reports false if the node runs no startd.
func (c *daemons) cpusInUse() (int64, bool) {
	if c == nil {
		return 0, false
	}
	sd := c.master.Startd()
	if sd == nil {
		return 0, false
	}
	var used int64
	for _, slot := range sd.Slots() {
		if typ, _ := slot.EvalAttr("SlotType").StringValue(); typ == "Partitionable" {
			continue
		}
		if state, _ := slot.EvalAttr("State").StringValue(); state != "Claimed" {
			continue
		}
		if n, ok := slot.EvalAttr("Cpus").IntValue(); ok {
			used += n
		}
	}
	return used, true
}
