package agent

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/reach"
	"github.com/pond-htc/pond/overlay/relay"
)

// How other nodes reach an agent (Config.Reach; see overlay/reach).
const (
	ReachAuto   = reach.Auto
	ReachDirect = reach.Direct
	ReachRelay  = reach.Relay
)

// relayAddr is the API address of the agent's relay: -relay, else its
// central manager.
func (c *Config) relayAddr() string {
	if c.Relay != "" {
		return c.Relay
	}
	return c.CondorHost
}

// peerTarget is the address the agent finds its own address from: its
// central manager's, else the first agent it joins, else "".
func (c *Config) peerTarget() string {
	if c.CondorHost != "" {
		return c.CondorHost
	}
	if len(c.Join) > 0 {
		return c.Join[0]
	}
	return ""
}

// addrs finds the addresses the agent advertises: one that listens on
// every address (-bind or -api 0.0.0.0, as a glidein does on a machine
// whose addresses it cannot know beforehand) advertises the address of the
// interface it reaches its central manager (peerTarget) from.
func (a *Agent) addrs() reach.Advertiser {
	return reach.Advertiser{PeerTarget: a.cfg.peerTarget(), Advertise: a.cfg.Advertise, Bind: cmp.Or(a.cfg.Bind, DefaultBind)}
}

// reachConfig is how the agent is reached (reach.Listen).
func (a *Agent) reachConfig() *reach.Config {
	return &reach.Config{Name: a.cfg.Name, Role: a.cfg.Role, Reach: a.cfg.Reach, API: a.cfg.API, Relay: a.cfg.relayAddr(),
		CanAsk: a.cfg.TokenFile != "", Addrs: a.addrs(), TLS: a.clientTLS, Token: a.token, Logger: a.logger}
}

// listen binds the agent's API listener, or, in relay mode, opens its
// tunnel and takes its listener from it (reach.Listen).
func (a *Agent) listen(ctx context.Context) error {
	l, err := reach.Listen(ctx, a.reachConfig())
	if err != nil {
		return err
	}
	a.apiLn, a.treeLn, a.gossipBind, a.tunnel = l.API, l.Tree, l.GossipBind, l.Tunnel
	a.setAPIAddr(l.APIAddr)
	return nil
}

// followRelay keeps a relayed agent at the addresses its relay gives it
// and in the sea through its relay (reach.Follower).
func (a *Agent) followRelay() {
	f := &reach.Follower{Ctx: a.ctx, Name: a.cfg.Name, Join: a.cfg.Join, Tunnel: a.tunnel, Sea: a.sea, Node: reachNode{a}, Logger: a.logger}
	a.tunnel.OnAddrs(f.Follow)
	a.tunnel.OnAttach(f.Rejoin)
	// The relay may have given other addresses while the agent started.
	if now := a.tunnel.Addrs(); now.API != a.APIAddr() || now.Gossip != a.sea.GossipAddr() {
		go f.Follow(now)
	}
}

// reachNode is the agent as its reach.Follower moves it (reach.Node).
type reachNode struct{ a *Agent }

func (n reachNode) APIAddr() string                   { return n.a.APIAddr() }
func (n reachNode) SetTags(t map[string]string) error { return n.a.SetTags(t) }
func (n reachNode) WriteInfo() error                  { return n.a.writeInfo() }

func (n reachNode) MoveAPI(addr string) {
	n.a.setAPIAddr(addr)
	if n.a.daemons != nil && n.a.daemons.Master != nil {
		n.a.daemons.Master.SetAddress(addr)
	}
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

// startRelay makes an agent reached directly a relay for others
// (reach.NewRelay).
func (a *Agent) startRelay() error {
	if a.tunnel != nil {
		return nil
	}
	var recheck func(string) error
	if a.verifier != nil {
		recheck = func(tok string) error { _, err := a.verifier.Verify(tok); return err }
	}
	r, err := reach.NewRelay(knobs.Reader(a.cfg.Knob), a.cfg.Name, a.APIAddr(), a.sea, recheck, a.logger)
	if err != nil {
		return err
	}
	a.relay = r
	return nil
}

// relayRoutes serves the relay's routes (reach.RelayRoutes): a relayed
// agent refuses them.
func (a *Agent) relayRoutes(m routeMux) {
	routes := reach.RelayRoutes(a.ctx, a.cfg.Name, a.relay)
	for _, p := range slices.Sorted(maps.Keys(routes)) {
		m.handle(p, routes[p])
	}
}
