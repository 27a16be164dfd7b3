package flock

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
)

// Node is what a pool's member does for its pool's flocking; the agent
// implements it.
type Node interface {
	// Members lists the sea's members as the node sees them.
	Members() []Member
	// SetTags sets (an empty value removes) the node's gossip tags.
	SetTags(tags map[string]string) error
	// Proven reports whether the node that makes ann proved it is a
	// member of the pool it announces (and, with an epoch, its acting
	// manager); it may prove it in the background and count from a
	// later call.
	Proven(ctx context.Context, ann api.FlockAnnouncement) bool
	// RTT estimates the round trip to a member.
	RTT(node string) (time.Duration, bool)
	// APIAddr is the node's API address; CondorHost the central manager
	// its daemons report to (its own APIAddr when it is the manager).
	APIAddr() string
	CondorHost() string
	// FetchStatus asks the central manager at addr for its flocking.
	FetchStatus(ctx context.Context, addr string) (*api.FlockStatus, error)
	// Machines queries the machine ads of the collector at addr, or of
	// the node's own collector when addr is "" (none, without error,
	// when the node runs no collector).
	Machines(ctx context.Context, addr string, req *wire.QueryAdsRequest) ([]wire.Ad, error)
}

// Config configures a Keeper.
type Config struct {
	// Pool and Name are the node's pool ("" for none: no flocking) and
	// name; Role its role, for errors.
	Pool, Name, Role string
	// DataDir is the node's data directory, where the flocks are kept
	// (DATA_DIR/flock); "" keeps them in memory.
	DataDir string
	// Knob reads the node's knobs (POND_FLOCK_INTERVAL, POND_FLOCK_TTL).
	Knob knobs.Reader
	// Go runs f in the background for as long as ctx lasts; the node
	// waits for it as it stops.
	Go     func(f func())
	Logger *slog.Logger
}

// Keeper keeps a pool member's flocking: on the node that acts as its
// pool's central manager, the pool's flock Manager, which announces the
// pool's spare capacity and keeps its flocks; on every member that runs a
// schedd, the Follower, which learns from the acting manager the pools
// to flock to. Its methods are safe for concurrent use.
type Keeper struct {
	cfg    Config
	node   Node
	ctx    context.Context
	follow *Follower

	// mgr is the running Manager, nil while the node is not its pool's
	// central manager; mu guards the changes, run stops the running one.
	mgr atomic.Pointer[Manager]
	mu  sync.Mutex
	run *managerRun
}

// managerRun is a running Manager's announcements.
type managerRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// NewKeeper returns the Keeper of node, whose work lasts as long as ctx.
func NewKeeper(ctx context.Context, cfg Config, node Node) *Keeper {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Go == nil {
		cfg.Go = func(f func()) { go f() }
	}
	k := &Keeper{cfg: cfg, node: node, ctx: ctx}
	k.follow = NewFollower(keeperFollower{k}, cfg.Logger)
	return k
}

// Start starts the flocking of a pool's member: the flock Manager when
// the node runs its pool's collector, and the Follower when it runs a
// schedd. A node of no pool does not flock.
func (k *Keeper) Start(collector, schedd bool) error {
	if k.cfg.Pool == "" {
		return nil
	}
	opts, err := k.options()
	if err != nil {
		return err
	}
	if collector {
		if err := k.Run(nil, false); err != nil {
			return err
		}
	}
	if schedd {
		k.cfg.Go(func() { k.follow.Follow(k.ctx, opts.Interval) })
		k.cfg.Go(func() { k.follow.Count(k.ctx, opts.Interval) })
	}
	return nil
}

