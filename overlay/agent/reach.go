package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/relay"
)

// How other nodes reach an agent (Config.Reach).
const (
	// ReachAuto decides at start: relay when the relay candidate cannot
	// connect back to the agent's API address, direct otherwise.
	ReachAuto = "auto"
	// ReachDirect listens on the agent's own addresses.
	ReachDirect = "direct"
	// ReachRelay binds no listening socket for the API, tree queries or
	// gossip: the agent keeps a tunnel to its relay, which listens on its
	// behalf. The sea then shows the agent's reach as api.ReachReverse.
	ReachRelay = "relay"
)

// reachMode is the mode of a -reach value: ReachReverse is taken for
// ReachRelay and "" for ReachAuto; ok is false for anything else.
func reachMode(v string) (mode string, ok bool) {
	switch v {
	case "", ReachAuto:
		return ReachAuto, true
	case ReachDirect:
		return ReachDirect, true
	case ReachRelay, api.ReachReverse:
		return ReachRelay, true
	}
	return "", false
}

// relayConnectTimeout bounds how long an agent in relay mode waits at
// start for its first tunnel.
const relayConnectTimeout = time.Minute

// relayAddr is the API address of the agent's relay: -relay, else its
// central manager.
func (c *Config) relayAddr() string {
	if c.Relay != "" {
		return c.Relay
	}
	return c.CondorHost
}

// relayDialer is how the agent opens tunnels to its relay.
func (a *Agent) relayDialer() *relay.Dialer {
	return &relay.Dialer{Relay: a.cfg.relayAddr(), Name: a.cfg.Name, TLS: a.clientTLS, Token: a.token}
}

// chooseReach decides, for ReachAuto, whether the agent must be relayed:
// with its API listener ln bound, it asks its relay candidate to connect
// back to it, at its API address and at the other TCP addresses it would
// advertise: its tree address (the listener startTree then serves on,
// bound here) and its gossip address (a port chosen here when -bind asks
// for any, which serf then binds). The candidate can test only TCP
// connections: gossip's UDP on the same port is taken to follow TCP's
// fate (a NAT or firewall that lets one in and not the other is not told
// apart). An agent without a candidate (a central manager, a free node),
// without a token to ask with, or whose candidate cannot be asked is
// reached directly.
func (a *Agent) chooseReach(ctx context.Context, ln net.Listener) string {
	cand := a.cfg.relayAddr()
	if a.cfg.Role == api.RoleCM || cand == "" || a.cfg.TokenFile == "" {
		return ReachDirect
	}
	d := a.relayDialer()
	d.Timeout = 5 * time.Second
	also, release := a.checkPorts(ctx, ln)
	res, err := d.Check(ctx, a.advertised(ctx, ln.Addr().String()), also...)
	release()
	switch {
	case err != nil:
		a.logger.Info("reach: cannot ask the relay candidate to connect back; reached directly", "relay", cand, "err", err)
		return ReachDirect
	case !res.Reachable:
		a.logger.Warn("reach: the relay candidate cannot connect to this node; reached through it", "relay", cand, "api", ln.Addr().String(),
			"unreachable", res.Unreachable, "err", res.Error)
		return ReachRelay
	}
	return ReachDirect
}

// checkPorts binds what the connect-back check tests besides the API
// port: the tree listener, kept for startTree (a.treeLn), and the gossip
// port, held open until release and then left for serf (a.gossipBind
// names it when -bind asks for any port). It returns their advertised
// addresses; one it cannot bind is left out of the check (serf's own
// bind then fails with its reason).
func (a *Agent) checkPorts(ctx context.Context, ln net.Listener) (also []string, release func()) {
	release = func() {}
	apiHost := host(a.advertised(ctx, ln.Addr().String()))
	if tl, err := net.Listen("tcp", net.JoinHostPort(apiHost, "0")); err == nil {
		a.treeLn = tl
		also = append(also, a.advertised(ctx, tl.Addr().String()))
	}
	bind := cmp.Or(a.cfg.Bind, DefaultBind)
	h, port, err := net.SplitHostPort(bind)
	if err != nil {
		return also, release
	}
	var gl net.Listener
	if port == "0" {
		// Pick the port serf will bind: one free for TCP and UDP.
		for range 10 {
			l, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
			if err != nil {
				break
			}
			u, err := net.ListenPacket("udp", l.Addr().String())
			if err == nil {
				u.Close()
				gl = l
				break
			}
			l.Close()
		}
		if gl != nil {
			a.gossipBind = gl.Addr().String()
		}
	} else if l, err := net.Listen("tcp", bind); err == nil {
		gl = l
	}
	if gl == nil {
		return also, release
	}
	adv := a.gossipAdvertise(ctx)
	if adv == "" {
		adv = a.advertised(ctx, gl.Addr().String())
	}
	also = append(also, adv)
	return also, func() { gl.Close() }
}

