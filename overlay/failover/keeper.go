package failover

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// Tick is how often a member of a pool with replicas looks at the sea for
// its manager.
const Tick = 250 * time.Millisecond

// Node is what a member of a pool does for the fail-over of its central
// manager: the agent watches the sea, runs the daemons and carries the
// state between nodes; a Keeper decides when, and which state.
type Node interface {
	// Members returns the sea's members as fail-over sees them, a
	// member's epoch counting only once it proved it (Claims).
	Members() []api.FailoverMember
	// ConfirmDelay is how long the sea takes to confirm that a member
	// is gone.
	ConfirmDelay() time.Duration
	// OwnPoolProven reports whether the node's own certificate names it
	// and its pool, so that the pool's members would follow it.
	OwnPoolProven() bool
	// Candidates returns the pool's live members that could be the
	// manager's replicas, those whose certificates name them and the
	// pool, with the API address of each by name.
	Candidates(ctx context.Context) ([]Candidate, map[string]string)
	// SetTags sets (an empty value removes) the node's gossip tags.
	SetTags(tags map[string]string) error
	// APIAddr is the node's API address, as its pool reaches it.
	APIAddr() string

	// FetchState asks the acting manager mgr for its state.
	FetchState(ctx context.Context, mgr api.FailoverMember) (*api.FailoverState, error)
	// PushState replicates st to the member at apiAddr.
	PushState(ctx context.Context, apiAddr string, st *api.FailoverState) error
	// SaveState stores st where the node finds it when it starts again.
	SaveState(st *api.FailoverState) error

	// Reconfigure points the node's daemons at the central manager at
	// condorHost (empty: the node itself) and sets the knobs of set on
	// them (an empty value unsets one), starting and stopping daemons
	// as DAEMON_LIST says.
	Reconfigure(condorHost string, set map[string]string) error
	// CondorHost is the central manager the node's daemons report to.
	CondorHost() string
	// OwnKnob reports whether the node's own configuration sets name.
	OwnKnob(name string) bool
	// ReplicatedConfig is the knobs of the node's configuration that
	// the manager replicates (api.ReplicatedKnob), set by a file.
	ReplicatedConfig() map[string]string
	// Accounting is the node's negotiator's accounting, nil without one;
	// SetAccounting gives it acc; Reschedule starts a negotiation cycle.
	Accounting() map[string]float64
	SetAccounting(acc map[string]float64)
	Reschedule(ctx context.Context)

	// RunFlock makes the node its pool's flock manager, with flocks when
	// replace; StopFlock ends that; FlockConfigs is the running flock
	// manager's flocks as the state carries them, nil when none runs.
	RunFlock(flocks []api.FlockConfig, replace bool) error
	StopFlock()
	FlockConfigs() json.RawMessage
}

// Config configures a Keeper.
type Config struct {
	// Pool and Name are the node's pool and name.
	Pool, Name string
	// Replicas is how many replicas the pool keeps (POND_CM_REPLICAS).
	Replicas int
	// Step is the wait per replica rank before taking over; Interval the
	// replication interval.
	Step, Interval time.Duration
	// Original is true on the pool's declared central manager; HoldDown
	// is how long it follows a replica before it takes the pool back.
	Original bool
	HoldDown time.Duration
	// ManagerDaemons is the DAEMON_LIST of the pool's acting manager.
	ManagerDaemons string
	// Logger logs what the Keeper does; nil logs nothing.
	Logger *slog.Logger
}

// Keeper is a member's part in its pool's central-manager fail-over: the
// manager replicates its state to its replicas, the replicas take over in
// order when it is gone, and every member follows the live member that
// holds the highest epoch.
type Keeper struct {
	cfg  Config
	node Node

	mu    sync.Mutex
	state *api.FailoverState // latest replicated state: own when acting
	epoch int64              // the epoch the node acts at as manager; 0 when it does not
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
	// takes the pool back once that lasted HoldDown; zero when it acts or
	// no other member does.
	back time.Time
}

// NewKeeper returns the Keeper of node, holding state (nil: none yet).
func NewKeeper(cfg Config, node Node, state *api.FailoverState) *Keeper {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Keeper{cfg: cfg, node: node, state: state}
}

// Config is the Keeper's configuration.
func (k *Keeper) Config() Config { return k.cfg }

// Run follows the pool's manager, takes over when it is gone, and, as
// manager, replicates to the replicas, from when joined is closed until
// ctx ends.
func (k *Keeper) Run(ctx context.Context, joined <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-joined:
	}
	if k.cfg.Original {
		// Join gave the sea's members and tags; a moment more lets a
		// manager that took over while the node was away show its epoch.
		select {
		case <-ctx.Done():
			return
		case <-time.After(k.node.ConfirmDelay()):
		}
		k.Step(ctx, true)
	}
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	var lastPush time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k.Step(ctx, false)
		if k.Acting() > 0 && time.Since(lastPush) >= k.cfg.Interval {
			lastPush = time.Now()
			k.replicate(ctx)
		}
	}
}