// options reads the flocking knobs into the Manager's options.
func (k *Keeper) options() (Options, error) {
	r := k.cfg.Knob
	interval, err := r.Duration(knobs.FlockInterval)
	if err != nil {
		return Options{}, err
	}
	ttl, err := r.Duration(knobs.FlockTTL)
	if err != nil {
		return Options{}, err
	}
	if ttl <= interval {
		return Options{}, fmt.Errorf("%s (%v) must be more than %s (%v)", knobs.FlockTTL, ttl, knobs.FlockInterval, interval)
	}
	dir := ""
	if k.cfg.DataDir != "" {
		dir = filepath.Join(k.cfg.DataDir, "flock")
	}
	return Options{
		Pool: k.cfg.Pool, Node: k.cfg.Name, DataDir: dir, Interval: interval, TTL: ttl,
		Capacity: k.spareCapacity,
		SetTags:  k.node.SetTags,
		Members:  k.node.Members,
		Trusted: func(ann api.FlockAnnouncement) bool {
			// Proven in the background: an announcement counts from
			// the Manager's next look once its node proved it.
			return k.node.Proven(k.ctx, ann)
		},
		RTT:    k.node.RTT,
		Logger: k.cfg.Logger,
	}, nil
}

// Run makes the node its pool's flock manager: it announces the pool's
// spare capacity to the sea every POND_FLOCK_INTERVAL (expiring after
// POND_FLOCK_TTL), keeps the pool's flocks in DATA_DIR/flock and gives
// the pool's schedds the willing pools to flock to. A Manager that runs
// already goes on. With replace, the flocks become flocks (those of the
// central manager the node takes over from, or takes the pool back from);
// flocks that cannot replace them leave the Manager running with those
// it had, and the error says why.
func (k *Keeper) Run(flocks []api.FlockConfig, replace bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.mgr.Load()
	if m == nil {
		opts, err := k.options()
		if err != nil {
			return err
		}
		if m, err = NewManager(opts); err != nil {
			return err
		}
	}
	var err error
	if replace {
		if err = m.Replace(flocks); err != nil {
			err = fmt.Errorf("taking the pool's flocks: %w", err)
		}
	}
	if k.run == nil {
		ctx, cancel := context.WithCancel(k.ctx)
		run := &managerRun{cancel: cancel, done: make(chan struct{})}
		k.run = run
		k.mgr.Store(m)
		k.cfg.Go(func() {
			defer close(run.done)
			m.Run(ctx)
		})
	}
	return err
}

// Stop ends the node's time as its pool's flock manager (a replica hands
// the pool back): its announcement is withdrawn at once, so that the sea
// sees only the acting manager's.
func (k *Keeper) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	run := k.run
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
	k.run = nil
	k.mgr.Store(nil)
	if err := k.node.SetTags(map[string]string{TagSpare: "", TagAccept: ""}); err != nil {
		k.cfg.Logger.Warn("withdrawing the pool's announcement", "err", err)
	}
}

// Manager is the running flock Manager, nil while the node is not its
// pool's central manager.
func (k *Keeper) Manager() *Manager { return k.mgr.Load() }

// Configs is the flocks of the running Manager, as the fail-over state
// carries them; nil when none runs.
func (k *Keeper) Configs() json.RawMessage {
	m := k.mgr.Load()
	if m == nil {
		return nil
	}
	data, err := json.Marshal(m.Configs())
	if err != nil {
		return nil
	}
	return data
}

// Targets are the pools the node's pool's flocks admit, nearest first
// (Follower.Candidates), and, by pool name (lower case), how many jobs of
// the pool's other schedds run in each (Follower.Others).
func (k *Keeper) Targets() ([]api.FlockCandidate, map[string]int) {
	return k.follow.Candidates(), k.follow.Others()
}

// Follower is the node's Follower.
func (k *Keeper) Follower() *Follower { return k.follow }

// Accept says whether the collector on this node takes the submitter ads
// of node's schedd: always from the nodes that report to it (their cm tag
// is this node) or belong to its pool, and from unknown ones (not this
// collector's to judge), and from other pools' schedds when the pool's
// flocks accept their pool (AcceptList; no flock with an in policy
// accepts any).
func (k *Keeper) Accept(node string) error {
	m := k.mgr.Load()
	if m == nil {
		return nil
	}
	acc := m.Accept()
	if acc == nil {
		return nil
	}
	for _, mem := range k.node.Members() {
		if mem.Name != node {
			continue
		}
		pool := mem.Tags[api.TagPool]
		if cm := mem.Tags[api.TagCM]; cm == k.node.CondorHost() || cm == k.node.APIAddr() || strings.EqualFold(pool, k.cfg.Pool) {
			return nil
		}
		for _, p := range acc {
			if strings.EqualFold(p, pool) {
				return nil
			}
		}
		return fmt.Errorf("pool %s takes flocked jobs only from %s, not from pool %q", k.cfg.Pool, strings.Join(acc, ", "), pool)
	}
	return nil
}