// listen binds the agent's API listener, or, in relay mode, opens its
// tunnel and takes its listener from it.
func (a *Agent) listen(ctx context.Context) error {
	reach, ok := reachMode(a.cfg.Reach)
	if !ok {
		return fmt.Errorf("-reach %q: want auto, direct or relay (or its synonym reverse)", a.cfg.Reach)
	}
	if reach != ReachRelay {
		ln, err := net.Listen("tcp", a.cfg.API)
		if err != nil {
			return fmt.Errorf("API listener on %s: %w", a.cfg.API, err)
		}
		if reach == ReachAuto {
			reach = a.chooseReach(ctx, ln)
		}
		if reach != ReachDirect && a.treeLn != nil {
			a.treeLn.Close()
			a.treeLn = nil
		}
		if reach == ReachDirect {
			a.apiLn = ln
			a.setAPIAddr(a.advertised(ctx, ln.Addr().String()))
			return nil
		}
		ln.Close()
	}
	cctx, cancel := context.WithTimeout(ctx, relayConnectTimeout)
	defer cancel()
	c, err := relay.Connect(cctx, a.relayDialer(), a.logger)
	if err != nil {
		return fmt.Errorf("-reach relay: %w", err)
	}
	a.tunnel = c
	a.apiLn = c.API()
	a.setAPIAddr(c.Addrs().API)
	a.logger.Info("reached through a relay", "relay", c.Addrs().Relay, "api", c.Addrs().API, "gossip", c.Addrs().Gossip, "tree", c.Addrs().Tree)
	return nil
}

// followRelay advertises the addresses a relay gave the agent when it
// opened its tunnel again on other ones than it had (a relay restarted
// while other programs took its ports): its API address (serf tag,
// /v1/self, the machine ad's PondAPI, the info file, and the address its
// startd advertises and reports, which the schedds running its jobs
// follow) and its tree address; and it moves its gossip to the new gossip
// address (gossip.Sea.Move: it leaves the sea and joins again there under
// its name, showing that it moves, so that its peers do not take it for
// lost). Calls are serialized, and one for addresses the tunnel no
// longer has does nothing: a later call has the current ones.
func (a *Agent) followRelay(addrs api.RelayAddrs) {
	a.followMu.Lock()
	defer a.followMu.Unlock()
	if now := a.tunnel.Addrs(); now != addrs || a.ctx.Err() != nil {
		return
	}
	a.moveToRelayAddrs(addrs)
}

// moveToRelayAddrs is followRelay's work, with followMu held.
func (a *Agent) moveToRelayAddrs(addrs api.RelayAddrs) {
	a.logger.Warn("the relay gave this node other addresses; advertising them", "api", addrs.API, "tree", addrs.Tree, "gossip", addrs.Gossip,
		"was_api", a.APIAddr(), "was_gossip", a.sea.GossipAddr())
	a.setAPIAddr(addrs.API)
	if a.daemons != nil && a.daemons.master != nil {
		a.daemons.master.SetAddress(addrs.API)
	}
	if err := a.SetTags(map[string]string{api.TagAPI: addrs.API, api.TagTree: addrs.Tree}); err != nil {
		a.logger.Warn("advertising the relay's new addresses", "err", err)
	}
	if err := a.writeInfo(); err != nil {
		a.logger.Warn("advertising the relay's new addresses", "err", err)
	}
	if addrs.Gossip == a.sea.GossipAddr() {
		return
	}
	if err := a.sea.Move(a.ctx, addrs.Gossip, a.tunnel.NewGossip()); err != nil {
		a.logger.Error("moving to the relay's new gossip address", "err", err)
	}
}

// rejoinTimeout bounds how long a worker whose tunnel opened again tries
// to join the sea through its relay.
const rejoinTimeout = 30 * time.Second

// rejoinRelay joins the sea again at the gossip address of the agent's
// relay once its tunnel is open again (Client.OnAttach). A relay that
// restarted (a central manager restarted under its workers) comes back
// knowing its workers only from its snapshot, whose rejoin it tried
// before they attached again, and a worker that saw it leave the sea
// never gossips with it again on its own: the two would stay strangers,
// the worker unknown to the sea. A join exchanges their memberships; one
// with a relay that never left changes nothing. It tries again with
// backoff while the tunnel is down, for up to rejoinTimeout.
func (a *Agent) rejoinRelay(addrs api.RelayAddrs) {
	ctx, cancel := context.WithTimeout(a.ctx, rejoinTimeout)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		err := a.rejoinOnce(addrs.Relay)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			if a.ctx.Err() == nil {
				a.logger.Warn("joining the sea again through the relay", "relay", addrs.Relay, "err", err)
			}
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, relay.MaxBackoff)
	}
}

