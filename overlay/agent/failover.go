package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/failover"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/relay"
)

// FailoverFile is the file, in a pool member's data directory, that holds
// the latest central-manager state it replicated or received.
const FailoverFile = "failover.json"

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
	if n.a.cfg.DataDir == "" {
		return nil
	}
	return jsonfile.Write(filepath.Join(n.a.cfg.DataDir, FailoverFile), st)
}

func (n foNode) Reconfigure(condorHost string, set map[string]string) error {
	n.a.hostMu.Lock()
	n.a.cfg.CondorHost = condorHost
	n.a.hostMu.Unlock()
	return n.a.daemons.set(set)
}

func (n foNode) ReplicatedConfig() map[string]string {
	out := map[string]string{}
	cfg := n.a.daemons.master.Config()
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
	if neg := n.a.daemons.master.Negotiator(); neg != nil {
		return neg.Accounting()
	}
	return nil
}

func (n foNode) SetAccounting(acc map[string]float64) {
	if neg := n.a.daemons.master.Negotiator(); neg != nil {
		neg.SetAccounting(acc)
	}
}

func (n foNode) Reschedule(ctx context.Context) {
	if neg := n.a.daemons.master.Negotiator(); neg != nil {
		_, _ = neg.Reschedule(ctx, nil)
	}
}

// Candidates returns the pool's live members that could be its manager's
// replicas, with their distance from this node in the sea's network
// coordinates. The state goes, with the manager's token, only to members
// whose certificate names them and the pool: a pool tag is anyone's to
// set.
func (n foNode) Candidates(ctx context.Context) ([]failover.Candidate, map[string]string) {
	a := n.a
	var cands []failover.Candidate
	self, hasSelf := a.sea.Serf().GetCoordinate()
	apis := map[string]string{}
	for _, m := range a.sea.Members() {
		if m.Name == a.cfg.Name || m.Status != api.StatusAlive || m.Tags[api.TagPool] != a.cfg.Pool || m.Tags[api.TagAPI] == "" {
			continue
		}
		rtt := time.Duration(-1)
		if c := (*coordinate.Coordinate)(m.Coordinate); hasSelf == nil && c != nil && self.IsCompatibleWith(c) {
			rtt = self.DistanceTo(c)
		}
		cands = append(cands, failover.Candidate{Name: m.Name, RTT: rtt})
		apis[m.Name] = m.Tags[api.TagAPI]
	}
	cands = slices.DeleteFunc(cands, func(c failover.Candidate) bool {
		return !a.claims.Proven(ctx, c.Name, failover.Claim{API: apis[c.Name], Pool: a.cfg.Pool}, true)
	})
	return cands, apis
}