// spareCapacity measures the pool's spare capacity from the node's
// collector: the unclaimed slots (a partitionable slot counts one per
// free cpu) and the resources of the largest.
func (k *Keeper) spareCapacity(ctx context.Context) (api.FlockCapacity, error) {
	ads, err := k.node.Machines(ctx, "", &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: `State == "Unclaimed"`,
		Projection: []string{"Cpus", "Memory", "GPUs", "PartitionableSlot"}})
	if err != nil {
		return api.FlockCapacity{}, err
	}
	var c api.FlockCapacity
	for _, w := range ads {
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

// keeperFollower is the Keeper's node as its Follower drives it.
type keeperFollower struct{ k *Keeper }

func (n keeperFollower) Manager() *Manager { return n.k.mgr.Load() }

func (n keeperFollower) CentralManager() string {
	if cm := n.k.node.CondorHost(); cm != n.k.node.APIAddr() {
		return cm
	}
	return ""
}

func (n keeperFollower) FetchStatus(ctx context.Context, addr string) (*api.FlockStatus, error) {
	return n.k.node.FetchStatus(ctx, addr)
}

func (n keeperFollower) PoolMembers() map[string]bool {
	mine := map[string]bool{}
	for _, m := range n.k.node.Members() {
		if m.Name != n.k.cfg.Name && strings.EqualFold(m.Tags[api.TagPool], n.k.cfg.Pool) {
			mine[strings.ToLower(m.Name)] = true
		}
	}
	return mine
}

// CountClaimed counts the claimed slots of the collector at addr whose
// ClientMachine is one of the schedds named in mine (lower case).
func (n keeperFollower) CountClaimed(ctx context.Context, addr string, mine map[string]bool) (int, error) {
	ads, err := n.k.node.Machines(ctx, addr,
		&wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: `State == "Claimed"`, Projection: []string{"ClientMachine"}})
	if err != nil {
		return 0, err
	}
	count := 0
	for _, w := range ads {
		name, err := classad.UnquoteString(w["ClientMachine"])
		if err != nil {
			continue
		}
		if _, after, ok := strings.Cut(name, "@"); ok {
			name = after
		}
		if mine[strings.ToLower(name)] {
			count++
		}
	}
	return count, nil
}

// Routes are the handlers of the flock routes (api.PathFlock,
// api.PathFlocks), by the pattern the node serves each at; on a node
// that is no pool's central manager they answer 409.
func (k *Keeper) Routes() map[string]http.HandlerFunc {
	notCM := func(w http.ResponseWriter) *Manager {
		if m := k.mgr.Load(); m != nil {
			return m
		}
		wire.WriteError(w, http.StatusConflict, fmt.Errorf("%s is not a pool's central manager (role %q, pool %q): flocks are set on central managers",
			k.cfg.Name, k.cfg.Role, k.cfg.Pool))
		return nil
	}
	return map[string]http.HandlerFunc{
		"GET " + api.PathFlock: func(w http.ResponseWriter, r *http.Request) {
			if m := notCM(w); m != nil {
				wire.WriteJSON(w, http.StatusOK, m.Status())
			}
		},
		"PUT " + api.PathFlocks + "{name}": func(w http.ResponseWriter, r *http.Request) {
			m := notCM(w)
			if m == nil {
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
			if err := m.Set(c); err != nil {
				wire.WriteError(w, http.StatusBadRequest, err)
				return
			}
			wire.WriteJSON(w, http.StatusOK, m.Status())
		},
		"DELETE " + api.PathFlocks + "{name}": func(w http.ResponseWriter, r *http.Request) {
			m := notCM(w)
			if m == nil {
				return
			}
			if _, err := m.Remove(r.PathValue("name")); err != nil {
				wire.WriteError(w, http.StatusInternalServerError, err)
				return
			}
			wire.WriteJSON(w, http.StatusOK, json.RawMessage(`{}`))
		},
	}
}