// rejoinOnce makes one attempt of rejoinRelay, from the addresses the
// tunnel has now: joining from a gossip address the node is about to
// leave would teach the relay an address that no longer reaches the
// node, and the node's join from its new one would then conflict with
// it, so the node moves first (followRelay's work, serialized with it).
func (a *Agent) rejoinOnce(relayName string) error {
	a.followMu.Lock()
	defer a.followMu.Unlock()
	if a.ctx.Err() != nil {
		return nil
	}
	if !a.tunnel.Connected() {
		return errors.New("the tunnel to the relay is down")
	}
	peers := a.cfg.Join
	for _, m := range a.sea.Members() {
		if m.Name == relayName && m.Name != a.cfg.Name {
			peers = []string{m.GossipAddr()}
			break
		}
	}
	if len(peers) == 0 {
		return nil
	}
	if now := a.tunnel.Addrs(); now.Gossip != a.sea.GossipAddr() || now.API != a.APIAddr() {
		a.moveToRelayAddrs(now)
	}
	if _, err := a.sea.Serf().Join(peers, true); err != nil {
		return fmt.Errorf("joining %v: %w", peers, err)
	}
	a.logger.Info("joined the sea again through the relay", "relay", relayName, "peers", peers)
	return nil
}

// Reach says how other nodes reach the agent: api.ReachDirect, or
// api.ReachReverse when only its tunnel to its relay reaches it.
func (a *Agent) Reach() string {
	if a.tunnel != nil {
		return api.ReachReverse
	}
	return api.ReachDirect
}

// RelayName is the name of the agent's relay when it is reached through
// one, empty otherwise.
func (a *Agent) RelayName() string {
	if a.tunnel != nil {
		return a.tunnel.Addrs().Relay
	}
	return ""
}

// Tunnel is the agent's tunnel to its relay, nil when it is reached
// directly.
func (a *Agent) Tunnel() *relay.Client { return a.tunnel }

// Relay is the agent's side of the tunnels of the workers it relays for,
// nil for an agent that is itself relayed.
func (a *Agent) Relay() *relay.Relay { return a.relay }

// startRelay makes the agent a relay for others: it serves workers on the
// host of its API address (the one its gossip advertises when the API
// listens on every address).
func (a *Agent) startRelay() error {
	if a.tunnel != nil {
		return nil
	}
	r := knobs.Reader(a.cfg.Knob)
	maxWorkers, err := r.Int(knobs.RelayMaxWorkers)
	if err != nil {
		return err
	}
	grace, err := r.Duration(knobs.RelayGrace)
	if err != nil {
		return err
	}
	h := host(a.APIAddr())
	if ip, err := netip.ParseAddr(h); err != nil || ip.IsUnspecified() {
		h = host(a.sea.GossipAddr())
	}
	a.gossipPeers = &peerSet{sea: a.sea}
	var recheck func(string) error
	if a.verifier != nil {
		recheck = func(tok string) error { _, err := a.verifier.Verify(tok); return err }
	}
	a.relay = relay.New(relay.Config{Name: a.cfg.Name, Host: h, MaxWorkers: maxWorkers, Grace: grace,
		AllowSend: a.gossipPeers.has, Recheck: recheck, Logger: a.logger})
	return nil
}

// relayRoutes serves the relay's routes: a relayed agent refuses them.
func (a *Agent) relayRoutes(m routeMux) {
	m.handle("GET "+api.PathRelay, func(w http.ResponseWriter, r *http.Request) {
		out := []api.RelayWorker{}
		if a.relay != nil {
			out = a.relay.Workers()
		}
		wire.WriteJSON(w, http.StatusOK, out)
	})
	m.handle("POST "+api.PathRelayDrop, func(w http.ResponseWriter, r *http.Request) {
		var req api.RelayDropRequest
		if err := wire.ReadJSON(r, &req); err != nil || req.Name == "" {
			wire.WriteError(w, http.StatusBadRequest, errors.New(`body: want {"name": "WORKER"}`))
			return
		}
		if a.relay == nil || !a.relay.Drop(req.Name) {
			wire.WriteError(w, http.StatusNotFound, fmt.Errorf("%s holds no tunnel of %s", a.cfg.Name, req.Name))
			return
		}
		wire.WriteJSON(w, http.StatusOK, map[string]string{"dropped": req.Name})
	})
	if a.relay == nil {
		m.handle("POST "+api.PathRelayAttach, relay.Refuse)
		m.handle("POST "+api.PathRelayCheck, relay.Refuse)
		return
	}
	m.handle("POST "+api.PathRelayAttach, a.relay.ServeAttach(a.ctx))
	m.handle("POST "+api.PathRelayCheck, relay.ServeCheck())
}

// peerSet says whether an address is the gossip address of a member of
// the sea: where a relay lets its workers send gossip. The set is built
// again from the membership at most every peerSetTTL.
type peerSet struct {
	sea *gossip.Sea

	mu    sync.Mutex
	built time.Time
	addrs map[netip.AddrPort]bool
}

const peerSetTTL = time.Second

func (p *peerSet) has(addr netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.built) > peerSetTTL || (!p.addrs[addr] && time.Since(p.built) > 100*time.Millisecond) {
		p.addrs = map[netip.AddrPort]bool{}
		for _, m := range p.sea.Serf().Members() {
			if ip, ok := netip.AddrFromSlice(m.Addr); ok {
				p.addrs[netip.AddrPortFrom(ip.Unmap(), m.Port)] = true
			}
		}
		p.built = time.Now()
	}
	return p.addrs[addr]
}
