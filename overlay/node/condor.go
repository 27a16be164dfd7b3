package node

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/gossip"
)

// condor hosts the node's HTCondor-compatible daemons.
type condor struct {
	a      *agent.Agent
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
	if role == gossip.RoleCM || pool == "" {
		return "MASTER COLLECTOR NEGOTIATOR SCHEDD STARTD"
	}
	return "MASTER SCHEDD STARTD"
}

// config builds the daemons' configuration: the agent's file, the DAEMON_LIST
// of its role when the file sets none, and the knobs set at run time.
func (c *condor) config() (*config.Config, error) {
	var cfg *config.Config
	if path := c.a.ConfigFile(); path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
	} else {
		cfg = config.New(config.Options{})
	}
	self := c.a.Self()
	if src, ok := cfg.Source("DAEMON_LIST"); !ok || src.File == "<default>" {
		if err := cfg.Set("DAEMON_LIST", daemonsFor(self.Role, self.Pool)); err != nil {
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
func (c *condor) setStamps(stamps map[string]string) {
	c.mu.Lock()
	c.stamps = stamps
	c.mu.Unlock()
}

// hasDaemon reports whether the daemons' configuration runs daemon.
func (c *condor) hasDaemon(name string) bool {
	for _, d := range c.master.Config().List("DAEMON_LIST") {
		if strings.EqualFold(d, name) {
			return true
		}
	}
	return false
}

// set changes run-time knobs and reconfigures the daemons.
func (c *condor) set(knobs map[string]string) error {
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

// startCondor starts the daemons and follows the agent's CONDOR_HOST.
func startCondor(ctx context.Context, a *agent.Agent) (*condor, error) {
	c := &condor{a: a, extra: map[string]string{"CONDOR_HOST": a.CondorHost()}}
	cfg, err := c.config()
	if err != nil {
		return nil, fmt.Errorf("condor configuration: %w", err)
	}
	attrs := map[string]string{}
	for k, v := range a.Self().Attributes {
		// The startd measures the machine itself; only what the operator
		// added (-attr) passes through.
		switch strings.ToLower(k) {
		case "name", "machine", "cpus", "memory", "opsys", "arch":
			continue
		}
		attrs[k] = classadLiteral(v)
	}
	attrs["PondAPI"] = strconv.Quote(a.APIAddr())
	m, err := daemon.Start(ctx, daemon.Options{
		Config:  cfg,
		Name:    a.Self().Name,
		Address: a.APIAddr(),
		DataDir: dataDir(a),
		Logger:  a.Logger().With("component", "condor"),
		Attrs:   attrs,
		Reload:  c.config,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the daemons: %w", err)
	}
	c.master = m
	a.Mux().Handle(wire.PathPrefix, m.Handler())
	a.OnCondorHost(func(addr string) {
		if err := c.set(map[string]string{"CONDOR_HOST": addr}); err != nil {
			a.Logger().Error("moving the daemons to a new central manager", "condor_host", addr, "err", err)
		}
	})
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Stop(sctx); err != nil {
			a.Logger().Warn("stopping the daemons", "err", err)
		}
	}()
	return c, nil
}

func dataDir(a *agent.Agent) string {
	if d := a.DataDir(); d != "" {
		return d + "/condor"
	}
	return ""
}

// classadLiteral writes an agent attribute as ClassAd expression text.
func classadLiteral(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case bool:
		if v {
			return "true"
		}
		return "false"
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEnN") {
			s += ".0"
		}
		return s
	}
	return strconv.Quote(fmt.Sprint(v))
}
