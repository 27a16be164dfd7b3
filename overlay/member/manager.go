// Package member is a node's side of pools on demand: it takes
// invitations into a pond, decides by its own join policy, holds at most one
// pond at a time under a lease, and returns to the sea on release, when the
// lease ends, or when the pond's central manager is gone.
package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
)

// Node is what a pond member needs of the agent it runs in. The agent
// implements it.
type Node interface {
	// Busy says why the node cannot join any pond (for example because it
	// belongs to a declared pool), or "" when it may.
	Busy() string
	// MachineAd returns the node's current machine ad, against which the
	// join policy is evaluated.
	MachineAd() *classad.Ad
	// SetMembership makes the node a member of m (nil: back to the sea): it
	// points the node's daemons at m's central manager and sets the serf
	// tags and the stamped attributes.
	SetMembership(ctx context.Context, m *api.Membership) error
	// CentralManagerAlive reports whether the central manager at addr is
	// alive in the sea.
	CentralManagerAlive(addr string) bool
	// Drain empties the node before it leaves a pond: it starts no new job
	// and waits for the running ones to end, evicting them (back to their
	// schedd's queue) when evict is true or ctx ends. It returns what it
	// did and a function that ends the drain once the node has left.
	Drain(ctx context.Context, evict bool) (api.DrainResult, func())
}

// Follower is a Node that knows where a pool's central manager moved to:
// the pool of the central manager at addr keeps replicas of it, and
// another of its members acts for it now (it took over, or the declared
// manager took the pool back). ActingCentralManager returns that
// member's API address, "" when the manager at addr still acts (or its
// pool keeps no replicas). A member of a pond whose central manager is
// such a pool's follows the pool's acting manager, instead of staying
// with one that is gone (until the orphan timeout) or no longer runs a
// collector.
type Follower interface {
	ActingCentralManager(addr string) string
}

