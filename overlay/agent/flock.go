package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/flock"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/knobs"
)

// startFlock starts the flocking of an agent that runs its pool's
// collector: it announces the pool's spare capacity to the sea every
// POND_FLOCK_INTERVAL (expiring after POND_FLOCK_TTL), keeps the pool's
// flocks in DATA_DIR/flock, and gives the pool's schedd on this node the
// willing pools to flock to.
func (a *Agent) startFlock() error {
	if a.cfg.Pool == "" || !a.daemons.runs(daemon.Collector) {
		return nil
	}
	r := knobs.Reader(a.cfg.Knob)
	interval, err := r.Duration(knobs.FlockInterval)
	if err != nil {
		return err
	}
	ttl, err := r.Duration(knobs.FlockTTL)
	if err != nil {
		return err
	}
	if ttl <= interval {
		return fmt.Errorf("%s (%v) must be more than %s (%v)", knobs.FlockTTL, ttl, knobs.FlockInterval, interval)
	}
	dir := ""
	if a.cfg.DataDir != "" {
		dir = filepath.Join(a.cfg.DataDir, "flock")
	}
	m, err := flock.NewManager(flock.Options{
		Pool: a.cfg.Pool, Node: a.cfg.Name, DataDir: dir, Interval: interval, TTL: ttl,
		Capacity: a.spareCapacity,
		SetTags:  a.SetTags,
		Members: func() []flock.Member {
			ms := a.sea.Members()
			out := make([]flock.Member, len(ms))
			for i, m := range ms {
				out[i] = flock.Member{Name: m.Name, Status: m.Status, Tags: m.Tags}
			}
			return out
		},
		RTT:    a.sea.RTT,
		Logger: a.logger.With("component", "flock"),
	})
	if err != nil {
		return err
	}
	a.flock.Store(m)
	a.bg.Go(func() { m.Run(a.ctx) })
	return nil
}

// spareCapacity measures the pool's spare capacity from its collector:
// the unclaimed slots (a partitionable slot counts one per free cpu) and
// the resources of the largest.
func (a *Agent) spareCapacity(ctx context.Context) (flock.Capacity, error) {
	coll := a.daemons.master.Collector()
	if coll == nil {
		return flock.Capacity{}, nil
	}
	resp, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: `State == "Unclaimed"`,
		Projection: []string{"Cpus", "Memory", "GPUs", "PartitionableSlot"}})
	if err != nil {
		return flock.Capacity{}, err
	}
	var c flock.Capacity
	for _, w := range resp.Ads {
		ad, err := wire.ToClassAd(w)
		if err != nil {
			continue
		}
		cpus := intAttr(ad, "Cpus")
		mem := intAttr(ad, "Memory")
		gpus := intAttr(ad, "GPUs")
		if p, _ := ad.EvalAttr("PartitionableSlot").BoolValue(); p {
			c.IdleSlots += max(0, cpus)
		} else {
			c.IdleSlots++
		}
		if cpus > c.Cpus || (cpus == c.Cpus && mem > c.Memory) {
			c.Cpus, c.Memory, c.Gpus = cpus, mem, gpus
		}
	}
	return c, nil
}

func intAttr(ad *classad.Ad, name string) int {
	v, _ := ad.EvalAttr(name).IntValue()
	return int(v)
}

// flockTargets gives the node's schedd the pools its pool's flocks admit,
// nearest first, with their idle slots (the schedd adds only those with
// some, and keeps those it flocks to while they run its jobs): on the
// central manager, from its flock manager; elsewhere none.
func (a *Agent) flockTargets() []schedd.FlockTarget {
	m := a.flock.Load()
	if m == nil {
		return nil
	}
	var out []schedd.FlockTarget
	for _, c := range m.Admitted() {
		out = append(out, schedd.FlockTarget{Pool: c.Pool, Node: c.Node, Collector: c.API,
			JobRequirements: c.JobRequirements, MaxJobs: c.MaxJobs, IdleSlots: c.IdleSlots})
	}
	return out
}

// acceptSubmitters says whether the collector on this node takes the
// submitter ads of node's schedd: always from the nodes that report to it
// (their cm tag is this agent) or belong to its pool, and from unknown ones
// (not this collector's to judge), and from other pools' schedds when the
// pool's flocks accept their pool (flock.AcceptList; no flock with an in
// policy accepts any).
func (a *Agent) acceptSubmitters(node string) error {
	m := a.flock.Load()
	if m == nil {
		return nil
	}
	acc := m.Accept()
	if acc == nil {
		return nil
	}
	for _, mem := range a.sea.Members() {
		if mem.Name != node {
			continue
		}
		pool := mem.Tags[gossip.TagPool]
		if mem.Tags[gossip.TagCM] == a.CondorHost() || mem.Tags[gossip.TagCM] == a.apiAddr || strings.EqualFold(pool, a.cfg.Pool) {
			return nil
		}
		for _, p := range acc {
			if strings.EqualFold(p, pool) {
				return nil
			}
		}
		return fmt.Errorf("pool %s takes flocked jobs only from %s, not from pool %q", a.cfg.Pool, strings.Join(acc, ", "), pool)
	}
	return nil
}

// flockRoutes serves the flock routes: on an agent that is no pool's
// central manager they answer 409.
func (a *Agent) flockRoutes(m routeMux) {
	notCM := func(w http.ResponseWriter) bool {
		if a.flock.Load() != nil {
			return false
		}
		wire.WriteError(w, http.StatusConflict, fmt.Errorf("%s is not a pool's central manager (role %q, pool %q): flocks are set on central managers",
			a.cfg.Name, a.cfg.Role, a.cfg.Pool))
		return true
	}
	m.handle("GET "+api.PathFlock, func(w http.ResponseWriter, r *http.Request) {
		if notCM(w) {
			return
		}
		wire.WriteJSON(w, http.StatusOK, a.flock.Load().Status())
	})
	m.handle("PUT "+api.PathFlocks+"{name}", func(w http.ResponseWriter, r *http.Request) {
		if notCM(w) {
			return
		}
		var c flock.Config
		if err := wire.ReadJSON(r, &c); err != nil {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %w", err))
			return
		}
		if c.Name != r.PathValue("name") {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("flock %q: the path names %q", c.Name, r.PathValue("name")))
			return
		}
		if err := a.flock.Load().Set(c); err != nil {
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, a.flock.Load().Status())
	})
	m.handle("DELETE "+api.PathFlocks+"{name}", func(w http.ResponseWriter, r *http.Request) {
		if notCM(w) {
			return
		}
		if _, err := a.flock.Load().Remove(r.PathValue("name")); err != nil {
			wire.WriteError(w, http.StatusInternalServerError, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, json.RawMessage(`{}`))
	})
}