// Acting is the epoch the node acts at as its pool's manager, 0 when it
// does not.
func (k *Keeper) Acting() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.epoch
}

// State is the latest replicated state the node holds, nil when none.
func (k *Keeper) State() *api.FailoverState {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state
}

// Step looks at the sea once and acts: start is the declared manager's
// first look after joining.
func (k *Keeper) Step(ctx context.Context, start bool) {
	members := k.node.Members()
	pool, name := k.cfg.Pool, k.cfg.Name
	highest := HighestEpoch(members, pool)
	k.mu.Lock()
	acting, known := k.epoch, int64(0)
	if k.state != nil {
		known = k.state.Epoch
	}
	k.mu.Unlock()
	highest = max(highest, known, acting)
	mgr, ok := api.FailoverManager(members, pool)
	if !ok {
		mgr, ok = k.freshManager(members, acting)
	}
	switch {
	case start && ok && mgr.Name != name && k.cfg.HoldDown > 0:
		// Back while a replica acts: follow it for the hold-down first.
		k.mu.Lock()
		k.back = time.Now()
		k.mu.Unlock()
		k.cfg.Logger.Info("back while a replica acts: following it for the hand-back hold-down", "manager", mgr.Name,
			"epoch", mgr.Epoch, "hold_down", k.cfg.HoldDown)
		// The replica announces the pool and keeps its flocks meanwhile;
		// the hand-back takes them.
		k.node.StopFlock()
		k.follow(mgr)
	case start:
		// The declared manager takes its pool (back) with a new epoch,
		// with the state of whoever acts now.
		var from *api.FailoverState
		if ok && mgr.Name != name {
			from = k.fetchState(ctx, mgr)
		}
		k.becomeManager(ctx, highest+1, from, "start")
	case ok && mgr.Name == name:
		k.mu.Lock()
		k.missing = time.Time{}
		k.mu.Unlock()
	case ok:
		k.mu.Lock()
		k.missing = time.Time{}
		k.mu.Unlock()
		k.otherActs(ctx, mgr, acting, highest)
	default:
		k.noneActs(ctx, members, acting, highest)
	}
}

// freshManager is the manager that pushed its state to this replica
// within a few intervals and is alive, when gossip shows no manager yet:
// a manager that just took over replicates to its replicas at once,
// faster than gossip shows its epoch. ok is false when there is none, or
// when the node acts itself (acting > 0).
func (k *Keeper) freshManager(members []api.FailoverMember, acting int64) (mgr api.FailoverMember, ok bool) {
	pool, name := k.cfg.Pool, k.cfg.Name
	k.mu.Lock()
	defer k.mu.Unlock()
	if st := k.state; acting == 0 && st != nil && st.Manager != name && time.Since(k.pushed) < 3*k.cfg.Interval {
		for _, m := range members {
			if m.Name == st.Manager && m.Alive && m.Pool == pool {
				mgr, ok = api.FailoverMember{Name: st.Manager, API: st.ManagerAPI, Pool: pool, Alive: true, Epoch: st.Epoch}, true
			}
		}
	}
	return mgr, ok
}

// otherActs is Step when another live member, mgr, acts as the pool's
// manager: the node steps down to a higher epoch, the declared manager
// takes the pool back once its hold-down is over, and a node that does
// not act follows mgr.
func (k *Keeper) otherActs(ctx context.Context, mgr api.FailoverMember, acting, highest int64) {
	if acting > 0 && mgr.Epoch > acting {
		if k.cfg.Original && k.cfg.HoldDown == 0 {
			// Back from a partition or a take-over: the declared
			// manager takes the pool back, above the other's epoch.
			k.becomeManager(ctx, highest+1, k.fetchState(ctx, mgr), "hand-back")
			return
		}
		if k.cfg.Original {
			// A partition healed: the declared manager follows the
			// replica for the hold-down before it takes the pool
			// back.
			k.mu.Lock()
			k.back = time.Now()
			k.mu.Unlock()
			k.cfg.Logger.Info("a replica acts at a higher epoch: following it for the hand-back hold-down", "manager", mgr.Name,
				"epoch", mgr.Epoch, "hold_down", k.cfg.HoldDown)
		}
		k.stepDown(mgr)
		return
	}
	if acting == 0 && k.cfg.Original {
		k.mu.Lock()
		if k.back.IsZero() {
			k.back = time.Now() // another member acts: the hold-down starts now
		}
		held := time.Since(k.back)
		k.mu.Unlock()
		if held >= k.cfg.HoldDown {
			from := k.fetchState(ctx, mgr)
			if from == nil && held < k.cfg.HoldDown+handBackGrace(k.cfg.Interval) {
				// The acting replica is alive but did not answer:
				// take the pool back on a later step, with what was
				// set while it acted (flocks, knobs, accounting),
				// rather than without it.
				k.follow(mgr)
				return
			}
			if from == nil {
				k.cfg.Logger.Warn("taking the pool back without the acting replica's state: what was set while it acted is lost",
					"manager", mgr.Name, "waited", held-k.cfg.HoldDown)
			}
			k.becomeManager(ctx, highest+1, from, "hand-back")
			return
		}
	}
	if acting == 0 {
		k.follow(mgr)
	}
}

