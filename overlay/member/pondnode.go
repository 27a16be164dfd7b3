// Package pondnode is a node's side of pools on demand: it takes
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
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
)

// Invitation asks a node to join a pond.
type Invitation struct {
	// Pond is the pond's name; PondID identifies one pond instance, so that
	// two ponds of the same name (two working directories) never share a
	// node.
	Pond   string `json:"pond"`
	PondID string `json:"pond_id"`
	// CentralManager is the API address the node's CONDOR_HOST is set to.
	CentralManager string `json:"central_manager"`
	// Lease is how long the membership lasts unless renewed; zero means
	// until released.
	Lease time.Duration `json:"lease"`
	// Attributes are stamped into the node's machine ad while it is a
	// member (PondName is always stamped).
	Attributes map[string]string `json:"attributes,omitempty"`
	// JobIDs are the jobs that caused the pond, as in PonD's rule that one
	// pond serves several distinct jobs.
	JobIDs []string `json:"job_ids,omitempty"`
}

// Membership is the pond a node belongs to.
type Membership struct {
	Invitation
	Since time.Time `json:"since"`
	// Expires is zero when the lease does not expire.
	Expires time.Time `json:"expires"`
}

// Reply answers an invitation.
type Reply struct {
	Node     string `json:"node"`
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
}