// newFailover reads the fail-over knobs; nil when the node's pool keeps no
// replicas of its manager.
func (a *Agent) newFailover() (*failover.Keeper, error) {
	r := knobs.Reader(a.cfg.Knob)
	n, err := r.Int(knobs.CMReplicas)
	if err != nil {
		return nil, err
	}
	if n == 0 || a.cfg.Pool == "" {
		return nil, nil
	}
	step, err := r.Duration(knobs.CMTakeoverStep)
	if err != nil {
		return nil, err
	}
	interval, err := r.Duration(knobs.CMReplicateInterval)
	if err != nil {
		return nil, err
	}
	holdDown, err := r.Duration(knobs.CMHandbackHoldDown)
	if err != nil {
		return nil, err
	}
	cfg := failover.Config{Pool: a.cfg.Pool, Name: a.cfg.Name, Replicas: n, Step: step, Interval: interval,
		Original: a.cfg.Role == api.RoleCM, HoldDown: holdDown, ManagerDaemons: daemonsFor(api.RoleCM, a.cfg.Pool), Logger: a.logger}
	var state *api.FailoverState
	if a.cfg.DataDir != "" {
		st, err := failover.ReadState(filepath.Join(a.cfg.DataDir, FailoverFile))
		if err != nil {
			a.logger.Warn("ignoring the stored fail-over state", "err", err)
		} else if st != nil && st.Pool == a.cfg.Pool {
			state = st
		}
	}
	return failover.NewKeeper(cfg, foNode{a}, state), nil
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

// foMembers returns the sea's members as fail-over sees them. A member's
// epoch tag counts only once the member proved it (failover.Claims: its
// certificate names it and the pool, and it says it acts at that epoch);
// until then, and when it cannot, the member shows no epoch, so that
// nobody follows it, nor takes its epoch for the pool's highest.
func (a *Agent) foMembers() []api.FailoverMember {
	ms := a.sea.Members()
	out := make([]api.FailoverMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, api.FailoverMember{Name: m.Name, API: m.Tags[api.TagAPI], Pool: m.Tags[api.TagPool],
			Alive: m.Status == api.StatusAlive, Epoch: api.ParseEpoch(m.Tags[api.TagEpoch])})
	}
	var wg sync.WaitGroup
	for i, m := range out {
		if m.Epoch == 0 || m.Pool != a.cfg.Pool || m.Name == a.cfg.Name {
			continue
		}
		k := failover.Claim{API: m.API, Pool: m.Pool, Epoch: m.Epoch}
		if !m.Alive || m.API == "" {
			// A member that is gone proves nothing more: what it
			// proved while alive stands.
			if !a.claims.Known(m.Name, k) {
				out[i].Epoch = 0
			}
			continue
		}
		wg.Go(func() {
			if !a.claims.Proven(a.ctx, m.Name, k, true) {
				out[i].Epoch = 0
			}
		})
	}
	wg.Wait()
	return out
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
	m.handle("PUT "+api.PathFailover, a.handlePushFailover)
}

// handlePushFailover takes the state the pool's manager replicates: only
// from the manager's own node token, of this pool, and of an epoch no
// lower than the highest the node knows.
func (a *Agent) handlePushFailover(w http.ResponseWriter, r *http.Request) {
	var st api.FailoverState
	if err := wire.ReadJSON(r, &st); err != nil {
		wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("failover: body: %w", err))
		return
	}
	if err := st.Check(); err != nil {
		wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("failover: state: %w", err))
		return
	}
	if claims, ok := auth.FromContext(r.Context()); ok && claims.Subject != relay.NodeSubjectPrefix+st.Manager {
		wire.WriteError(w, http.StatusForbidden, fmt.Errorf("failover: %s may not replicate the state of manager %s: only node/%s may", claims.Subject, st.Manager, st.Manager))
		return
	} else if !ok && a.verifier != nil {
		wire.WriteError(w, http.StatusForbidden, errors.New("failover: only the pool's central manager, with its node token, replicates its state"))
		return
	}
	if a.serverTLS != nil {
		// The token says who sends the state; the certificate, which
		// only the authority issues, that it is a member of the pool.
		if id, ok := failover.PeerIdentity(r); !ok || id.Node != st.Manager || id.Pool != a.cfg.Pool {
			wire.WriteError(w, http.StatusForbidden, fmt.Errorf("failover: only a member of pool %q whose certificate names it replicates the pool's state: the caller's certificate names node %q of pool %q", a.cfg.Pool, id.Node, id.Pool))
			return
		}
	}
	if st.Pool != a.cfg.Pool {
		wire.WriteError(w, http.StatusConflict, fmt.Errorf("failover: state of pool %q sent to a member of pool %q", st.Pool, a.cfg.Pool))
		return
	}
	if known, ok := a.fo.Receive(&st); !ok {
		wire.WriteError(w, http.StatusConflict, fmt.Errorf("failover: epoch %d is lower than epoch %d, which this node knows: a newer manager acts", st.Epoch, known))
		return
	}
	if err := (foNode{a}).SaveState(&st); err != nil {
		a.logger.Warn("storing the fail-over state", "err", err)
	}
	wire.WriteJSON(w, http.StatusOK, struct{}{})
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
	if n := a.daemons.master.Negotiator(); n != nil {
		c := n.LastCycle()
		out.LastCycle, out.LastMatches = c.Start, c.Matches
	}
	return out
}
