package flock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/atomicfile"
)

// StateFile is the file in the manager's data directory that keeps its
// flocks across restarts.
const StateFile = "flocks.json"

// Options configure a Manager.
type Options struct {
	// Pool is the pool's name, Node its central manager's node name.
	Pool, Node string
	// DataDir keeps the flocks (StateFile); "" keeps them in memory.
	DataDir string
	// Interval is how often the announcement is renewed (default 5s);
	// TTL how long one lasts unless renewed (default 3 intervals).
	Interval, TTL time.Duration
	// Capacity measures the pool's spare capacity now.
	Capacity func(context.Context) (api.FlockCapacity, error)
	// SetTags sets serf tags on the node; an empty value removes one.
	SetTags func(map[string]string) error
	// Members lists the sea's members as this node sees them.
	Members func() []Member
	// Trusted reports whether an announcement another node makes is
	// proven: any member of the sea can set the tags it is read from, so
	// the agent asks the announcing node to prove it is a member of the
	// pool it announces (and, with an epoch, its acting manager). An
	// announcement that is not proven counts nowhere: not listed, not
	// flocked to, not taken for its pool's. nil trusts every one.
	Trusted func(api.FlockAnnouncement) bool
	// RTT estimates the round trip to a member (serf's coordinates).
	RTT    RTTFunc
	Now    func() time.Time
	Logger *slog.Logger
}

// Manager announces a pool's spare capacity, keeps the pool's flocks and
// works out the pools willing to take its jobs. It is safe for concurrent
// use.
type Manager struct {
	opts Options

	mu     sync.Mutex
	flocks map[string]*Policy
	last   api.FlockAnnouncement // the pool's latest announcement
	// kick asks Run to announce now (the flocks changed).
	kick chan struct{}
}

