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
	"github.com/pond-htc/pond/overlay/failover"
	"github.com/pond-htc/pond/overlay/flock"
	"github.com/pond-htc/pond/overlay/knobs"
)

// startFlock starts the flocking of a pool's member. On an agent that runs
// its pool's collector, it starts the flock manager (runFlock). On every
// member that runs a schedd, it starts asking the pool's acting central
// manager for the pools to flock to, while the member does not act as
// manager itself (flock.Follower).
func (a *Agent) startFlock() error {
	if a.cfg.Pool == "" {
		return nil
	}
	if _, err := a.flockOptions(); err != nil {
		return err
	}
	if a.daemons.runs(daemon.Collector) {
		if err := a.runFlock(nil, false); err != nil {
			return err
		}
	}
	if a.daemons.runs(daemon.Schedd) {
		opts, err := a.flockOptions()
		if err != nil {
			return err
		}
		a.bg.Go(func() { a.flockFollow.Follow(a.ctx, opts.Interval) })
		a.bg.Go(func() { a.flockFollow.Count(a.ctx, opts.Interval) })
	}
	return nil
}

// flockOptions reads the flocking knobs into the flock manager's options.
func (a *Agent) flockOptions() (flock.Options, error) {
	r := knobs.Reader(a.cfg.Knob)
	interval, err := r.Duration(knobs.FlockInterval)
	if err != nil {
		return flock.Options{}, err
	}
	ttl, err := r.Duration(knobs.FlockTTL)
	if err != nil {
		return flock.Options{}, err
	}
	if ttl <= interval {
		return flock.Options{}, fmt.Errorf("%s (%v) must be more than %s (%v)", knobs.FlockTTL, ttl, knobs.FlockInterval, interval)
	}
	dir := ""
	if a.cfg.DataDir != "" {
		dir = filepath.Join(a.cfg.DataDir, "flock")
	}
	return flock.Options{
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
		Trusted: func(ann api.FlockAnnouncement) bool {
			// Proven in the background: an announcement counts from
			// the flock manager's next look once its node proved it.
			return a.claims.Proven(a.ctx, ann.Node, failover.Claim{API: ann.API, Pool: ann.Pool, Epoch: ann.Epoch}, false)
		},
		RTT:    a.sea.RTT,
		Logger: a.logger.With("component", "flock"),
	}, nil
}

// flockRun is a running flock manager's announcements.
type flockRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// runFlock makes the agent its pool's flock manager: it announces the
// pool's spare capacity to the sea every POND_FLOCK_INTERVAL (expiring
// after POND_FLOCK_TTL), keeps the pool's flocks in DATA_DIR/flock and
// gives the pool's schedds the willing pools to flock to. A manager that
// runs already goes on. With replace, the flocks become flocks (those of
// the central manager the node takes over from, or takes the pool back
// from); flocks that cannot replace them leave the manager running with
// those it had, and the error says why.
func (a *Agent) runFlock(flocks []api.FlockConfig, replace bool) error {
	a.flockMu.Lock()
	defer a.flockMu.Unlock()
	m := a.flock.Load()
	if m == nil {
		opts, err := a.flockOptions()
		if err != nil {
			return err
		}
		if m, err = flock.NewManager(opts); err != nil {
			return err
		}
	}
	var err error
	if replace {
		if err = m.Replace(flocks); err != nil {
			err = fmt.Errorf("taking the pool's flocks: %w", err)
		}
	}
	if a.flockRun == nil {
		ctx, cancel := context.WithCancel(a.ctx)
		run := &flockRun{cancel: cancel, done: make(chan struct{})}
		a.flockRun = run
		a.flock.Store(m)
		a.bg.Go(func() {
			defer close(run.done)
			m.Run(ctx)
		})
	}
	return err
}

