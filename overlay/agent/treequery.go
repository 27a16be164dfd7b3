package agent

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/ring"
	"github.com/pond-htc/pond/overlay/tree"
)

// HopTimeout bounds how long a node waits for a silent child before
// handing the child's region on.
const HopTimeout = 250 * time.Millisecond

// RepairRounds is how many times a query rooted at this node re-asks the
// parts of the sea its trees did not cover, while its deadline allows (see
// tree.Config.RepairRounds). A complete answer costs nothing more.
const RepairRounds = 2

// connectInterval is how often the agent opens the tree connections its
// routing table lacks (tree.Server.KeepConnected).
const connectInterval = 5 * time.Second

// startTree serves tree queries over TCP on the API's host, matched with
// the agent's evaluator, and advertises their address in the tree tag.
func (a *Agent) startTree() error {
	host, _, err := net.SplitHostPort(a.APIAddr())
	if err != nil {
		return fmt.Errorf("API address %q: %w", a.APIAddr(), err)
	}
	var ln net.Listener
	if a.tunnel != nil {
		ln = a.tunnel.Tree()
	} else if a.treeLn != nil {
		// Bound by the connect-back check, which tested it.
		ln = a.treeLn
	}
	ts, err := tree.NewServer(tree.ServerConfig{
		Name:         a.cfg.Name,
		Listen:       net.JoinHostPort(host, "0"),
		Listener:     ln,
		Evaluator:    a.eval,
		Logger:       a.logger,
		HopTimeout:   HopTimeout,
		RepairRounds: RepairRounds,
		TCP:          tree.TCPConfig{ServerTLS: a.serverTLS, ClientTLS: a.clientTLS},
	})
	if err != nil {
		return err
	}
	a.tree = ts
	return a.SetTags(map[string]string{api.TagTree: ts.Addr()})
}

// memberEvent hands a failed member's region on: a member serf declares
// failed, or that left, will not answer, so queries waiting on it move on
// now rather than at their hop timeout. The node's daemons learn that the
// member is lost (the collector drops its ads, the schedd writes its jobs
// there a disconnected event) when it left, or when its failure still
// stands two probe intervals later (gossip.Sea.ConfirmFailed); a member
// that showed it moves (api.TagMoving) only if it is not back within
// gossip.MoveGrace.
func (a *Agent) memberEvent(ev serf.Event) {
	me, ok := ev.(serf.MemberEvent)
	if !ok || (me.Type != serf.EventMemberFailed && me.Type != serf.EventMemberLeave) {
		return
	}
	for _, m := range me.Members {
		a.tree.Engine.PeerFailed(m.Name)
		if to := m.Tags[api.TagMoving]; to != "" {
			// It moves to another gossip address (its relay gave it
			// another port) and joins again there at once: its jobs
			// and ads stay unless it does not come back.
			go func(name string) {
				if a.sea.WaitMoved(a.ctx, name) {
					a.logger.Info("a node moved to another gossip address; its jobs and ads stay", "node", name, "gossip", to)
				} else if a.ctx.Err() == nil {
					a.logger.Warn("a node that was moving did not come back", "node", name, "gossip", to, "waited", gossip.MoveGrace)
					a.daemons.nodeLost(a.ctx, name)
				}
			}(m.Name)
			continue
		}
		if me.Type == serf.EventMemberLeave {
			a.daemons.nodeLost(a.ctx, m.Name)
			continue
		}
		// A failure may be false (a node back from a partition gossips
		// the deaths it saw meanwhile) and is refuted at once: the
		// daemons hear of it only if it stands.
		go func(name string) {
			if a.sea.ConfirmFailed(a.ctx, name) {
				a.daemons.nodeLost(a.ctx, name)
			} else if a.ctx.Err() == nil {
				a.logger.Info("a node the sea declared failed answered again; its jobs and ads stay", "node", name)
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
func (a *Agent) refreshRouting(routed map[string]ring.Member) {
	if ms, changed := routedMembers(a.sea.Serf().Members(), routed); changed {
		a.tree.SetMembers(ms)
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