// handBackGrace is how long past its hold-down the declared manager
// waits for the acting replica's state before it takes its pool back
// without it.
func handBackGrace(interval time.Duration) time.Duration {
	return max(10*interval, 30*time.Second)
}

// noneActs is Step when no live member acts as the pool's manager: the
// declared manager takes the pool, and a replica takes over once the
// manager has been missing for its rank's delay.
func (k *Keeper) noneActs(ctx context.Context, members []api.FailoverMember, acting, highest int64) {
	name := k.cfg.Name
	k.mu.Lock()
	if k.missing.IsZero() {
		k.missing = time.Now()
	}
	missing := time.Since(k.missing)
	rank, before := -1, []string(nil)
	if k.state != nil {
		rank = k.state.Rank(name)
		if rank > 0 {
			before = k.state.Replicas[:rank]
		}
	}
	k.mu.Unlock()
	if acting > 0 {
		return // this node's own tag is on its way
	}
	if k.cfg.Original {
		// A replica it followed may still act, though the sea shows it
		// no longer (gossip that took a loaded node for failed): its
		// state, when it answers, keeps what was set while it acted.
		var from *api.FailoverState
		if followed, ok := k.followedReplica(); ok {
			from = k.fetchState(ctx, followed)
		}
		k.becomeManager(ctx, highest+1, from, "no manager")
		return
	}
	if rank < 0 || !k.node.OwnPoolProven() {
		// Not a replica; or one whose certificate does not name
		// the pool, which the pool's members would not follow:
		// the next replica takes over.
		return
	}
	if missing >= k.node.ConfirmDelay()+TakeoverDelay(rank, LiveBefore(members, before), k.cfg.Step) {
		k.becomeManager(ctx, TakeoverEpoch(highest, rank), nil, "take-over")
	}
}

// followedReplica is the other member whose daemons the node follows as
// the pool's manager, if any.
func (k *Keeper) followedReplica() (api.FailoverMember, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.followName == "" || k.followName == k.cfg.Name || k.followAPI == "" || k.following == 0 {
		return api.FailoverMember{}, false
	}
	return api.FailoverMember{Name: k.followName, API: k.followAPI, Pool: k.cfg.Pool, Epoch: k.following}, true
}

// Acted records that the node acts as its pool's manager at epoch with
// state st, reached at apiAddr.
func (k *Keeper) Acted(epoch int64, st *api.FailoverState, apiAddr string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.epoch, k.state = epoch, st
	k.following, k.followName, k.followAPI, k.since = epoch, k.cfg.Name, apiAddr, time.Now()
	k.missing, k.back = time.Time{}, time.Time{}
}

// StepDown records that the node no longer acts as manager and returns
// the state it holds (nil when none).
func (k *Keeper) StepDown() *api.FailoverState {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.epoch = 0
	return k.state
}

// Follows reports whether the node's daemons follow mgr at its epoch.
func (k *Keeper) Follows(mgr api.FailoverMember) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.followAPI == mgr.API && k.following == mgr.Epoch
}

// Followed records that the node's daemons follow mgr now.
func (k *Keeper) Followed(mgr api.FailoverMember) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.following, k.followName, k.followAPI, k.since = mgr.Epoch, mgr.Name, mgr.API, time.Now()
}

// Replicable returns a copy of the state to replicate: false when the
// node does not act as manager or holds no state.
func (k *Keeper) Replicable() (api.FailoverState, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.epoch == 0 || k.state == nil {
		return api.FailoverState{}, false
	}
	return *k.state, true
}

// Replicated keeps st, which the node replicated, as its state, unless it
// acts at another epoch now.
func (k *Keeper) Replicated(st *api.FailoverState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.epoch == st.Epoch {
		k.state = st
	}
}

// Receive takes the state the pool's manager replicated to the node,
// unless its epoch is lower than the highest the node knows (known,
// false). A node that acts keeps its own state.
func (k *Keeper) Receive(st *api.FailoverState) (known int64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	known = k.epoch
	if k.state != nil {
		known = max(known, k.state.Epoch)
	}
	if st.Epoch < known {
		return known, false
	}
	if k.epoch == 0 {
		k.state = st
		k.pushed = time.Now()
	}
	return known, true
}

// Status fills in the Keeper's part of the node's fail-over status.
func (k *Keeper) Status(out *api.FailoverStatus) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out.Replicas = k.cfg.Replicas
	out.Acting, out.Epoch = k.epoch > 0, k.epoch
	out.Manager, out.ManagerAPI, out.ManagerEpoch, out.Since = k.followName, k.followAPI, k.following, k.since
	if k.state != nil {
		st := *k.state
		out.State = &st
	}
}