// stopFlock ends the agent's time as its pool's flock manager (a replica
// hands the pool back): its announcement is withdrawn at once, so that
// the sea sees only the acting manager's.
func (a *Agent) stopFlock() {
	a.flockMu.Lock()
	defer a.flockMu.Unlock()
	run := a.flockRun
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
	a.flockRun = nil
	a.flock.Store(nil)
	if err := a.SetTags(map[string]string{flock.TagSpare: "", flock.TagAccept: ""}); err != nil {
		a.logger.Warn("withdrawing the pool's announcement", "err", err)
	}
}

// flockConfigs is the flocks of the running flock manager, as the
// fail-over state carries them; nil when none runs.
func (a *Agent) flockConfigs() json.RawMessage {
	m := a.flock.Load()
	if m == nil {
		return nil
	}
	data, err := json.Marshal(m.Configs())
	if err != nil {
		return nil
	}
	return data
}

// flockNode is the agent as its flock.Follower drives it.
type flockNode struct{ a *Agent }

func (n flockNode) Manager() *flock.Manager { return n.a.flock.Load() }

func (n flockNode) CentralManager() string {
	if cm := n.a.CondorHost(); cm != n.a.APIAddr() {
		return cm
	}
	return ""
}

func (n flockNode) FetchStatus(ctx context.Context, addr string) (*api.FlockStatus, error) {
	return api.NewClient(addr).WithTLS(n.a.clientTLS).WithToken(n.a.token()).Flock(ctx)
}

func (n flockNode) PoolMembers() map[string]bool {
	mine := map[string]bool{}
	for _, m := range n.a.sea.Members() {
		if m.Name != n.a.cfg.Name && strings.EqualFold(m.Tags[api.TagPool], n.a.cfg.Pool) {
			mine[strings.ToLower(m.Name)] = true
		}
	}
	return mine
}

func (n flockNode) CountClaimed(ctx context.Context, addr string, mine map[string]bool) (int, error) {
	return n.a.othersIn(ctx, addr, mine)
}

// spareCapacity measures the pool's spare capacity from its collector:
// the unclaimed slots (a partitionable slot counts one per free cpu) and
// the resources of the largest.
func (a *Agent) spareCapacity(ctx context.Context) (api.FlockCapacity, error) {
	coll := a.daemons.master.Collector()
	if coll == nil {
		return api.FlockCapacity{}, nil
	}
	resp, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: `State == "Unclaimed"`,
		Projection: []string{"Cpus", "Memory", "GPUs", "PartitionableSlot"}})
	if err != nil {
		return api.FlockCapacity{}, err
	}
	var c api.FlockCapacity
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
// some, and keeps those it flocks to while they run its jobs), as its
// flock.Follower has them.
func (a *Agent) flockTargets() []schedd.FlockTarget {
	others := a.flockFollow.Others()
	var out []schedd.FlockTarget
	for _, c := range a.flockFollow.Candidates() {
		out = append(out, schedd.FlockTarget{Pool: c.Pool, Node: c.Node, Collector: c.API,
			JobRequirements: c.JobRequirements, MaxJobs: c.MaxJobs, IdleSlots: c.IdleSlots,
			OthersRunning: others[strings.ToLower(c.Pool)]})
	}
	return out
}

// othersIn counts the claimed slots of the collector at addr whose
// ClientMachine is one of the schedds named in mine (lower case).
func (a *Agent) othersIn(ctx context.Context, addr string, mine map[string]bool) (int, error) {
	ads, err := wire.NewClient(addr, a.token()).WithTLS(a.clientTLS).Collector().Query(ctx,
		&wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: `State == "Claimed"`, Projection: []string{"ClientMachine"}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, w := range ads {
		name, err := classad.UnquoteString(w["ClientMachine"])
		if err != nil {
			continue
		}
		if _, after, ok := strings.Cut(name, "@"); ok {
			name = after
		}
		if mine[strings.ToLower(name)] {
			n++
		}
	}
	return n, nil
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
		pool := mem.Tags[api.TagPool]
		if mem.Tags[api.TagCM] == a.CondorHost() || mem.Tags[api.TagCM] == a.APIAddr() || strings.EqualFold(pool, a.cfg.Pool) {
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
		var c api.FlockConfig
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