// NewManager returns a manager with the flocks its data directory kept.
func NewManager(opts Options) (*Manager, error) {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.TTL <= 0 {
		opts.TTL = 3 * opts.Interval
	}
	if opts.TTL <= opts.Interval {
		return nil, fmt.Errorf("flock: announcement TTL %v must exceed the interval %v", opts.TTL, opts.Interval)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Capacity == nil || opts.SetTags == nil || opts.Members == nil {
		return nil, errors.New("flock: a manager needs Capacity, SetTags and Members")
	}
	m := &Manager{opts: opts, flocks: map[string]*Policy{}, kick: make(chan struct{}, 1)}
	if err := m.load(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Manager) path() string { return filepath.Join(m.opts.DataDir, StateFile) }

// load reads the flocks the data directory kept.
func (m *Manager) load() error {
	if m.opts.DataDir == "" {
		return nil
	}
	data, err := os.ReadFile(m.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("flock: %w", err)
	}
	var cs []api.FlockConfig
	if err := json.Unmarshal(data, &cs); err != nil {
		return fmt.Errorf("flock: %s: %w", m.path(), err)
	}
	for _, c := range cs {
		p, err := Compile(c)
		if err != nil {
			return fmt.Errorf("flock: %s: %w", m.path(), err)
		}
		m.flocks[c.Name] = p
	}
	return nil
}

// save writes the flocks; called with mu held.
func (m *Manager) save() error {
	if m.opts.DataDir == "" {
		return nil
	}
	cs := m.configsLocked()
	data, err := json.MarshalIndent(cs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(m.opts.DataDir, 0o700); err != nil {
		return fmt.Errorf("flock: %w", err)
	}
	if err := atomicfile.Write(m.path(), data); err != nil {
		return fmt.Errorf("flock: %w", err)
	}
	return nil
}

func (m *Manager) configsLocked() []api.FlockConfig {
	cs := make([]api.FlockConfig, 0, len(m.flocks))
	for _, p := range m.flocks {
		cs = append(cs, p.FlockConfig)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	return cs
}

func (m *Manager) policiesLocked() []*Policy {
	ps := make([]*Policy, 0, len(m.flocks))
	for _, p := range m.flocks {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps
}

// Set adds or replaces a flock, kept across restarts.
func (m *Manager) Set(c api.FlockConfig) error {
	p, err := Compile(c)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	next := m.policiesLocked()
	next = append(next[:0:0], next...)
	for i, q := range next {
		if q.Name == c.Name {
			next = append(next[:i], next[i+1:]...)
			break
		}
	}
	if _, err := EncodeAccept(AcceptList(append(next, p))); err != nil {
		return err
	}
	old := m.flocks[c.Name]
	m.flocks[c.Name] = p
	if err := m.save(); err != nil {
		if old != nil {
			m.flocks[c.Name] = old
		} else {
			delete(m.flocks, c.Name)
		}
		return err
	}
	m.poke()
	return nil
}

// Configs returns the flocks the manager keeps, by name.
func (m *Manager) Configs() []api.FlockConfig {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.configsLocked()
}

// Replace replaces every flock with cs, kept across restarts: the flocks
// of the pool's central manager that a replica takes over from (or a
// declared manager takes back from its replica). Nothing changes when one
// of cs is wrong.
func (m *Manager) Replace(cs []api.FlockConfig) error {
	next := map[string]*Policy{}
	for _, c := range cs {
		p, err := Compile(c)
		if err != nil {
			return err
		}
		next[c.Name] = p
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := make([]*Policy, 0, len(next))
	for _, p := range next {
		ps = append(ps, p)
	}
	if _, err := EncodeAccept(AcceptList(ps)); err != nil {
		return err
	}
	old := m.flocks
	m.flocks = next
	if err := m.save(); err != nil {
		m.flocks = old
		return err
	}
	m.poke()
	return nil
}

// Remove removes a flock; it reports whether there was one.
func (m *Manager) Remove(name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.flocks[name]
	if !ok {
		return false, nil
	}
	delete(m.flocks, name)
	if err := m.save(); err != nil {
		m.flocks[name] = old
		return false, err
	}
	m.poke()
	return true, nil
}

func (m *Manager) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Announce measures the pool's capacity and sets the announcement's tags,
// to expire after the TTL. An announcement that says the same as the last
// one, which has more than half its TTL to run, is left as it is: each
// update of the tags is gossiped to the whole sea.
func (m *Manager) Announce(ctx context.Context) error {
	c, err := m.opts.Capacity(ctx)
	if err != nil {
		return fmt.Errorf("flock: measuring spare capacity: %w", err)
	}
	m.mu.Lock()
	acc := AcceptList(m.policiesLocked())
	last := m.last
	m.mu.Unlock()
	accTag, err := EncodeAccept(acc)
	if err != nil {
		return err
	}
	now := m.opts.Now()
	if last.FlockCapacity == c && slices.Equal(last.Accept, acc) && (last.Accept == nil) == (acc == nil) &&
		last.Expires.Sub(now) > m.opts.TTL/2 {
		return nil
	}
	exp := now.Add(m.opts.TTL)
	if err := m.opts.SetTags(map[string]string{TagSpare: EncodeSpare(c, exp), TagAccept: accTag}); err != nil {
		return fmt.Errorf("flock: announcing: %w", err)
	}
	m.mu.Lock()
	m.last = api.FlockAnnouncement{Pool: m.opts.Pool, Node: m.opts.Node, FlockCapacity: c, Expires: exp.Truncate(time.Second), Accept: acc}
	m.mu.Unlock()
	return nil
}

// Run renews the announcement every interval, and at once when the
// flocks change, until ctx ends. It leaves the tags as they are then: the
// node is leaving the sea (serf takes no tags any more), and the
// announcement expires anyway.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		if err := m.Announce(ctx); err != nil && ctx.Err() == nil {
			m.opts.Logger.Warn("flock announcement", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.kick:
		}
	}
}

// Announcements lists the unexpired announcements of the sea's pools,
// this one's included, by pool name: one per pool, that of its acting
// central manager (Current), among those Trusted.
func (m *Manager) Announcements() []api.FlockAnnouncement {
	now := m.opts.Now()
	var out []api.FlockAnnouncement
	for _, mem := range m.opts.Members() {
		a, err := Parse(mem, now)
		if err != nil {
			continue
		}
		if a.Node != m.opts.Node && m.opts.Trusted != nil && !m.opts.Trusted(a) {
			continue
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if !strings.EqualFold(out[i].Pool, out[j].Pool) {
			return strings.ToLower(out[i].Pool) < strings.ToLower(out[j].Pool)
		}
		return out[i].Node < out[j].Node
	})
	return Current(out)
}

// Willing lists the pools willing to take this pool's jobs now, nearest
// first (see Willing).
func (m *Manager) Willing() []api.FlockCandidate {
	m.mu.Lock()
	ps := m.policiesLocked()
	m.mu.Unlock()
	return Willing(m.opts.Pool, m.Announcements(), ps, m.opts.RTT)
}

// Accept lists the pools that may flock to this one, nil for any
// (AcceptList of its flocks).
func (m *Manager) Accept() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return AcceptList(m.policiesLocked())
}

// Admitted lists the pools whose policies let this pool's jobs run there
// now, idle slots or not, nearest first (see Admitted).
func (m *Manager) Admitted() []api.FlockCandidate {
	m.mu.Lock()
	ps := m.policiesLocked()
	m.mu.Unlock()
	return Admitted(m.opts.Pool, m.Announcements(), ps, m.opts.RTT)
}

// Status reports the manager's state.
func (m *Manager) Status() api.FlockStatus {
	m.mu.Lock()
	st := api.FlockStatus{Pool: m.opts.Pool, Node: m.opts.Node, Announcement: m.last, Flocks: m.configsLocked()}
	ps := m.policiesLocked()
	m.mu.Unlock()
	// The sea's announcements are read once for the three lists: each
	// read converts every member of the sea, and every member of the
	// pool asks for the status.
	st.Sea = m.Announcements()
	st.Willing = Willing(m.opts.Pool, st.Sea, ps, m.opts.RTT)
	st.Admitted = Admitted(m.opts.Pool, st.Sea, ps, m.opts.RTT)
	if st.Willing == nil {
		st.Willing = []api.FlockCandidate{}
	}
	if st.Sea == nil {
		st.Sea = []api.FlockAnnouncement{}
	}
	return st
}
