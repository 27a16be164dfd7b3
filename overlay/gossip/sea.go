// Package sea runs a node's membership in the sea: the serf gossip overlay
// that every pond agent joins. It wraps hashicorp/serf with pond's tag
// conventions, gossip timing profiles, a persistent snapshot for rejoining
// after a restart, and a keyring file for gossip encryption.
package gossip

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/overlay/api"
)

// DefaultMoveGrace is how long a node that left, or failed, while it
// showed TagMoving is waited for (WaitMoved) before its peers take it for
// lost, unless Config.MoveGrace says otherwise.
const DefaultMoveGrace = 30 * time.Second

// MoveGrace is DefaultMoveGrace; Sea.MoveGrace is a running sea's own.
const MoveGrace = DefaultMoveGrace

// ProtocolVersion is the value of TagVersion for this build. Version 2
// sends tree queries in binary frames; version 1 nodes read only JSON
// frames, and version 2 nodes write JSON to them.
const ProtocolVersion = "2"

// File names inside a data directory.
const (
	SnapshotFile = "serf.snapshot"
	KeyringFile  = "serf.keyring"
)

// Config says how to run a node's membership.
type Config struct {
	// NodeName is the node's unique name in the sea.
	NodeName string
	// BindAddr is the gossip address, IP:PORT; port 0 picks a free port.
	BindAddr string
	// AdvertiseAddr, if set, is the address other nodes use to reach this
	// one (IP:PORT); it defaults to the bound address.
	AdvertiseAddr string
	// Tags are the initial serf tags.
	Tags map[string]string
	// DataDir, if set, holds the serf snapshot (so a restarted node
	// rejoins the nodes it knew) and the keyring file.
	DataDir string
	// EncryptKey is a base64 gossip key (16, 24 or 32 bytes). When the
	// data dir already holds a keyring, that keyring wins and EncryptKey is
	// added to it as a secondary key if missing.
	EncryptKey string
	// Profile is the gossip timing profile: "lan" (default), "wan"
	// (members far apart, or starved of CPU), "local" or "fast" (tight
	// timings for tests).
	Profile string
	// NoCompression turns off the compression of gossip messages. It
	// pays off on a real network; on loopback, where every agent of a
	// sea shares the same cores, it only costs CPU (an LZW table
	// allocated and cleared per packet).
	NoCompression bool
	// Logger receives serf's and memberlist's log lines; nil discards them.
	Logger *slog.Logger
	// Insecure allows unencrypted gossip on an address other than a
	// loopback one: without it, Start refuses to gossip in the clear
	// where other hosts can listen and inject members.
	Insecure bool
	// MoveGrace is how long a node that left, or failed, while it showed
	// TagMoving is waited for (WaitMoved) before it is taken for lost;
	// zero means DefaultMoveGrace. Tests that lose a moving node on
	// purpose shorten it.
	MoveGrace time.Duration
	// Transport, if set, carries the node's gossip instead of sockets
	// bound to BindAddr: a worker behind a relay (overlay/relay) gossips
	// through its tunnel and binds nothing. AdvertiseAddr must then be the
	// address the transport is reached at.
	Transport memberlist.Transport
}

// DefaultBindAddr is the gossip address of a Config without one: loopback
// only, so that a sea reaches beyond this host only when told to.
const DefaultBindAddr = "127.0.0.1:7946"

// ErrInsecure is returned by Start for unencrypted gossip on an address
// that is not a loopback one, unless Config.Insecure allows it.
var ErrInsecure = errors.New("gossip would be unencrypted on an address other hosts can reach: make a key with `pondctl sea keygen` and pass it with -encrypt KEY, bind a loopback address, or pass -insecure-gossip to gossip in the clear")

