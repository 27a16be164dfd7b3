package reach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/relay"
)

// Node is a relayed node as its Follower moves it.
type Node interface {
	// APIAddr is the address the node's API is advertised on.
	APIAddr() string
	// MoveAPI advertises addr as the node's API address: in /v1/self,
	// the machine ad's PondAPI, and the address its startd advertises
	// and reports, which the schedds running its jobs follow.
	MoveAPI(addr string)
	// SetTags sets several of the node's serf tags in one update.
	SetTags(map[string]string) error
	// WriteInfo records the node's addresses in its info file.
	WriteInfo() error
}

// RejoinTimeout bounds how long a worker whose tunnel opened again tries
// to join the sea through its relay.
const RejoinTimeout = 30 * time.Second

// Follower keeps a relayed node at the addresses its relay gives it, and
// in the sea through its relay.
type Follower struct {
	// Ctx is the node's services' context: once it ends, the Follower
	// does nothing.
	Ctx    context.Context
	Name   string
	Join   []string // the node's -join addresses
	Tunnel *relay.Client
	Sea    *gossip.Sea
	Node   Node
	Logger *slog.Logger

	// mu serializes Follow and the moves of Rejoin.
	mu sync.Mutex
}

// Follow advertises the addresses a relay gave the node when it opened
// its tunnel again on other ones than it had (a relay restarted while
// other programs took its ports): its API address (serf tag, Node.MoveAPI,
// the info file) and its tree address; and it moves its gossip to the new
// gossip address (gossip.Sea.Move: it leaves the sea and joins again there
// under its name, showing that it moves, so that its peers do not take it
// for lost). Calls are serialized, and one for addresses the tunnel no
// longer has does nothing: a later call has the current ones.
func (f *Follower) Follow(addrs api.RelayAddrs) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.Tunnel.Addrs(); now != addrs || f.Ctx.Err() != nil {
		return
	}
	f.move(addrs)
}

// move is Follow's work, with mu held.
func (f *Follower) move(addrs api.RelayAddrs) {
	f.Logger.Warn("the relay gave this node other addresses; advertising them", "api", addrs.API, "tree", addrs.Tree, "gossip", addrs.Gossip,
		"was_api", f.Node.APIAddr(), "was_gossip", f.Sea.GossipAddr())
	f.Node.MoveAPI(addrs.API)
	if err := f.Node.SetTags(map[string]string{api.TagAPI: addrs.API, api.TagTree: addrs.Tree}); err != nil {
		f.Logger.Warn("advertising the relay's new addresses", "err", err)
	}
	if err := f.Node.WriteInfo(); err != nil {
		f.Logger.Warn("advertising the relay's new addresses", "err", err)
	}
	if addrs.Gossip == f.Sea.GossipAddr() {
		return
	}
	if err := f.Sea.Move(f.Ctx, addrs.Gossip, f.Tunnel.NewGossip()); err != nil {
		f.Logger.Error("moving to the relay's new gossip address", "err", err)
	}
}

// Rejoin joins the sea again at the gossip address of the node's relay
// once its tunnel is open again (relay.Client.OnAttach). A relay that
// restarted (a central manager restarted under its workers) comes back
// knowing its workers only from its snapshot, whose rejoin it tried
// before they attached again, and a worker that saw it leave the sea
// never gossips with it again on its own: the two would stay strangers,
// the worker unknown to the sea. A join exchanges their memberships; one
// with a relay that never left changes nothing. It tries again with
// backoff while the tunnel is down, for up to RejoinTimeout.
func (f *Follower) Rejoin(addrs api.RelayAddrs) {
	ctx, cancel := context.WithTimeout(f.Ctx, RejoinTimeout)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		err := f.rejoinOnce(addrs.Relay)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			if f.Ctx.Err() == nil {
				f.Logger.Warn("joining the sea again through the relay", "relay", addrs.Relay, "err", err)
			}
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, relay.MaxBackoff)
	}
}

// rejoinOnce makes one attempt of Rejoin, from the addresses the tunnel
// has now: joining from a gossip address the node is about to leave would
// teach the relay an address that no longer reaches the node, and the
// node's join from its new one would then conflict with it, so the node
// moves first (Follow's work, serialized with it).
func (f *Follower) rejoinOnce(relayName string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Ctx.Err() != nil {
		return nil
	}
	if !f.Tunnel.Connected() {
		return errors.New("the tunnel to the relay is down")
	}
	peers := f.Join
	for _, m := range f.Sea.Members() {
		if m.Name == relayName && m.Name != f.Name {
			peers = []string{m.GossipAddr()}
			break
		}
	}
	if len(peers) == 0 {
		return nil
	}
	if now := f.Tunnel.Addrs(); now.Gossip != f.Sea.GossipAddr() || now.API != f.Node.APIAddr() {
		f.move(now)
	}
	if _, err := f.Sea.Serf().Join(peers, true); err != nil {
		return fmt.Errorf("joining %v: %w", peers, err)
	}
	f.Logger.Info("joined the sea again through the relay", "relay", relayName, "peers", peers)
	return nil
}
