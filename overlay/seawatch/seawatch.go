// Package seawatch follows a node's sea: membership events keep the
// node's tree-query routing current and hand on the regions of members
// that stopped answering, the node's daemons learn of the members the sea
// lost for good, and the node's pond membership is checked every second.
package seawatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/ring"
	"github.com/pond-htc/pond/overlay/tree"
)

// ConnectInterval is how often a node opens the tree connections its
// routing table lacks (tree.Server.KeepConnected).
const ConnectInterval = 5 * time.Second

// Watcher follows the sea for one node.
type Watcher struct {
	Sea  *gossip.Sea
	Tree *tree.Server
	// Lost tells the node's daemons that the sea lost the member name
	// (it left, or its failure stood).
	Lost func(ctx context.Context, name string)
	// Check checks the node's pond membership, every second.
	Check  func(ctx context.Context) error
	Logger *slog.Logger

	ctx context.Context
}

// Run follows the sea until ctx ends: membership events refresh the
// tree's routing (a ticker catches an event a full subscription buffer
// dropped), and the pond membership is checked every second.
func (w *Watcher) Run(ctx context.Context) {
	w.ctx = ctx
	events := w.Sea.Subscribe(256)
	routed := map[string]ring.Member{}
	w.refreshRouting(routed)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			w.memberEvent(ev)
			w.refreshRouting(routed)
		case <-tick.C:
			w.refreshRouting(routed)
		case <-check.C:
			if err := w.Check(ctx); err != nil {
				w.Logger.Warn("pond membership check", "err", err)
			}
		}
	}
}

// memberEvent hands a failed member's region on: a member serf declares
// failed, or that left, will not answer, so queries waiting on it move on
// now rather than at their hop timeout. The node's daemons learn that the
// member is lost (the collector drops its ads, the schedd writes its jobs
// there a disconnected event) when it left, or when its failure still
// stands two probe intervals later (gossip.Sea.ConfirmFailed); a member
// that showed it moves (api.TagMoving) only if it is not back within
// gossip.MoveGrace.
func (w *Watcher) memberEvent(ev serf.Event) {
	me, ok := ev.(serf.MemberEvent)
	if !ok || (me.Type != serf.EventMemberFailed && me.Type != serf.EventMemberLeave) {
		return
	}
	for _, m := range me.Members {
		w.Tree.Engine.PeerFailed(m.Name)
		if to := m.Tags[api.TagMoving]; to != "" {
			// It moves to another gossip address (its relay gave it
			// another port) and joins again there at once: its jobs
			// and ads stay unless it does not come back.
			go func(name string) {
				if w.Sea.WaitMoved(w.ctx, name) {
					w.Logger.Info("a node moved to another gossip address; its jobs and ads stay", "node", name, "gossip", to)
				} else if w.ctx.Err() == nil {
					w.Logger.Warn("a node that was moving did not come back", "node", name, "gossip", to, "waited", gossip.MoveGrace)
					w.Lost(w.ctx, name)
				}
			}(m.Name)
			continue
		}
		if me.Type == serf.EventMemberLeave {
			w.Lost(w.ctx, m.Name)
			continue
		}
		// A failure may be false (a node back from a partition gossips
		// the deaths it saw meanwhile) and is refuted at once: the
		// daemons hear of it only if it stands.
		go func(name string) {
			if w.Sea.ConfirmFailed(w.ctx, name) {
				w.Lost(w.ctx, name)
			} else if w.ctx.Err() == nil {
				w.Logger.Info("a node the sea declared failed answered again; its jobs and ads stay", "node", name)
			}
		}(m.Name)
	}
}

// refreshRouting gives the tree the live members that answer tree
// queries. Rebuilding the routing table costs a sort of the whole ring, and
// most membership events do not touch it (a pond member's tags change,
// say): the router is rebuilt only when the routed members differ from the
// last refresh. routed is that last set; only the goroutine that refreshes
// uses it.
func (w *Watcher) refreshRouting(routed map[string]ring.Member) {
	if ms, changed := routedMembers(w.Sea.Serf().Members(), routed); changed {
		w.Tree.SetMembers(ms)
	}
}

// routedMembers returns the members a tree query is routed to (alive, pond
// agents with a tree address) and whether they differ, by name or tree
// address, from routed, which it updates to them.
func routedMembers(members []serf.Member, routed map[string]ring.Member) ([]ring.Member, bool) {
	var ms []ring.Member
	changed := false
	for _, m := range members {
		addr := m.Tags[api.TagTree]
		version, pond := m.Tags[api.TagVersion]
		if m.Status != serf.StatusAlive || addr == "" || !pond {
			continue
		}
		if version == "1" {
			addr = tree.JSONAddr(addr) // it reads only JSON frames
		}
		rm, ok := routed[m.Name]
		if !ok || rm.Addr != addr {
			// The ring position is a hash of the name: keep it for the
			// members already known.
			if ok {
				rm.Addr = addr
			} else {
				rm = ring.NewMember(m.Name, addr)
			}
			routed[m.Name] = rm
			changed = true
		}
		ms = append(ms, rm)
	}
	if len(ms) != len(routed) {
		// Members left or failed: forget them.
		changed = true
		live := make(map[string]bool, len(ms))
		for _, m := range ms {
			live[m.Name] = true
		}
		for name := range routed {
			if !live[name] {
				delete(routed, name)
			}
		}
	}
	return ms, changed
}
