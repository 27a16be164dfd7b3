package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/failover"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/nodedaemons"
)

// foNode is the agent as its fail-over Keeper drives it
// (failover.Node).
type foNode struct{ a *Agent }

func (n foNode) Members() []api.FailoverMember     { return n.a.foMembers() }
func (n foNode) ConfirmDelay() time.Duration       { return n.a.sea.ConfirmDelay() }
func (n foNode) APIAddr() string                   { return n.a.APIAddr() }
func (n foNode) CondorHost() string                { return n.a.CondorHost() }
func (n foNode) SetTags(t map[string]string) error { return n.a.SetTags(t) }
func (n foNode) StopFlock()                        { n.a.flock.Stop() }
func (n foNode) FlockConfigs() json.RawMessage     { return n.a.flock.Configs() }
func (n foNode) RunFlock(cs []api.FlockConfig, replace bool) error {
	return n.a.flock.Run(cs, replace)
}
func (n foNode) OwnPoolProven() bool {
	return failover.OwnPoolProven(n.a.cfg.TLSCert, n.a.cfg.Name, n.a.cfg.Pool)
}
func (n foNode) OwnKnob(name string) bool { _, mine := n.a.cfg.Knob(name); return mine }

func (n foNode) FetchState(ctx context.Context, mgr api.FailoverMember) (*api.FailoverState, error) {
	st, err := api.NewClient(mgr.API).WithTLS(n.a.clientTLS).WithToken(n.a.token()).Failover(ctx)
	if err != nil {
		return nil, err
	}
	if st.State == nil {
		return nil, fmt.Errorf("%s holds no fail-over state", mgr.Name)
	}
	return st.State, nil
}

func (n foNode) PushState(ctx context.Context, addr string, st *api.FailoverState) error {
	return api.NewClient(addr).WithTLS(n.a.clientTLS).WithToken(n.a.token()).PushFailover(ctx, st)
}

func (n foNode) SaveState(st *api.FailoverState) error {
	return failover.WriteState(n.a.cfg.DataDir, st)
}

func (n foNode) Reconfigure(condorHost string, set map[string]string) error {
	n.a.hostMu.Lock()
	n.a.cfg.CondorHost = condorHost
	n.a.hostMu.Unlock()
	return n.a.daemons.Set(set)
}

func (n foNode) ReplicatedConfig() map[string]string {
	out := map[string]string{}
	cfg := n.a.daemons.Master.Config()
	for _, k := range cfg.Names() {
		if src, ok := cfg.Source(k); api.ReplicatedKnob(k) && ok && src.File != "<default>" {
			if v, ok := cfg.Get(k); ok {
				out[k] = v
			}
		}
	}
	return out
}

func (n foNode) Accounting() map[string]float64 {
	if neg := n.a.daemons.Master.Negotiator(); neg != nil {
		return neg.Accounting()
	}
	return nil
}

func (n foNode) SetAccounting(acc map[string]float64) {
	if neg := n.a.daemons.Master.Negotiator(); neg != nil {
		neg.SetAccounting(acc)
	}
}

func (n foNode) Reschedule(ctx context.Context) {
	if neg := n.a.daemons.Master.Negotiator(); neg != nil {
		_, _ = neg.Reschedule(ctx, nil)
	}
}

// Candidates returns the pool's live members that could be its manager's
// replicas (failover.Claims.Candidates).
func (n foNode) Candidates(ctx context.Context) ([]failover.Candidate, map[string]string) {
	a := n.a
	self, err := a.sea.Serf().GetCoordinate()
	if err != nil {
		self = nil
	}
	return a.claims.Candidates(ctx, a.sea.Members(), a.cfg.Pool, self)
}

// newFailover makes the node's part in its pool's central-manager
// fail-over (failover.FromKnobs); nil when the node's pool keeps no
// replicas of its manager.
func (a *Agent) newFailover() (*failover.Keeper, error) {
	cfg := failover.Config{Pool: a.cfg.Pool, Name: a.cfg.Name, Original: a.cfg.Role == api.RoleCM,
		ManagerDaemons: nodedaemons.DaemonList(api.RoleCM, a.cfg.Pool), Logger: a.logger}
	return failover.FromKnobs(knobs.Reader(a.cfg.Knob), cfg, a.cfg.DataDir, foNode{a})
}

// failoverDaemonList is the DAEMON_LIST a member of a pool with replicas
// starts with (failover.Keeper.FollowerDaemons); empty for any other.
func (a *Agent) failoverDaemonList() string {
	if a.fo == nil {
		return ""
	}
	return a.fo.FollowerDaemons()
}

// runFailover follows the pool's manager, takes over when it is gone, and,
// as manager, replicates to the replicas, until the agent stops.
func (a *Agent) runFailover() { a.fo.Run(a.ctx, a.joined) }

// foMembers returns the sea's members as fail-over sees them
// (failover.Claims.Members).
func (a *Agent) foMembers() []api.FailoverMember {
	return a.claims.Members(a.ctx, a.sea.Members(), a.cfg.Pool)
}

// failoverRoutes serves GET and PUT /v1/failover on a member of a pool with
// replicas.
func (a *Agent) failoverRoutes(m routeMux) {
	if a.fo == nil {
		return
	}
	m.handle("GET "+api.PathFailover, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, a.FailoverStatus())
	})
	push := &failover.Push{Keeper: a.fo, Pool: a.cfg.Pool, Verified: a.verifier != nil, TLS: a.serverTLS != nil,
		DataDir: a.cfg.DataDir, Logger: a.logger}
	m.handle("PUT "+api.PathFailover, push.ServeHTTP)
}

// FailoverStatus is the node's view of its pool's central-manager
// fail-over.
func (a *Agent) FailoverStatus() api.FailoverStatus {
	fo := a.fo
	out := api.FailoverStatus{Pool: a.cfg.Pool, Node: a.cfg.Name}
	if fo == nil {
		return out
	}
	fo.Status(&out)
	if n := a.daemons.Master.Negotiator(); n != nil {
		c := n.LastCycle()
		out.LastCycle, out.LastMatches = c.Start, c.Matches
	}
	return out
}