// Options configure a Manager.
type Options struct {
	// Name is the node's name.
	Name string
	// DataDir holds the membership across restarts (pond.json).
	DataDir string
	// JoinPolicy is a ClassAd expression evaluated with the machine ad as
	// MY and the invitation (PondName, PondID, CentralManager, LeaseSeconds,
	// and its attributes) as TARGET; empty accepts every invitation.
	JoinPolicy string
	// Orphan is how long the central manager may be gone before the node
	// withdraws on its own.
	Orphan time.Duration
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// lapseDrain bounds the drain when a membership ends by itself (lease
// over, central manager gone): jobs are evicted, and reports to a schedd
// that does not answer are not waited for.
const lapseDrain = 5 * time.Second

// Manager holds a node's pond membership.
type Manager struct {
	node   Node
	opts   Options
	policy *classad.Program

	// release serializes releases, whose drains run outside mu.
	release sync.Mutex

	mu      sync.Mutex
	current *api.Membership
	cmGone  time.Time
}

// New returns the manager of node's membership, restoring a membership
// saved in opts.DataDir.
func New(node Node, opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Orphan == 0 {
		opts.Orphan = 30 * time.Second
	}
	m := &Manager{node: node, opts: opts}
	if opts.JoinPolicy != "" {
		p, err := classad.Compile(opts.JoinPolicy)
		if err != nil {
			return nil, fmt.Errorf("join policy: %w", err)
		}
		m.policy = p
	}
	if opts.DataDir != "" {
		data, err := os.ReadFile(m.path())
		switch {
		case err == nil:
			var cur api.Membership
			if err := json.Unmarshal(data, &cur); err != nil {
				return nil, fmt.Errorf("reading %s: %w", m.path(), err)
			}
			m.current = &cur
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	return m, nil
}

func (m *Manager) path() string { return filepath.Join(m.opts.DataDir, "pond.json") }

// Current returns the node's membership, or nil when it is free.
func (m *Manager) Current() *api.Membership {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current == nil {
		return nil
	}
	c := *m.current
	return &c
}

// Restore re-applies a membership saved before a restart.
func (m *Manager) Restore(ctx context.Context) error {
	cur := m.Current()
	if cur == nil {
		return nil
	}
	return m.node.SetMembership(ctx, cur)
}

func (m *Manager) save(cur *api.Membership) error {
	if m.opts.DataDir == "" {
		return nil
	}
	if cur == nil {
		if err := os.Remove(m.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return jsonfile.Write(m.path(), cur)
}

// invitationAd is the TARGET ad of the join policy.
func invitationAd(inv api.Invitation) *classad.Ad {
	ad := classad.NewAd()
	ad.SetString("PondName", inv.Pond)
	ad.SetString("PondID", inv.PondID)
	ad.SetString("CentralManager", inv.CentralManager)
	ad.SetInt("LeaseSeconds", int64(inv.Lease/time.Second))
	ad.SetInt("NumJobs", int64(len(inv.JobIDs)))
	for k, v := range inv.Attributes {
		if ad.SetExpr(k, v) != nil {
			ad.SetString(k, v)
		}
	}
	return ad
}

// Invite decides on an invitation. Accepting makes the node a member before
// Invite returns. An invitation from the pond the node already belongs to
// renews the lease.
func (m *Manager) Invite(ctx context.Context, inv api.Invitation) (api.Reply, error) {
	reply := api.Reply{Node: m.opts.Name}
	if inv.PondID == "" || inv.CentralManager == "" || inv.Pond == "" {
		return reply, errors.New("an invitation needs pond, pond_id and central_manager")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Now()
	if m.current != nil {
		if m.current.PondID != inv.PondID {
			reply.Reason = fmt.Sprintf("already a member of pond %s", m.current.Pond)
			return reply, nil
		}
		return m.renewLocked(ctx, inv, now, reply)
	}
	if why := m.node.Busy(); why != "" {
		reply.Reason = why
		return reply, nil
	}
	if m.policy != nil {
		my := m.node.MachineAd()
		if my == nil {
			my = classad.NewAd()
		}
		if !m.policy.EvalBool(my, invitationAd(inv)) {
			reply.Reason = "declined by the join policy " + m.policy.String()
			return reply, nil
		}
	}
	cur := &api.Membership{Invitation: inv, Since: now}
	if inv.Lease > 0 {
		cur.Expires = now.Add(inv.Lease)
	}
	if err := m.node.SetMembership(ctx, cur); err != nil {
		return reply, fmt.Errorf("joining pond %s: %w", inv.Pond, err)
	}
	if err := m.save(cur); err != nil {
		return reply, err
	}
	m.current = cur
	m.cmGone = time.Time{}
	m.opts.Logger.Info("joined pond", "pond", inv.Pond, "central_manager", inv.CentralManager)
	reply.Accepted = true
	return reply, nil
}

// renewLocked renews the membership with an invitation from its own pond:
// the lease starts again (a lease of zero no longer expires), and changed
// attributes or jobs are stamped on the node at once. One that names
// another central manager is declined. m.mu must be held.
func (m *Manager) renewLocked(ctx context.Context, inv api.Invitation, now time.Time, reply api.Reply) (api.Reply, error) {
	cur := *m.current
	cur.Expires = time.Time{}
	if inv.Lease > 0 {
		cur.Expires = now.Add(inv.Lease)
	}
	if inv.CentralManager != cur.CentralManager {
		// A pond keeps its central manager: a new one is a new pond.
		reply.Reason = fmt.Sprintf("already a member of pond %s, whose central manager is %s", cur.Pond, cur.CentralManager)
		return reply, nil
	}
	restamp := !maps.Equal(inv.Attributes, cur.Attributes) || !slices.Equal(inv.JobIDs, cur.JobIDs)
	cur.Invitation = inv
	if restamp {
		if err := m.node.SetMembership(ctx, &cur); err != nil {
			return reply, fmt.Errorf("renewing pond %s: %w", inv.Pond, err)
		}
	}
	if err := m.save(&cur); err != nil {
		return reply, err
	}
	m.current = &cur
	reply.Accepted = true
	return reply, nil
}

// Release returns the node to the sea if it belongs to the pond pondID
// (any pond when pondID is empty), draining it first as d says.
func (m *Manager) Release(ctx context.Context, pondID, why string, d api.Drain) (api.ReleaseResult, error) {
	res := api.ReleaseResult{Node: m.opts.Name}
	mode, err := api.ParseDrainMode(d.Mode)
	if err != nil {
		return res, err
	}
	m.release.Lock()
	defer m.release.Unlock()
	member := func() bool { return m.current != nil && (pondID == "" || m.current.PondID == pondID) }
	m.mu.Lock()
	ok := member()
	m.mu.Unlock()
	if !ok {
		return res, nil
	}
	dctx, cancel := context.WithTimeout(ctx, d.Limit())
	var resume func()
	res.Drain, resume = m.node.Drain(dctx, mode == api.DrainEvict)
	cancel()
	defer resume()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !member() {
		return res, nil // its lease ended meanwhile
	}
	if err := m.leaveLocked(ctx, why); err != nil {
		return res, err
	}
	res.Released = true
	return res, nil
}

func (m *Manager) leaveLocked(ctx context.Context, why string) error {
	if err := m.node.SetMembership(ctx, nil); err != nil {
		return fmt.Errorf("leaving pond %s: %w", m.current.Pond, err)
	}
	if err := m.save(nil); err != nil {
		return err
	}
	m.opts.Logger.Info("left pond", "pond", m.current.Pond, "reason", why)
	m.current = nil
	m.cmGone = time.Time{}
	return nil
}

// Check ends the membership when its lease has expired or its central
// manager has been gone longer than the orphan timeout. Run calls it
// periodically.
func (m *Manager) Check(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current == nil {
		return nil
	}
	now := m.opts.Now()
	if !m.current.Expires.IsZero() && now.After(m.current.Expires) {
		return m.lapseLocked(ctx, "lease expired")
	}
	if f, ok := m.node.(Follower); ok {
		if to := f.ActingCentralManager(m.current.CentralManager); to != "" && to != m.current.CentralManager {
			next := *m.current
			next.CentralManager = to
			if err := m.node.SetMembership(ctx, &next); err != nil {
				return fmt.Errorf("following pond %s's central manager to %s: %w", next.Pond, to, err)
			}
			m.opts.Logger.Info("following the pond's central manager", "pond", next.Pond, "from", m.current.CentralManager, "to", to)
			m.current, m.cmGone = &next, time.Time{}
			if err := m.save(&next); err != nil {
				return err
			}
			return nil
		}
	}
	if m.node.CentralManagerAlive(m.current.CentralManager) {
		m.cmGone = time.Time{}
		return nil
	}
	if m.cmGone.IsZero() {
		m.cmGone = now
		return nil
	}
	if now.Sub(m.cmGone) >= m.opts.Orphan {
		return m.lapseLocked(ctx, "central manager gone")
	}
	return nil
}

// lapseLocked ends a membership that ended by itself: running jobs are
// evicted (their schedd runs them elsewhere), then the node leaves.
func (m *Manager) lapseLocked(ctx context.Context, why string) error {
	dctx, cancel := context.WithTimeout(ctx, lapseDrain)
	res, resume := m.node.Drain(dctx, true)
	cancel()
	defer resume()
	if res.Evicted > 0 {
		m.opts.Logger.Info("evicted jobs before leaving pond", "pond", m.current.Pond, "jobs", res.Evicted, "reason", why)
	}
	return m.leaveLocked(ctx, why)
}

// Run calls Check every interval until ctx is done.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.Check(ctx); err != nil {
				m.opts.Logger.Warn("pond membership check", "err", err)
			}
		}
	}
}