// Sea is a running membership.
type Sea struct {
	// cfg is the configuration Start was given, with the advertise
	// address and transport of the last Move.
	cfg    Config
	logger *slog.Logger
	// cur is the serf instance running now: Move replaces it.
	cur atomic.Pointer[serf.Serf]
	// addr is the gossip address other nodes reach this one at.
	addr atomic.Pointer[string]
	// moving is the instance Move is replacing: its shutdown is not the
	// node's.
	moving atomic.Pointer[serf.Serf]
	// done is closed when the node shuts down (not when Move replaces
	// its instance).
	done     chan struct{}
	doneOnce sync.Once

	subMu sync.Mutex
	subs  []chan serf.Event
	// failures counts the members seen failing (metrics.go).
	failures atomic.Uint64

	// tagMu guards tags, the tags this node wants others to see: they take
	// effect locally at once, and tagKick wakes the worker that hands the
	// latest set to serf (whose update waits for its broadcast).
	tagMu   sync.Mutex
	tags    map[string]string
	tagKick chan struct{}
	// updateMu serializes UpdateTags.
	updateMu sync.Mutex
	// movingTo is the address of a move under way (TagMoving), which
	// SetTags keeps in the tags until the move is done.
	movingTo string
	// moveMu orders moves.
	moveMu sync.Mutex
	// setMu orders the worker's updates and Leave: memberlist panics on
	// an update once the node that left has been reaped, so none is
	// handed to serf after Leave began (left).
	setMu sync.Mutex
	left  bool
	// joinMu orders the joins (Join, the synchronisations after one) and
	// Leave: serf announces each join at the node's clock of the moment,
	// so that a join that ends after the leave was announced announces
	// the node again, later than its leave, and the others take it for
	// alive until its silence makes it failed. No join starts once
	// leaving is set, and Leave waits for one under way.
	joinMu  sync.Mutex
	leaving bool

	// settle are the delays after a join at which the node synchronises
	// its full membership with a few random members once more.
	settle []time.Duration

	// probe is the profile's probe interval (see ConfirmFailed).
	probe time.Duration
	// moveGrace is Config.MoveGrace or its default (WaitMoved).
	moveGrace time.Duration
}

func memberlistConfig(profile string) (*memberlist.Config, error) {
	switch profile {
	case "", "lan":
		return memberlist.DefaultLANConfig(), nil
	case "wan":
		// Longer probe timeouts and suspicion: for members far apart,
		// or many agents sharing a few cores, whose answers can be
		// seconds late without their being gone.
		return memberlist.DefaultWANConfig(), nil
	case "local":
		return memberlist.DefaultLocalConfig(), nil
	case "fast":
		c := memberlist.DefaultLocalConfig()
		c.ProbeInterval = 200 * time.Millisecond
		c.ProbeTimeout = 100 * time.Millisecond
		c.SuspicionMult = 2
		c.SuspicionMaxTimeoutMult = 3
		c.GossipInterval = 50 * time.Millisecond
		c.GossipToTheDeadTime = 2 * time.Second
		c.PushPullInterval = 2 * time.Second
		c.TCPTimeout = 2 * time.Second
		return c, nil
	}
	return nil, fmt.Errorf("unknown gossip profile %q (want lan, wan, local or fast)", profile)
}

// Start creates the serf instance and binds its sockets. It does not join
// anyone; call Join.
func Start(ctx context.Context, cfg Config) (*Sea, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("sea: node name is empty")
	}
	if cfg.MoveGrace < 0 {
		return nil, fmt.Errorf("sea: move grace %v is negative", cfg.MoveGrace)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mc, err := memberlistConfig(cfg.Profile)
	if err != nil {
		return nil, fmt.Errorf("sea: %w", err)
	}
	out := &Sea{cfg: cfg, logger: logger, tagKick: make(chan struct{}, 1), settle: settleDelays(cfg.Profile),
		probe: mc.ProbeInterval, moveGrace: cmp.Or(cfg.MoveGrace, DefaultMoveGrace), done: make(chan struct{})}
	if err := out.create(cfg, cfg.Tags); err != nil {
		return nil, err
	}
	go out.tagWorker()
	return out, nil
}

