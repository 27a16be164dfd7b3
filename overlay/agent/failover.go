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
	"github.com/pond-htc/pond/overlay/flock"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/relay"
)

// FailoverFile is the file, in a pool member's data directory, that holds
// the latest central-manager state it replicated or received.
const FailoverFile = "failover.json"

// failoverTick is how often a member of a pool with replicas looks at the
// sea for its manager.
const failoverTick = 250 * time.Millisecond

// foNode is the agent's part in its pool's central-manager fail-over: the
// manager replicates its state to its replicas, the replicas take over in
// order when it is gone, and every member follows the live member that
// holds the highest epoch (overlay/failover).
type foNode struct {
	replicas int
	step     time.Duration // wait per replica rank before taking over
	interval time.Duration // replication interval
	original bool          // the node is the pool's declared central manager
	holdDown time.Duration // how long the declared manager follows a replica before it takes the pool back

	mu    sync.Mutex
	state *failover.State // latest replicated state: own when acting
	epoch int64           // the epoch the node acts at as manager; 0 when it does not
	// following and followAPI are the manager the daemons report to and
	// its epoch; since when that last changed.
	following  int64
	followName string
	followAPI  string
	since      time.Time
	// missing is since when no live member acts as manager.
	missing time.Time
	// pushed is when a manager last replicated its state to the node.
	pushed time.Time
	// back is, on the declared manager, since when it has been back with
	// another member acting for it (started, or a partition healed): it
	// takes the pool back once that lasted holdDown; zero when it acts or
	// no other member does.
	back time.Time
}

// newFailover reads the fail-over knobs; nil when the node's pool keeps no
// replicas of its manager.
func (a *Agent) newFailover() (*foNode, error) {
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
	fo := &foNode{replicas: n, step: step, interval: interval, original: a.cfg.Role == gossip.RoleCM, holdDown: holdDown}
	if a.cfg.DataDir != "" {
		st, err := readFailoverState(filepath.Join(a.cfg.DataDir, FailoverFile))
		if err != nil {
			a.logger.Warn("ignoring the stored fail-over state", "err", err)
		} else if st != nil && st.Pool == a.cfg.Pool {
			fo.state = st
		}
	}
	return fo, nil
}

func readFailoverState(path string) (*failover.State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st failover.State
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
	if a.fo == nil || !a.fo.original {
		return ""
	}
	return "MASTER COLLECTOR SCHEDD STARTD"
}

// runFailover follows the pool's manager, takes over when it is gone, and,
// as manager, replicates to the replicas, until the agent stops.
func (a *Agent) runFailover() {
	select {
	case <-a.ctx.Done():
		return
	case <-a.joined:
	}
	if a.fo.original {
		// Join gave the sea's members and tags; a moment more lets a
		// manager that took over while the node was away show its epoch.
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(a.sea.ConfirmDelay()):
		}
		a.failoverStep(true)
	}
	tick := time.NewTicker(failoverTick)
	defer tick.Stop()
	var lastPush time.Time
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-tick.C:
		}
		a.failoverStep(false)
		if a.foActing() > 0 && time.Since(lastPush) >= a.fo.interval {
			lastPush = time.Now()
			a.replicate(a.ctx)
		}
	}
}