// Options configure a Manager.
type Options struct {
	// Name is the node's name.
	Name string
	// DataDir holds the membership across restarts (pond.json).
	DataDir string
	// Busy reports why the node cannot join any pond (for example because
	// it belongs to a declared pool), or "" when it may.
	Busy func() string
	// Ad returns the node's current machine ad, against which JoinPolicy
	// is evaluated.
	Ad func() *classad.Ad
	// JoinPolicy is a ClassAd expression evaluated with the machine ad as
	// MY and the invitation (PondName, PondID, CentralManager, LeaseSeconds,
	// and its attributes) as TARGET; empty accepts every invitation.
	JoinPolicy string
	// Apply makes the node a member of m (nil: back to the sea): it sets
	// CONDOR_HOST, the serf tags and the stamped attributes.
	Apply func(ctx context.Context, m *Membership) error
	// CentralManagerAlive reports whether the central manager at addr is
	// alive in the sea.
	CentralManagerAlive func(addr string) bool
	// Drain empties the node before it leaves a pond: it starts no new
	// job and waits for the running ones to end, evicting them (back to
	// their schedd's queue) when evict is true or ctx ends. It returns what
	// it did and a function that ends the drain once the node has left.
	// Nil leaves at once.
	Drain func(ctx context.Context, evict bool) (DrainResult, func())
	// Orphan is how long the central manager may be gone before the node
	// withdraws on its own.
	Orphan time.Duration
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Drain modes of a release.
const (
	// DrainWait lets running jobs finish (up to the drain timeout, then
	// evicts them); no new job starts.
	DrainWait = "wait"
	// DrainEvict stops running jobs at once; their schedd runs them
	// elsewhere.
	DrainEvict = "evict"
)

// DefaultDrainTimeout bounds a DrainWait release that names no timeout.
const DefaultDrainTimeout = 10 * time.Minute

// lapseDrain bounds the drain when a membership ends by itself (lease
// over, central manager gone): jobs are evicted, and reports to a schedd
// that does not answer are not waited for.
const lapseDrain = 5 * time.Second

// Drain says how a member empties itself before leaving its pond.
type Drain struct {
	// Mode is DrainWait (the default) or DrainEvict.
	Mode string `json:"mode,omitempty"`
	// Timeout bounds a DrainWait; DefaultDrainTimeout when zero.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Limit is how long a DrainWait may last: Timeout, or DefaultDrainTimeout.
func (d Drain) Limit() time.Duration {
	if d.Timeout <= 0 {
		return DefaultDrainTimeout
	}
	return d.Timeout
}

// DrainModeError is the error of a drain mode that is neither DrainWait
// nor DrainEvict.
type DrainModeError struct{ Mode string }

func (e *DrainModeError) Error() string {
	return fmt.Sprintf("drain mode %q: want %q or %q", e.Mode, DrainWait, DrainEvict)
}

// ParseDrainMode checks a drain mode; "" is DrainWait.
func ParseDrainMode(s string) (string, error) {
	switch s {
	case "", DrainWait:
		return DrainWait, nil
	case DrainEvict:
		return DrainEvict, nil
	}
	return "", &DrainModeError{Mode: s}
}

// DrainResult says what a member's drain did.
type DrainResult struct {
	// Finished is how many jobs ran to their end during the drain.
	Finished int `json:"finished"`
	// Evicted is how many jobs were stopped and handed back to their
	// schedd.
	Evicted int `json:"evicted"`
	// Took is how long the drain lasted.
	Took time.Duration `json:"took"`
}

// ReleaseResult answers a release.
type ReleaseResult struct {
	Node string `json:"node"`
	// Released is true when the node left the pond for this release.
	Released bool        `json:"released"`
	Drain    DrainResult `json:"drain"`
}

// Manager holds a node's pond membership.
type Manager struct {
	opts   Options
	policy *classad.Program

	// release serializes releases, whose drains run outside mu.
	release sync.Mutex

	mu      sync.Mutex
	current *Membership
	cmGone  time.Time
}

// New returns a manager, restoring a membership saved in DataDir.
func New(opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Orphan == 0 {
		opts.Orphan = 30 * time.Second
	}
	m := &Manager{opts: opts}
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
			var cur Membership
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
func (m *Manager) Current() *Membership {
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
	return m.opts.Apply(ctx, cur)
}

func (m *Manager) save(cur *Membership) error {
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
func invitationAd(inv Invitation) *classad.Ad {
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
func (m *Manager) Invite(ctx context.Context, inv Invitation) (Reply, error) {
	reply := Reply{Node: m.opts.Name}
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
		// Renewal.
		if inv.Lease > 0 {
			m.current.Expires = now.Add(inv.Lease)
		}
		reply.Accepted = true
		return reply, m.save(m.current)
	}
	if m.opts.Busy != nil {
		if why := m.opts.Busy(); why != "" {
			reply.Reason = why
			return reply, nil
		}
	}
	if m.policy != nil {
		var my *classad.Ad
		if m.opts.Ad != nil {
			my = m.opts.Ad()
		}
		if my == nil {
			my = classad.NewAd()
		}
		if !m.policy.EvalBool(my, invitationAd(inv)) {
			reply.Reason = "declined by the join policy " + m.policy.String()
			return reply, nil
		}
	}
	cur := &Membership{Invitation: inv, Since: now}
	if inv.Lease > 0 {
		cur.Expires = now.Add(inv.Lease)
	}
	if err := m.opts.Apply(ctx, cur); err != nil {
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

// Release returns the node to the sea if it belongs to the pond pondID
// (any pond when pondID is empty), draining it first as d says.
func (m *Manager) Release(ctx context.Context, pondID, why string, d Drain) (ReleaseResult, error) {
	res := ReleaseResult{Node: m.opts.Name}
	mode, err := ParseDrainMode(d.Mode)
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
	if m.opts.Drain != nil {
		dctx, cancel := context.WithTimeout(ctx, d.Limit())
		var resume func()
		res.Drain, resume = m.opts.Drain(dctx, mode == DrainEvict)
		cancel()
		defer resume()
	}
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
	if err := m.opts.Apply(ctx, nil); err != nil {
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
	if m.opts.CentralManagerAlive == nil {
		return nil
	}
	if m.opts.CentralManagerAlive(m.current.CentralManager) {
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
	if m.opts.Drain != nil {
		dctx, cancel := context.WithTimeout(ctx, lapseDrain)
		res, resume := m.opts.Drain(dctx, true)
		cancel()
		defer resume()
		if res.Evicted > 0 {
			m.opts.Logger.Info("evicted jobs before leaving pond", "pond", m.current.Pond, "jobs", res.Evicted, "reason", why)
		}
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