// create starts a serf instance of cfg with tags and makes it the
// node's: Start's, and Move's under the same name.
func (s *Sea) create(cfg Config, tags map[string]string) error {
	mc, err := memberlistConfig(cfg.Profile)
	if err != nil {
		return fmt.Errorf("sea: %w", err)
	}
	host, port, err := splitHostPort(cmp.Or(cfg.BindAddr, DefaultBindAddr), "0.0.0.0", 7946)
	if err != nil {
		return fmt.Errorf("sea: bind address: %w", err)
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.EnableCompression = !cfg.NoCompression
	if cfg.AdvertiseAddr != "" {
		ah, ap, err := splitHostPort(cfg.AdvertiseAddr, "", port)
		if err != nil {
			return fmt.Errorf("sea: advertise address: %w", err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	stdlog := log.New(&logWriter{logger: s.logger}, "", 0)
	mc.Logger = stdlog
	if cfg.Transport != nil {
		// Nothing is bound here: whether other hosts can listen in is
		// a question of the address the gossip is reached at.
		mc.Transport = cfg.Transport
		host = mc.AdvertiseAddr
	}

	sc := serf.DefaultConfig()
	sc.NodeName = cfg.NodeName
	sc.Tags = tags
	sc.MemberlistConfig = mc
	sc.Logger = stdlog
	sc.RejoinAfterLeave = true
	sc.EnableNameConflictResolution = true
	if cfg.Profile == "fast" {
		sc.ReapInterval = time.Second
		sc.ReconnectInterval = time.Second
		sc.LeavePropagateDelay = 200 * time.Millisecond
		sc.BroadcastTimeout = 2 * time.Second
	}
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return fmt.Errorf("sea: %w", err)
		}
		sc.SnapshotPath = filepath.Join(cfg.DataDir, SnapshotFile)
	}
	if err := setupKeyring(mc, sc, cfg); err != nil {
		return fmt.Errorf("sea: %w", err)
	}
	if mc.Keyring == nil && !cfg.Insecure && !api.IsLoopback(host) {
		return fmt.Errorf("sea: bind address %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), ErrInsecure)
	}
	events := make(chan serf.Event, 256)
	sc.EventCh = events
	inst, err := serf.Create(sc)
	if err != nil {
		return fmt.Errorf("sea: starting serf on %s: %w", cmp.Or(cfg.AdvertiseAddr, cfg.BindAddr), err)
	}
	addr := gossipAddr(inst.LocalMember())
	s.addr.Store(&addr)
	s.cur.Store(inst)
	go s.dispatch(inst, events)
	go func() {
		<-inst.ShutdownCh()
		if s.moving.Load() != inst {
			s.doneOnce.Do(func() { close(s.done) })
		}
	}()
	return nil
}

// dispatch hands serf's events (member changes, user events and queries)
// to the subscribers until serf shuts down.
func (s *Sea) dispatch(inst *serf.Serf, events <-chan serf.Event) {
	for {
		select {
		case ev := <-events:
			s.countEvent(ev)
			if me, ok := ev.(serf.MemberEvent); ok {
				for _, m := range me.Members {
					s.logger.Debug("member event", "event", me.EventType().String(), "member", m.Name)
				}
			}
			s.subMu.Lock()
			for _, ch := range s.subs {
				select {
				case ch <- ev:
				default:
					s.logger.Warn("event subscriber is not keeping up; event dropped", "event", ev.String())
				}
			}
			s.subMu.Unlock()
		case <-inst.ShutdownCh():
			return
		}
	}
}

// ConfirmFailed reports whether the member name, which serf declared
// failed, is still not alive two probe intervals later (or is no longer
// known). A member declared dead falsely refutes it within a few gossip
// rounds and is alive again by then: a node back from a partition gossips
// the deaths it saw while cut off, and its peers believe them until the
// accused answers. It reports false if ctx ends first.
func (s *Sea) ConfirmFailed(ctx context.Context, name string) bool {
	t := time.NewTimer(2 * s.probe)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	for _, m := range s.Serf().Members() {
		if m.Name == name {
			return m.Status != serf.StatusAlive
		}
	}
	return true
}

// ConfirmDelay is how long ConfirmFailed waits before it looks again: two
// probe intervals of the gossip profile.
func (s *Sea) ConfirmDelay() time.Duration { return 2 * s.probe }

// Subscribe returns a channel that receives every serf event from now on:
// serf.MemberEvent, serf.UserEvent and *serf.Query (which the subscriber
// answers with Respond). Events are dropped, with a warning, when the
// channel's buffer of size buf is full.
func (s *Sea) Subscribe(buf int) <-chan serf.Event {
	ch := make(chan serf.Event, max(buf, 1))
	s.subMu.Lock()
	s.subs = append(s.subs, ch)
	s.subMu.Unlock()
	return ch
}

func splitHostPort(addr, defHost string, defPort int) (string, int, error) {
	if addr == "" {
		return defHost, defPort, nil
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		// A bare IP means the default port.
		if ip := net.ParseIP(addr); ip != nil {
			return addr, defPort, nil
		}
		return "", 0, fmt.Errorf("%q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port %q", addr, p)
	}
	if h == "" {
		h = defHost
	}
	return h, port, nil
}

// GossipAddr is the address other nodes join this one at, IP:PORT.
func (s *Sea) GossipAddr() string { return *s.addr.Load() }

// Serf exposes the underlying serf instance for callers (such as the tree
// query service) that need serf queries or user events. Move replaces
// it: callers ask for it each time rather than keep it.
func (s *Sea) Serf() *serf.Serf { return s.cur.Load() }

// Join contacts the given gossip addresses, retrying with exponential
// backoff (starting at initial, capped at 5 s) until at least one answers or
// ctx is done. It returns how many nodes were contacted.
func (s *Sea) Join(ctx context.Context, addrs []string, initial time.Duration) (int, error) {
	if len(addrs) == 0 {
		return 0, nil
	}
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	delay := initial
	for attempt := 1; ; attempt++ {
		n, err := s.join(addrs)
		if errors.Is(err, errLeaving) {
			return 0, fmt.Errorf("sea: joining %v: %w", addrs, err)
		}
		if n > 0 {
			s.logger.Info("joined the sea", "contacted", n, "attempt", attempt)
			go s.settleAfterJoin(ctx)
			return n, nil
		}
		s.logger.Warn("join failed; retrying", "addrs", addrs, "attempt", attempt, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("sea: joining %v: %w (last error: %v)", addrs, ctx.Err(), err)
		case <-s.done:
			return 0, fmt.Errorf("sea: joining %v: shut down", addrs)
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// JoinRetry is the first wait between attempts to join (Sea.Join) for a
// node of the gossip profile: shorter for the fast and local profiles of
// test and single-host seas.
func JoinRetry(profile string) time.Duration {
	if profile == "fast" || profile == "local" {
		return 100 * time.Millisecond
	}
	return 500 * time.Millisecond
}

// settleDelays are the delays after a join at which a node exchanges its
// full membership with random members again. A join exchanges state with
// the contacted node only; nodes that join at about the same moment learn
// of each other from gossip broadcasts, which can miss a node, or else only
// at the next periodic push-pull (15 s with the local profile, 30 s on a
// LAN). A few early exchanges make a sea created all at once agree within
// about a second.
func settleDelays(profile string) []time.Duration {
	if profile == "fast" {
		return []time.Duration{250 * time.Millisecond, time.Second, 3 * time.Second}
	}
	return []time.Duration{500 * time.Millisecond, 2 * time.Second, 6 * time.Second}
}

// settleAfterJoin synchronises the membership with up to two random alive
// members at each settle delay, until ctx is done or serf shuts down.
func (s *Sea) settleAfterJoin(ctx context.Context) {
	var waited time.Duration
	for _, d := range s.settle {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-time.After(d - waited):
		}
		waited = d
		peers := alivePeers(s.Serf(), 2)
		if len(peers) == 0 {
			continue
		}
		if _, err := s.join(peers); errors.Is(err, errLeaving) {
			return
		} else if err != nil {
			s.logger.Debug("membership sync failed", "peers", peers, "err", err)
		}
	}
}

// errLeaving is the error of a join once the node leaves the sea.
var errLeaving = errors.New("the node is leaving the sea")

// join has serf join addrs, unless the node is leaving (see joinMu).
func (s *Sea) join(addrs []string) (int, error) {
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	if s.leaving {
		return 0, errLeaving
	}
	return s.Serf().Join(addrs, true)
}

// gossipAddr is the address member m gossips at, IP:PORT.
func gossipAddr(m serf.Member) string {
	return net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
}

// LocalMember is this node's own member entry.
func (s *Sea) LocalMember() api.Member {
	m := s.convert(s.Serf().LocalMember())
	s.tagMu.Lock()
	if s.tags != nil {
		m.Tags = copyTags(s.tags)
	}
	s.tagMu.Unlock()
	return m
}

func copyTags(t map[string]string) map[string]string {
	out := make(map[string]string, len(t))
	for k, v := range t {
		out[k] = v
	}
	return out
}

// Members lists every node this one knows of, sorted by name.
func (s *Sea) Members() []api.Member {
	ms := s.Serf().Members()
	out := make([]api.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, s.convert(m))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Sea) convert(m serf.Member) api.Member {
	tags := make(map[string]string, len(m.Tags))
	for k, v := range m.Tags {
		tags[k] = v
	}
	out := api.Member{Name: m.Name, Addr: m.Addr.String(), Port: m.Port, Tags: tags, Status: m.Status.String(),
		Reach: api.ReachOf(tags), Relay: api.RelayOf(tags)}
	if c, ok := s.Serf().GetCachedCoordinate(m.Name); ok {
		out.Coordinate = (*api.Coordinate)(c)
	}
	return out
}

// MaxTagBytes bounds the encoded size of a node's tags, as serf does.
const MaxTagBytes = 512

// SetTags replaces the node's tags. The new tags take effect locally at
// once (LocalMember reports them) and reach the rest of the sea by gossip;
// SetTags does not wait for the broadcast, which on a busy sea can take
// seconds. Bursts of updates are coalesced: the latest set wins.
func (s *Sea) SetTags(tags map[string]string) error {
	size := 0
	for k, v := range tags {
		size += len(k) + len(v) + 4
	}
	if size > MaxTagBytes {
		return fmt.Errorf("sea: setting tags: %d bytes of tags, more than the %d serf allows", size, MaxTagBytes)
	}
	s.tagMu.Lock()
	s.tags = copyTags(tags)
	if s.movingTo != "" {
		s.tags[api.TagMoving] = s.movingTo
	}
	s.tagMu.Unlock()
	s.kickTags()
	return nil
}

// UpdateTags sets several of the node's tags in one update (one serf
// broadcast rather than several): an empty value removes a tag, but the
// pool and pond tags are kept, empty. Updates are serialized, so that
// none undoes another's.
func (s *Sea) UpdateTags(update map[string]string) error {
	s.updateMu.Lock()
	defer s.updateMu.Unlock()
	tags := s.LocalMember().Tags
	for key, value := range update {
		if value == "" && key != api.TagPool && key != api.TagPond {
			delete(tags, key)
		} else {
			tags[key] = value
		}
	}
	return s.SetTags(tags)
}

func (s *Sea) kickTags() {
	select {
	case s.tagKick <- struct{}{}:
	default:
	}
}

// Move moves the node to another gossip address, advertise, reached
// through transport (nil: sockets bound on advertise), as a
// worker does whose relay gave it another gossip port (overlay/relay).
// memberlist keeps the address a member started with, and its peers
// refuse another one for a member alive under the same name; so the node
// shows TagMoving, leaves the sea, starts serf again under the same name
// and tags at the new address, and joins the members it knew, which take
// the new address for a member that left. Peers see the node leave and
// join again; TagMoving tells them not to take it for lost meanwhile
// (WaitMoved). The tag goes once the node has joined again.
//
// The serf instance (Serf) changes; subscribers keep their channels and
// ShutdownCh is not closed. Move fails only when the node cannot start
// again (it has shut down then) or ctx ends before it joins anyone.
func (s *Sea) Move(ctx context.Context, advertise string, transport memberlist.Transport) error {
	s.moveMu.Lock()
	defer s.moveMu.Unlock()
	old := s.Serf()
	s.setMu.Lock()
	if s.left {
		s.setMu.Unlock()
		return errors.New("sea: moving: the node has left the sea")
	}
	from := s.GossipAddr()
	s.tagMu.Lock()
	s.movingTo = advertise
	tags := s.tags
	if tags == nil {
		tags = old.LocalMember().Tags
	}
	tags = copyTags(tags)
	tags[api.TagMoving] = advertise
	s.tags = copyTags(tags)
	s.tagMu.Unlock()
	// The sea learns of the move before the node leaves: a peer that
	// sees it leave then waits for it.
	if err := old.SetTags(tags); err != nil {
		s.logger.Debug("moving: showing the move", "err", err)
	}
	var peers []string
	for _, m := range old.Members() {
		if m.Status == serf.StatusAlive && m.Name != s.cfg.NodeName {
			peers = append(peers, gossipAddr(m))
		}
	}
	s.logger.Info("moving to another gossip address: leaving the sea and joining it again there", "from", from, "to", advertise, "peers", len(peers))
	s.moving.Store(old)
	if err := old.Leave(); err != nil {
		s.logger.Warn("moving: leaving the sea", "err", err)
	}
	if err := old.Shutdown(); err != nil {
		s.logger.Warn("moving: shutting the old membership down", "err", err)
	}
	cfg := s.cfg
	cfg.AdvertiseAddr, cfg.Transport = advertise, transport
	if transport == nil {
		cfg.BindAddr = advertise
	}
	err := s.create(cfg, tags)
	if err != nil {
		s.doneOnce.Do(func() { close(s.done) })
		s.setMu.Unlock()
		return fmt.Errorf("sea: moving to %s: %w", advertise, err)
	}
	s.cfg = cfg
	s.setMu.Unlock()
	if len(peers) > 0 {
		if _, err := s.Join(ctx, peers, 100*time.Millisecond); err != nil {
			return fmt.Errorf("sea: moving to %s: %w", advertise, err)
		}
	}
	// The peers the join did not reach learn the new address by gossip
	// within a few probe intervals; the tag goes after them.
	select {
	case <-ctx.Done():
	case <-s.done:
	case <-time.After(s.ConfirmDelay()):
	}
	s.tagMu.Lock()
	s.movingTo = ""
	delete(s.tags, api.TagMoving)
	s.tagMu.Unlock()
	s.kickTags()
	s.logger.Info("moved to another gossip address", "from", from, "to", s.GossipAddr())
	return nil
}

// WaitMoved waits, up to the sea's MoveGrace, for the member name, which
// left or failed while it showed TagMoving, to be alive again (at its new
// address). It reports whether it came back; false too when ctx ends
// first.
func (s *Sea) WaitMoved(ctx context.Context, name string) bool {
	return s.waitAlive(ctx, name, s.MoveGrace())
}

// MoveGrace is how long WaitMoved waits: Config.MoveGrace, or
// DefaultMoveGrace.
func (s *Sea) MoveGrace() time.Duration { return s.moveGrace }

func (s *Sea) waitAlive(ctx context.Context, name string, grace time.Duration) bool {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(max(s.probe/2, 50*time.Millisecond))
	defer tick.Stop()
	for {
		for _, m := range s.Serf().Members() {
			if m.Name == name && m.Status == serf.StatusAlive {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-s.done:
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// tagWorker hands the wanted tags to serf, one update at a time, until serf
// shuts down.
func (s *Sea) tagWorker() {
	for {
		select {
		case <-s.done:
			return
		case <-s.tagKick:
		}
		s.tagMu.Lock()
		tags := copyTags(s.tags)
		s.tagMu.Unlock()
		s.setMu.Lock()
		if s.left {
			s.setMu.Unlock()
			continue
		}
		err := s.Serf().SetTags(tags)
		s.setMu.Unlock()
		if err != nil {
			// A broadcast still under way is not a failure: memberlist has
			// applied the update and queued it.
			if strings.Contains(err.Error(), "timeout waiting for update broadcast") {
				s.logger.Debug("tag update still being broadcast", "err", err)
			} else {
				s.logger.Warn("setting tags", "err", err)
			}
		}
	}
}

// Leave announces a graceful departure and waits for it to propagate.
//
// Serf gossips the leave as an intent stamped with a Lamport time, and a
// member ignores an intent no newer than the last it holds for the node.
// A push-pull of this node's state that reaches a member before the intent
// carries that same time (as the node's join), so the member ignores the
// intent and, once memberlist says the node has gone, takes it for failed.
// Where other members got the intent, that member learns of the leave from
// them at its next push-pull with one of them; in a small sea there may be
// no other. So a node that leaves a sea of at most leaveSyncPeers other
// members alive also pushes its state, which now lists it as left, to each
// of them over TCP (syncLeft): their merge of a left member makes them see
// it left whatever reached them first. (A push-pull carries every member:
// in a big sea that would cost each leaving node megabytes.)
func (s *Sea) Leave() error {
	s.joinMu.Lock()
	s.leaving = true
	s.joinMu.Unlock()
	s.setMu.Lock()
	s.left = true
	s.setMu.Unlock()
	inst := s.Serf()
	peers := alivePeers(inst, leaveSyncPeers+1)
	if len(peers) > leaveSyncPeers {
		peers = nil
	}
	if err := inst.Leave(); err != nil {
		return fmt.Errorf("sea: leave: %w", err)
	}
	s.syncLeft(inst, peers)
	return nil
}

// leaveSyncPeers is the most members alive beside a leaving node for which
// it pushes its state to each; leaveSyncWait bounds how long Leave waits
// for them.
const (
	leaveSyncPeers = 3
	leaveSyncWait  = 3 * time.Second
)

// alivePeers is up to n random members other than inst's own node that
// inst sees alive, as gossip addresses.
func alivePeers(inst *serf.Serf, n int) []string {
	self := inst.LocalMember().Name
	var peers []string
	for _, m := range inst.Members() {
		if m.Status == serf.StatusAlive && m.Name != self {
			peers = append(peers, gossipAddr(m))
		}
	}
	rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	return peers[:min(len(peers), n)]
}

// syncLeft exchanges the state of inst, which has left, with peers over
// TCP, for at most leaveSyncWait: an unreachable peer holds up neither
// Leave nor the shutdown that follows it (which ends the exchange).
func (s *Sea) syncLeft(inst *serf.Serf, peers []string) {
	if len(peers) == 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// memberlist's join is its TCP push-pull; serf's refuses once
		// the node has left.
		if n, err := inst.Memberlist().Join(peers); err != nil {
			s.logger.Debug("telling members of the leave", "peers", peers, "reached", n, "err", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(leaveSyncWait):
		s.logger.Debug("telling members of the leave: gave up waiting", "peers", peers)
	}
}

// Shutdown closes the sockets without telling anyone; peers will mark the
// node failed unless Leave was called first.
func (s *Sea) Shutdown() error {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	err := s.Serf().Shutdown()
	s.doneOnce.Do(func() { close(s.done) })
	if err != nil {
		return fmt.Errorf("sea: shutdown: %w", err)
	}
	return nil
}

// ShutdownCh is closed once the node has shut down.
func (s *Sea) ShutdownCh() <-chan struct{} { return s.done }

// RTT estimates the round trip to the member name from serf's network
// coordinates (Vivaldi, refined by every probe); false when either end has
// no coordinate yet. The node's own RTT is zero.
func (s *Sea) RTT(name string) (time.Duration, bool) {
	inst := s.Serf()
	if name == inst.LocalMember().Name {
		return 0, true
	}
	local, err := inst.GetCoordinate()
	if err != nil {
		return 0, false
	}
	other, ok := inst.GetCachedCoordinate(name)
	if !ok || other == nil {
		return 0, false
	}
	return local.DistanceTo(other), true
}