// foMembers returns the sea's members as fail-over sees them. A member's
// epoch tag counts only once the member proved it (failover.Claims: its
// certificate names it and the pool, and it says it acts at that epoch);
// until then, and when it cannot, the member shows no epoch, so that
// nobody follows it, nor takes its epoch for the pool's highest.
func (a *Agent) foMembers() []failover.Member {
	ms := a.sea.Members()
	out := make([]failover.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, failover.Member{Name: m.Name, API: m.Tags[gossip.TagAPI], Pool: m.Tags[gossip.TagPool],
			Alive: m.Status == gossip.StatusAlive, Epoch: failover.ParseEpoch(m.Tags[failover.TagEpoch])})
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

func (a *Agent) foActing() int64 {
	a.fo.mu.Lock()
	defer a.fo.mu.Unlock()
	return a.fo.epoch
}

// failoverStep looks at the sea once and acts: start is the declared
// manager's first look after joining.
func (a *Agent) failoverStep(start bool) {
	fo := a.fo
	members := a.foMembers()
	pool := a.cfg.Pool
	highest := failover.HighestEpoch(members, pool)
	fo.mu.Lock()
	acting, known := fo.epoch, int64(0)
	if fo.state != nil {
		known = fo.state.Epoch
	}
	fo.mu.Unlock()
	highest = max(highest, known, acting)
	mgr, ok := failover.Manager(members, pool)
	if !ok {
		// A manager that just took over replicates to its replicas at
		// once, faster than gossip shows its epoch: a live manager that
		// pushed its state within a few intervals acts.
		fo.mu.Lock()
		if st := fo.state; acting == 0 && st != nil && st.Manager != a.cfg.Name && time.Since(fo.pushed) < 3*fo.interval {
			for _, m := range members {
				if m.Name == st.Manager && m.Alive && m.Pool == pool {
					mgr, ok = failover.Member{Name: st.Manager, API: st.ManagerAPI, Pool: pool, Alive: true, Epoch: st.Epoch}, true
				}
			}
		}
		fo.mu.Unlock()
	}
	switch {
	case start && ok && mgr.Name != a.cfg.Name && fo.holdDown > 0:
		// Back while a replica acts: follow it for the hold-down first.
		fo.mu.Lock()
		fo.back = time.Now()
		fo.mu.Unlock()
		a.logger.Info("back while a replica acts: following it for the hand-back hold-down", "manager", mgr.Name,
			"epoch", mgr.Epoch, "hold_down", fo.holdDown)
		// The replica announces the pool and keeps its flocks meanwhile;
		// the hand-back takes them.
		a.stopFlock()
		a.follow(mgr)
	case start:
		// The declared manager takes its pool (back) with a new epoch,
		// with the state of whoever acts now.
		var from *failover.State
		if ok && mgr.Name != a.cfg.Name {
			from = a.fetchState(mgr)
		}
		a.becomeManager(highest+1, from, "start")
	case ok && mgr.Name == a.cfg.Name:
		fo.mu.Lock()
		fo.missing = time.Time{}
		fo.mu.Unlock()
	case ok:
		fo.mu.Lock()
		fo.missing = time.Time{}
		fo.mu.Unlock()
		if acting > 0 && mgr.Epoch > acting {
			if fo.original && fo.holdDown == 0 {
				// Back from a partition or a take-over: the declared
				// manager takes the pool back, above the other's epoch.
				a.becomeManager(highest+1, a.fetchState(mgr), "hand-back")
				return
			}
			if fo.original {
				// A partition healed: the declared manager follows the
				// replica for the hold-down before it takes the pool
				// back.
				fo.mu.Lock()
				fo.back = time.Now()
				fo.mu.Unlock()
				a.logger.Info("a replica acts at a higher epoch: following it for the hand-back hold-down", "manager", mgr.Name,
					"epoch", mgr.Epoch, "hold_down", fo.holdDown)
			}
			a.stepDown(mgr)
			return
		}
		if acting == 0 && fo.original {
			fo.mu.Lock()
			if fo.back.IsZero() {
				fo.back = time.Now() // another member acts: the hold-down starts now
			}
			held := time.Since(fo.back)
			fo.mu.Unlock()
			if held >= fo.holdDown {
				a.becomeManager(highest+1, a.fetchState(mgr), "hand-back")
				return
			}
		}
		if acting == 0 {
			a.follow(mgr)
		}
	default:
		// No live member acts as manager.
		fo.mu.Lock()
		if fo.missing.IsZero() {
			fo.missing = time.Now()
		}
		missing := time.Since(fo.missing)
		rank, before := -1, []string(nil)
		if fo.state != nil {
			rank = fo.state.Rank(a.cfg.Name)
			if rank > 0 {
				before = fo.state.Replicas[:rank]
			}
		}
		fo.mu.Unlock()
		if acting > 0 {
			return // this node's own tag is on its way
		}
		if fo.original {
			a.becomeManager(highest+1, nil, "no manager")
			return
		}
		if rank < 0 || !failover.OwnPoolProven(a.cfg.TLSCert, a.cfg.Name, a.cfg.Pool) {
			// Not a replica; or one whose certificate does not name
			// the pool, which the pool's members would not follow:
			// the next replica takes over.
			return
		}
		if missing >= a.sea.ConfirmDelay()+failover.TakeoverDelay(rank, failover.LiveBefore(members, before), fo.step) {
			a.becomeManager(failover.TakeoverEpoch(highest, rank), nil, "take-over")
		}
	}
}

// fetchState asks the acting manager mgr for its state, nil when it does
// not answer.
func (a *Agent) fetchState(mgr failover.Member) *failover.State {
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
func (a *Agent) becomeManager(epoch int64, from *failover.State, why string) {
	fo := a.fo
	fo.mu.Lock()
	prev := fo.state
	fo.mu.Unlock()
	st := &failover.State{Pool: a.cfg.Pool, Epoch: epoch, Manager: a.cfg.Name, ManagerAPI: a.APIAddr(), Updated: time.Now().UTC()}
	var acc []map[string]float64
	knobsOf := map[string]string{}
	for _, s := range []*failover.State{prev, from} {
		if s == nil {
			continue
		}
		acc = append(acc, s.Accounting)
		st.Replicas = s.Replicas
		for k, v := range s.Config {
			if failover.ReplicatedKnob(k) {
				knobsOf[k] = v
			}
		}
	}
	st.Accounting = failover.Accounting(acc...)
	set := map[string]string{
		"DAEMON_LIST":  daemonsFor(gossip.RoleCM, a.cfg.Pool),
		"CONDOR_HOST":  a.APIAddr(),
		wire.EpochKnob: strconv.FormatInt(epoch, 10),
	}
	if !fo.original {
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
	if !fo.original && prev != nil && prev.Flocks != nil {
		flocks = prev.Flocks
	}
	if from != nil && from.Flocks != nil {
		flocks = from.Flocks
	}
	var cs []flock.Config
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
	fo.mu.Lock()
	fo.epoch, fo.state = epoch, st
	fo.following, fo.followName, fo.followAPI, fo.since = epoch, a.cfg.Name, a.APIAddr(), time.Now()
	fo.missing, fo.back = time.Time{}, time.Time{}
	fo.mu.Unlock()
	a.saveFailoverState(st)
	if err := a.SetTags(map[string]string{gossip.TagCM: a.APIAddr(), failover.TagEpoch: strconv.FormatInt(epoch, 10)}); err != nil {
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
func (a *Agent) stepDown(mgr failover.Member) {
	a.logger.Info("handing the pool back", "pool", a.cfg.Pool, "to", mgr.Name, "epoch", mgr.Epoch)
	// The declared manager keeps its collector but runs no negotiator
	// while it follows; a replica runs what a member runs.
	set := map[string]string{"DAEMON_LIST": a.failoverDaemonList(), "CONDOR_HOST": mgr.API, wire.EpochKnob: strconv.FormatInt(mgr.Epoch, 10)}
	a.fo.mu.Lock()
	if a.fo.state != nil {
		for k := range a.fo.state.Config {
			if _, mine := a.cfg.Knob(k); !mine {
				set[k] = ""
			}
		}
	}
	a.fo.epoch = 0
	a.fo.mu.Unlock()
	a.stopFlock()
	if err := a.SetTags(map[string]string{failover.TagEpoch: ""}); err != nil {
		a.logger.Warn("clearing the epoch tag", "err", err)
	}
	a.moveTo(mgr, set)
}

// follow points the node's daemons at the acting manager mgr, raising the
// startd's fence to mgr's epoch in the same reconfiguration.
func (a *Agent) follow(mgr failover.Member) {
	a.fo.mu.Lock()
	same := a.fo.followAPI == mgr.API && a.fo.following == mgr.Epoch
	a.fo.mu.Unlock()
	if same && a.CondorHost() == mgr.API {
		return
	}
	a.logger.Info("following the pool's central manager", "pool", a.cfg.Pool, "manager", mgr.Name, "epoch", mgr.Epoch)
	a.moveTo(mgr, map[string]string{"CONDOR_HOST": mgr.API, wire.EpochKnob: strconv.FormatInt(mgr.Epoch, 10)})
}

func (a *Agent) moveTo(mgr failover.Member, set map[string]string) {
	a.hostMu.Lock()
	a.cfg.CondorHost = mgr.API
	a.hostMu.Unlock()
	if err := a.daemons.set(set); err != nil {
		a.logger.Error("moving the daemons to the pool's central manager", "manager", mgr.Name, "err", err)
		return
	}
	a.fo.mu.Lock()
	a.fo.following, a.fo.followName, a.fo.followAPI, a.fo.since = mgr.Epoch, mgr.Name, mgr.API, time.Now()
	a.fo.mu.Unlock()
	if err := a.SetTags(map[string]string{gossip.TagCM: mgr.API}); err != nil {
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
		if m.Name == a.cfg.Name || m.Status != gossip.StatusAlive || m.Tags[gossip.TagPool] != a.cfg.Pool || m.Tags[gossip.TagAPI] == "" {
			continue
		}
		rtt := time.Duration(-1)
		if c := (*coordinate.Coordinate)(m.Coordinate); hasSelf == nil && c != nil && self.IsCompatibleWith(c) {
			rtt = self.DistanceTo(c)
		}
		cands = append(cands, failover.Candidate{Name: m.Name, RTT: rtt})
		apis[m.Name] = m.Tags[gossip.TagAPI]
	}
	// The state goes, with the manager's token, only to members whose
	// certificate names them and the pool: a pool tag is anyone's to set.
	cands = slices.DeleteFunc(cands, func(c failover.Candidate) bool {
		return !a.claims.Proven(a.ctx, c.Name, failover.Claim{API: apis[c.Name], Pool: a.cfg.Pool}, true)
	})
	fo.mu.Lock()
	if fo.epoch == 0 || fo.state == nil {
		fo.mu.Unlock()
		return
	}
	st := *fo.state
	fo.mu.Unlock()
	st.Replicas = failover.ChooseReplicas(cands, fo.replicas, st.Replicas)
	st.Updated = time.Now().UTC()
	st.Config = map[string]string{}
	cfg := a.daemons.master.Config()
	for _, k := range cfg.Names() {
		if src, ok := cfg.Source(k); failover.ReplicatedKnob(k) && ok && src.File != "<default>" {
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
	fo.mu.Lock()
	if fo.epoch == st.Epoch {
		fo.state = &st
	}
	fo.mu.Unlock()
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

func (a *Agent) saveFailoverState(st *failover.State) {
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
	var st failover.State
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
	fo := a.fo
	fo.mu.Lock()
	known := fo.epoch
	if fo.state != nil {
		known = max(known, fo.state.Epoch)
	}
	if st.Epoch < known {
		fo.mu.Unlock()
		wire.WriteError(w, http.StatusConflict, fmt.Errorf("failover: epoch %d is lower than epoch %d, which this node knows: a newer manager acts", st.Epoch, known))
		return
	}
	if fo.epoch == 0 {
		fo.state = &st
		fo.pushed = time.Now()
	}
	fo.mu.Unlock()
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
	fo.mu.Lock()
	out.Replicas = fo.replicas
	out.Acting, out.Epoch = fo.epoch > 0, fo.epoch
	out.Manager, out.ManagerAPI, out.ManagerEpoch, out.Since = fo.followName, fo.followAPI, fo.following, fo.since
	if fo.state != nil {
		st := *fo.state
		out.State = &st
	}
	fo.mu.Unlock()
	if n := a.daemons.master.Negotiator(); n != nil {
		c := n.LastCycle()
		out.LastCycle, out.LastMatches = c.Start, c.Matches
	}
	return out
}
