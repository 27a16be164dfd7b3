package agent

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/failover"
	"github.com/pond-htc/pond/overlay/flock"
	"github.com/pond-htc/pond/overlay/knobs"
)

// newFlock builds the pool's flocking (flock.Keeper) over the agent.
func (a *Agent) newFlock() *flock.Keeper {
	return flock.NewKeeper(a.ctx, flock.Config{Pool: a.cfg.Pool, Name: a.cfg.Name, Role: a.cfg.Role, DataDir: a.cfg.DataDir,
		Knob: knobs.Reader(a.cfg.Knob), Go: a.bg.Go, Logger: a.logger.With("component", "flock")}, flockNode{a})
}

// startFlock starts the flocking of a pool's member: the flock manager on
// an agent that runs its pool's collector, the following of the acting
// manager's on every member that runs a schedd.
func (a *Agent) startFlock() error {
	return a.flock.Start(a.daemons.Runs(daemon.Collector), a.daemons.Runs(daemon.Schedd))
}

// flockNode is the agent as its flock.Keeper drives it (flock.Node).
type flockNode struct{ a *Agent }

func (n flockNode) SetTags(t map[string]string) error     { return n.a.SetTags(t) }
func (n flockNode) RTT(node string) (time.Duration, bool) { return n.a.sea.RTT(node) }
func (n flockNode) APIAddr() string                       { return n.a.APIAddr() }
func (n flockNode) CondorHost() string                    { return n.a.CondorHost() }

func (n flockNode) Members() []flock.Member {
	ms := n.a.sea.Members()
	out := make([]flock.Member, len(ms))
	for i, m := range ms {
		out[i] = flock.Member{Name: m.Name, Status: m.Status, Tags: m.Tags}
	}
	return out
}

func (n flockNode) Proven(ctx context.Context, ann api.FlockAnnouncement) bool {
	return n.a.claims.Proven(ctx, ann.Node, failover.Claim{API: ann.API, Pool: ann.Pool, Epoch: ann.Epoch}, false)
}

func (n flockNode) FetchStatus(ctx context.Context, addr string) (*api.FlockStatus, error) {
	return api.NewClient(addr).WithTLS(n.a.clientTLS).WithToken(n.a.token()).Flock(ctx)
}

func (n flockNode) Machines(ctx context.Context, addr string, req *wire.QueryAdsRequest) ([]wire.Ad, error) {
	if addr != "" {
		return wire.NewClient(addr, n.a.token()).WithTLS(n.a.clientTLS).Collector().Query(ctx, req)
	}
	coll := n.a.daemons.Master.Collector()
	if coll == nil {
		return nil, nil
	}
	resp, err := coll.Query(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Ads, nil
}

// flockTargets gives the node's schedd the pools its pool's flocks admit,
// nearest first, with their idle slots (the schedd adds only those with
// some, and keeps those it flocks to while they run its jobs).
func (a *Agent) flockTargets() []schedd.FlockTarget {
	cands, others := a.flock.Targets()
	var out []schedd.FlockTarget
	for _, c := range cands {
		out = append(out, schedd.FlockTarget{Pool: c.Pool, Node: c.Node, Collector: c.API,
			JobRequirements: c.JobRequirements, MaxJobs: c.MaxJobs, IdleSlots: c.IdleSlots,
			OthersRunning: others[strings.ToLower(c.Pool)]})
	}
	return out
}

// acceptSubmitters says whether the collector on this node takes the
// submitter ads of node's schedd (flock.Keeper.Accept).
func (a *Agent) acceptSubmitters(node string) error { return a.flock.Accept(node) }

// flockRoutes serves the flock routes (flock.Keeper.Routes).
func (a *Agent) flockRoutes(m routeMux) {
	routes := a.flock.Routes()
	for _, p := range slices.Sorted(maps.Keys(routes)) {
		m.handle(p, routes[p])
	}
}
