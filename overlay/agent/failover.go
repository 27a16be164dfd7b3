package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

func (n foNode) Members() []api.FailoverMember                        { return n.a.foMembers() }
func (n foNode) ConfirmDelay() time.Duration                          { return n.a.sea.ConfirmDelay() }
func (n foNode) FetchState(mgr api.FailoverMember) *api.FailoverState { return n.a.fetchState(mgr) }
func (n foNode) StepDown(mgr api.FailoverMember)                      { n.a.stepDown(mgr) }
func (n foNode) Follow(mgr api.FailoverMember)                        { n.a.follow(mgr) }
func (n foNode) StopFlock()                                           { n.a.stopFlock() }
func (n foNode) Replicate(ctx context.Context)                        { n.a.replicate(ctx) }
func (n foNode) BecomeManager(e int64, from *api.FailoverState, why string) {
	n.a.becomeManager(e, from, why)
}
func (n foNode) OwnPoolProven() bool {
	return failover.OwnPoolProven(n.a.cfg.TLSCert, n.a.cfg.Name, n.a.cfg.Pool)
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
		Original: a.cfg.Role == api.RoleCM, HoldDown: holdDown, Logger: a.logger}
	var state *api.FailoverState
	if a.cfg.DataDir != "" {
		st, err := readFailoverState(filepath.Join(a.cfg.DataDir, FailoverFile))
		if err != nil {
			a.logger.Warn("ignoring the stored fail-over state", "err", err)
		} else if st != nil && st.Pool == a.cfg.Pool {
			state = st
		}
	}
	return failover.NewKeeper(cfg, foNode{a}, state), nil
}

func readFailoverState(path string) (*api.FailoverState, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st api.FailoverState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := st.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}

