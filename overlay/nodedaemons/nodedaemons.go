// Package nodedaemons hosts a node's HTCondor-compatible daemons under
// their master (condor/daemon): their configuration, built from the node's
// configuration file, the DAEMON_LIST of its role, the knobs the node sets
// at run time and the attributes its pond stamps; and what the node asks of
// them (reconfigure, drain, learn of lost nodes, count claimed cores).
package nodedaemons

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/machinead"
)

// Daemons hosts the node's HTCondor-compatible daemons under its master,
// configured from the node's configuration file and the knobs the node
// sets at run time.
type Daemons struct {
	// Master is the daemons' master, set once they started (New's
	// caller starts them with Config as their configuration).
	Master *daemon.Master

	configFile, role, pool string
	logger                 *slog.Logger

	mu    sync.Mutex
	extra map[string]string // knobs set at run time (CONDOR_HOST, NEGOTIATOR_MIN_INTERVAL)
	// stamps are the machine attributes a pond stamps on its members
	// (name -> ClassAd expression text), added to STARTD_ATTRS.
	stamps map[string]string
	// credAttrs are the attributes of the node's credentials' expiry
	// (SetCredentialAttrs).
	credAttrs map[string]string
}

// DaemonList is the DAEMON_LIST of a node that does not set one: a central
// manager and a free node (its own central manager) run everything; a pool
// member runs a schedd and a startd that report to its central manager.
func DaemonList(role, pool string) string {
	if role == api.RoleCM || pool == "" {
		return "MASTER COLLECTOR NEGOTIATOR SCHEDD STARTD"
	}
	return "MASTER SCHEDD STARTD"
}

// New is the daemons of a node of role in pool, configured from the
// configuration file configFile ("" for none) and the knobs extra,
// before they start.
func New(configFile, role, pool string, extra map[string]string, logger *slog.Logger) *Daemons {
	return &Daemons{configFile: configFile, role: role, pool: pool, extra: extra, logger: logger}
}

// Config builds the daemons' configuration: the node's file, the DAEMON_LIST
// of its role when the file sets none, and the knobs set at run time.
func (c *Daemons) Config() (*config.Config, error) {
	var cfg *config.Config
	if path := c.configFile; path != "" {
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
		if err := cfg.Set("DAEMON_LIST", DaemonList(c.role, c.pool)); err != nil {
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
	attrs := maps.Clone(c.stamps)
	if attrs == nil {
		attrs = map[string]string{}
	}
	maps.Copy(attrs, c.credAttrs)
	if len(attrs) > 0 {
		names := make([]string, 0, len(attrs))
		for k := range attrs {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if err := cfg.Set(k, attrs[k]); err != nil {
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

// SetStamps replaces the pond attributes the startd advertises; they take
// effect at the next reconfiguration.
func (c *Daemons) SetStamps(stamps map[string]string) {
	c.mu.Lock()
	c.stamps = stamps
	c.mu.Unlock()
}

// SetCredentialAttrs replaces the attributes the startd advertises of
// the node's credentials' expiry (tokenwatch.AdAttrs), beside its pond's
// stamps; they take effect at the next reconfiguration.
func (c *Daemons) SetCredentialAttrs(attrs map[string]string) {
	c.mu.Lock()
	c.credAttrs = attrs
	c.mu.Unlock()
}

// Runs reports whether the daemons' configuration runs daemon.
func (c *Daemons) Runs(name string) bool {
	for _, d := range c.Master.Config().List("DAEMON_LIST") {
		if strings.EqualFold(d, name) {
			return true
		}
	}
	return false
}

// Set changes run-time knobs and reconfigures the daemons.
func (c *Daemons) Set(knobs map[string]string) error {
	c.mu.Lock()
	for k, v := range knobs {
		if v == "" {
			delete(c.extra, k)
		} else {
			c.extra[k] = v
		}
	}
	c.mu.Unlock()
	cfg, err := c.Config()
	if err != nil {
		return err
	}
	return c.Master.Reconfig(cfg)
}

// SetCondorHost moves the daemons to the central manager at addr.
func (c *Daemons) SetCondorHost(addr string) error {
	return c.Set(map[string]string{"CONDOR_HOST": addr})
}

// Stop stops the daemons, killing the jobs they run, within ten seconds.
func (c *Daemons) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Master.Stop(ctx); err != nil {
		c.logger.Warn("stopping the daemons", "err", err)
	}
}

// Drain empties the startd before the node leaves a pond; the function it
// returns lets the startd take jobs again.
func (c *Daemons) Drain(ctx context.Context, evict bool) (api.DrainResult, func()) {
	sd := c.Master.Startd()
	if sd == nil {
		return api.DrainResult{}, func() {}
	}
	r := sd.Drain(ctx, evict)
	return api.DrainResult{Finished: r.Finished, Evicted: r.Evicted, Took: r.Took}, sd.Resume
}

// NodeLost tells the node's daemons that the sea declared the node name
// failed or gone.
func (c *Daemons) NodeLost(ctx context.Context, name string) {
	if c == nil {
		return
	}
	c.Master.NodeLost(ctx, name)
}

// CpusInUse counts the cores of the startd's claimed slots (dynamic and
// static: a partitionable slot lends its cores to its dynamic ones). It
// reports false if the node runs no startd.
func (c *Daemons) CpusInUse() (int64, bool) {
	if c == nil {
		return 0, false
	}
	sd := c.Master.Startd()
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

// JobsSpent reports whether the startd has started the most jobs it may
// (POND_MAX_JOBS) and none of them still runs; false without a startd.
func (c *Daemons) JobsSpent() bool {
	sd := c.Master.Startd()
	return sd != nil && sd.JobsSpent()
}

// Claimed reports whether one of the startd's slots (other than a
// partitionable one) is claimed.
func (c *Daemons) Claimed() bool {
	sd := c.Master.Startd()
	if sd == nil {
		return false
	}
	for _, slot := range sd.Slots() {
		if typ, _ := slot.EvalAttr("SlotType").StringValue(); typ == "Partitionable" {
			continue
		}
		if state, _ := slot.EvalAttr("State").StringValue(); state == "Claimed" {
			return true
		}
	}
	return false
}