// failoverDaemonList is the DAEMON_LIST a member of a pool with replicas
// starts with: the pool's declared central manager runs no negotiator
// until it knows the epoch it negotiates at (it may be back from a failure
// that a replica took over).
func (a *Agent) failoverDaemonList() string {
	if a.fo == nil || !a.fo.Config().Original {
		return ""
	}
	return "MASTER COLLECTOR SCHEDD STARTD"
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

// fetchState asks the acting manager mgr for its state, nil when it does
// not answer.
func (a *Agent) fetchState(mgr api.FailoverMember) *api.FailoverState {
	ctx, cancel := context.WithTimeout(a.ctx, 3*time.Second)
	defer cancel()
	st, err := api.NewClient(mgr.API).WithTLS(a.clientTLS).WithToken(a.token()).Failover(ctx)
	if err != nil || st.State == nil {
		a.logger.Warn("fetching the acting central manager's state", "manager", mgr.Name, "err", err)
		return nil
	}
	return st.State
}

// becomeManager makes the node its pool's central manager at epoch: it
// raises its own startd's fence, starts the collector and negotiator with
// the replicated knobs and accounting (of from, when given, else of the
// state it holds), points its daemons at itself and shows the epoch in
// its tags, so that the pool's members follow.
func (a *Agent) becomeManager(epoch int64, from *api.FailoverState, why string) {
	fo := a.fo
	prev := fo.State()
	original := fo.Config().Original
	st := &api.FailoverState{Pool: a.cfg.Pool, Epoch: epoch, Manager: a.cfg.Name, ManagerAPI: a.APIAddr(), Updated: time.Now().UTC()}
	var acc []map[string]float64
	knobsOf := map[string]string{}
	for _, s := range []*api.FailoverState{prev, from} {
		if s == nil {
			continue
		}
		acc = append(acc, s.Accounting)
		st.Replicas = s.Replicas
		for k, v := range s.Config {
			if api.ReplicatedKnob(k) {
				knobsOf[k] = v
			}
		}
	}
	st.Accounting = failover.Accounting(acc...)
	set := map[string]string{
		"DAEMON_LIST":  daemonsFor(api.RoleCM, a.cfg.Pool),
		"CONDOR_HOST":  a.APIAddr(),
		wire.EpochKnob: strconv.FormatInt(epoch, 10),
	}
	if !original {
		// A replica negotiates with the manager's knobs; the declared
		// manager has its own in its configuration.
		for k, v := range knobsOf {
			if _, mine := a.cfg.Knob(k); !mine {
				set[k] = v
			}
		}
	}
	a.hostMu.Lock()
	a.cfg.CondorHost = ""
	a.hostMu.Unlock()
	if err := a.daemons.set(set); err != nil {
		a.logger.Error("starting the central manager's daemons", "epoch", epoch, "err", err)
		return
	}
	if n := a.daemons.master.Negotiator(); n != nil {
		n.SetAccounting(st.Accounting)
	}
	// The acting manager announces the pool and keeps its flocks: a
	// replica those of the state it holds, anyone those of the manager
	// it takes the pool from; the declared manager by itself keeps its
	// own (DATA_DIR/flock).
	var flocks json.RawMessage
	if !original && prev != nil && prev.Flocks != nil {
		flocks = prev.Flocks
	}
	if from != nil && from.Flocks != nil {
		flocks = from.Flocks
	}
	var cs []api.FlockConfig
	if flocks != nil {
		if err := json.Unmarshal(flocks, &cs); err != nil {
			a.logger.Error("reading the replicated flocks", "err", err)
			flocks = nil
		}
	}
	if err := a.runFlock(cs, flocks != nil); err != nil {
		a.logger.Error("starting the pool's flocking", "epoch", epoch, "err", err)
	}
	st.Flocks = a.flockConfigs()
	fo.Acted(epoch, st, a.APIAddr())
	a.saveFailoverState(st)
	if err := a.SetTags(map[string]string{api.TagCM: a.APIAddr(), api.TagEpoch: strconv.FormatInt(epoch, 10)}); err != nil {
		a.logger.Warn("showing the central manager's epoch", "err", err)
	}
	if n := a.daemons.master.Negotiator(); n != nil {
		_, _ = n.Reschedule(a.ctx, nil)
	}
	a.logger.Info("acting as the pool's central manager", "pool", a.cfg.Pool, "epoch", epoch, "why", why)
	if why != "start" || from != nil {
		a.replicate(a.ctx)
	}
}

// stepDown ends a replica's time as manager: a member with a higher epoch
// acts now. Its daemons follow that one, and it stops its collector and
// negotiator.
func (a *Agent) stepDown(mgr api.FailoverMember) {
	a.logger.Info("handing the pool back", "pool", a.cfg.Pool, "to", mgr.Name, "epoch", mgr.Epoch)
	// The declared manager keeps its collector but runs no negotiator
	// while it follows; a replica runs what a member runs.
	set := map[string]string{"DAEMON_LIST": a.failoverDaemonList(), "CONDOR_HOST": mgr.API, wire.EpochKnob: strconv.FormatInt(mgr.Epoch, 10)}
	if st := a.fo.StepDown(); st != nil {
		for k := range st.Config {
			if _, mine := a.cfg.Knob(k); !mine {
				set[k] = ""
			}
		}
	}
	a.stopFlock()
	if err := a.SetTags(map[string]string{api.TagEpoch: ""}); err != nil {
		a.logger.Warn("clearing the epoch tag", "err", err)
	}
	a.moveTo(mgr, set)
}

// follow points the node's daemons at the acting manager mgr, raising the
// startd's fence to mgr's epoch in the same reconfiguration.
func (a *Agent) follow(mgr api.FailoverMember) {
	if a.fo.Follows(mgr) && a.CondorHost() == mgr.API {
		return
	}
	a.logger.Info("following the pool's central manager", "pool", a.cfg.Pool, "manager", mgr.Name, "epoch", mgr.Epoch)
	a.moveTo(mgr, map[string]string{"CONDOR_HOST": mgr.API, wire.EpochKnob: strconv.FormatInt(mgr.Epoch, 10)})
}

func (a *Agent) moveTo(mgr api.FailoverMember, set map[string]string) {
	a.hostMu.Lock()
	a.cfg.CondorHost = mgr.API
	a.hostMu.Unlock()
	if err := a.daemons.set(set); err != nil {
		a.logger.Error("moving the daemons to the pool's central manager", "manager", mgr.Name, "err", err)
		return
	}
	a.fo.Followed(mgr)
	if err := a.SetTags(map[string]string{api.TagCM: mgr.API}); err != nil {
		a.logger.Warn("setting the cm tag", "err", err)
	}
}

// replicate sends the manager's state to its replicas: the pool's live
// members nearest to it, chosen again each time.
func (a *Agent) replicate(ctx context.Context) {
	fo := a.fo
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
	// The state goes, with the manager's token, only to members whose
	// certificate names them and the pool: a pool tag is anyone's to set.
	cands = slices.DeleteFunc(cands, func(c failover.Candidate) bool {
		return !a.claims.Proven(a.ctx, c.Name, failover.Claim{API: apis[c.Name], Pool: a.cfg.Pool}, true)
	})
	st, ok := fo.Replicable()
	if !ok {
		return
	}
	st.Replicas = failover.ChooseReplicas(cands, fo.Config().Replicas, st.Replicas)
	st.Updated = time.Now().UTC()
	st.Config = map[string]string{}
	cfg := a.daemons.master.Config()
	for _, k := range cfg.Names() {
		if src, ok := cfg.Source(k); api.ReplicatedKnob(k) && ok && src.File != "<default>" {
			if v, ok := cfg.Get(k); ok {
				st.Config[k] = v
			}
		}
	}
	if n := a.daemons.master.Negotiator(); n != nil {
		st.Accounting = failover.Accounting(st.Accounting, n.Accounting())
	}
	if f := a.flockConfigs(); f != nil {
		st.Flocks = f
	}
	fo.Replicated(&st)
	a.saveFailoverState(&st)
	var wg sync.WaitGroup
	for _, name := range st.Replicas {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := api.NewClient(apis[name]).WithTLS(a.clientTLS).WithToken(a.token()).PushFailover(cctx, &st); err != nil && ctx.Err() == nil {
				a.logger.Warn("replicating the central manager's state", "replica", name, "err", err)
			}
		})
	}
	wg.Wait()
}

func (a *Agent) saveFailoverState(st *api.FailoverState) {
	if a.cfg.DataDir == "" {
		return
	}
	if err := jsonfile.Write(filepath.Join(a.cfg.DataDir, FailoverFile), st); err != nil {
		a.logger.Warn("storing the fail-over state", "err", err)
	}
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
	a.saveFailoverState(&st)
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
