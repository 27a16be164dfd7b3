// Package reach decides how other nodes reach a node, and keeps it
// reached: directly on its own listeners, or, when its relay candidate
// cannot connect back to it, through a tunnel to a relay that listens on
// its behalf (overlay/relay). It binds a node's listeners or opens its
// tunnel (Listen), follows the addresses its relay gives it and joins the
// sea again through it (Follower), and, on a node reached directly, makes
// it a relay for others and serves the relay's routes.
package reach

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/relay"
)

// How other nodes reach a node (-reach).
const (
	// Auto decides at start: relay when the relay candidate cannot
	// connect back to the node's API address, direct otherwise.
	Auto = "auto"
	// Direct listens on the node's own addresses.
	Direct = "direct"
	// Relay binds no listening socket for the API, tree queries or
	// gossip: the node keeps a tunnel to its relay, which listens on its
	// behalf. The sea then shows the node's reach as api.ReachReverse.
	Relay = "relay"
)

// Mode is the mode of a -reach value: Relay is taken for api.ReachReverse
// and Auto for ""; ok is false for anything else.
func Mode(v string) (mode string, ok bool) {
	switch v {
	case "", Auto:
		return Auto, true
	case Direct:
		return Direct, true
	case Relay, api.ReachReverse:
		return Relay, true
	}
	return "", false
}

// ConnectTimeout bounds how long a node in relay mode waits at start for
// its first tunnel.
const ConnectTimeout = time.Minute

// Config says how a node is reached and what it asks its relay with.
type Config struct {
	// Name and Role are the node's name in the sea and its role.
	Name, Role string
	// Reach is the -reach value.
	Reach string
	// API is the address the node's API listens on (-api).
	API string
	// Relay is the API address of the node's relay candidate (-relay,
	// else its central manager), "" for none.
	Relay string
	// CanAsk says that the node has a token (-token-file) to ask its
	// relay candidate with.
	CanAsk bool
	// Addrs finds the addresses the node advertises.
	Addrs Advertiser
	// TLS and Token are what the node calls its relay with.
	TLS    *tls.Config
	Token  func() string
	Logger *slog.Logger
}

// Dialer is how the node opens tunnels to its relay.
func (c *Config) Dialer() *relay.Dialer {
	return &relay.Dialer{Relay: c.Relay, Name: c.Name, TLS: c.TLS, Token: c.Token}
}

// Listeners are what a node is reached on.
type Listeners struct {
	// API is the API's listener, bound or taken from the tunnel.
	API net.Listener
	// APIAddr is the address the API is advertised on.
	APIAddr string
	// Tree is the tree listener the connect-back check bound, for the
	// tree server (nil otherwise); GossipBind is the gossip address it
	// chose when the gossip bind address asks for any port ("" otherwise).
	Tree       net.Listener
	GossipBind string
	// Tunnel is the node's tunnel to its relay, nil for a node reached
	// directly.
	Tunnel *relay.Client
}

// Listen binds the node's API listener, or, in relay mode (given, or
// chosen in auto mode when the relay candidate cannot connect back),
// opens its tunnel and takes its listener from it.
func Listen(ctx context.Context, c *Config) (*Listeners, error) {
	mode, ok := Mode(c.Reach)
	if !ok {
		return nil, fmt.Errorf("-reach %q: want auto, direct or relay (or its synonym reverse)", c.Reach)
	}
	l := &Listeners{}
	if mode != Relay {
		ln, err := net.Listen("tcp", c.API)
		if err != nil {
			return nil, fmt.Errorf("API listener on %s: %w", c.API, err)
		}
		if mode == Auto {
			mode, l = c.Choose(ctx, ln)
		}
		if mode != Direct && l.Tree != nil {
			l.Tree.Close()
			l.Tree = nil
		}
		if mode == Direct {
			l.API = ln
			l.APIAddr = c.Addrs.Addr(ctx, ln.Addr().String())
			return l, nil
		}
		ln.Close()
	}
	cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	t, err := relay.Connect(cctx, c.Dialer(), c.Logger)
	if err != nil {
		return nil, fmt.Errorf("-reach relay: %w", err)
	}
	l.Tunnel, l.API, l.APIAddr = t, t.API(), t.Addrs().API
	c.Logger.Info("reached through a relay", "relay", t.Addrs().Relay, "api", t.Addrs().API, "gossip", t.Addrs().Gossip, "tree", t.Addrs().Tree)
	return l, nil
}

// Choose decides, for Auto, whether the node must be relayed (Direct or
// Relay): with its API listener ln bound, it asks its relay candidate to connect back to
// it, at its API address and at the other TCP addresses it would
// advertise: its tree address (the listener the tree server then serves
// on, bound here into the Listeners' Tree) and its gossip address (a port
// chosen here into their GossipBind when the gossip bind address asks for any, which serf
// then binds). The candidate can test only TCP connections: gossip's UDP
// on the same port is taken to follow TCP's fate (a NAT or firewall that
// lets one in and not the other is not told apart). A node without a
// candidate (a central manager, a free node), without a token to ask
// with, or whose candidate cannot be asked is reached directly.
func (c *Config) Choose(ctx context.Context, ln net.Listener) (string, *Listeners) {
	l := &Listeners{}
	if c.Role == api.RoleCM || c.Relay == "" || !c.CanAsk {
		return Direct, l
	}
	d := c.Dialer()
	d.Timeout = 5 * time.Second
	also, release := c.checkPorts(ctx, ln, l)
	res, err := d.Check(ctx, c.Addrs.Addr(ctx, ln.Addr().String()), also...)
	release()
	switch {
	case err != nil:
		c.Logger.Info("reach: cannot ask the relay candidate to connect back; reached directly", "relay", c.Relay, "err", err)
		return Direct, l
	case !res.Reachable:
		c.Logger.Warn("reach: the relay candidate cannot connect to this node; reached through it", "relay", c.Relay, "api", ln.Addr().String(),
			"unreachable", res.Unreachable, "err", res.Error)
		return Relay, l
	}
	return Direct, l
}

// checkPorts binds what the connect-back check tests besides the API
// port: the tree listener, kept for the tree server (l.Tree), and the
// gossip port, held open until release and then left for serf
// (l.GossipBind names it when the bind address asks for any port). It
// returns their advertised addresses; one it cannot bind is left out of
// the check (serf's own bind then fails with its reason).
func (c *Config) checkPorts(ctx context.Context, ln net.Listener, l *Listeners) (also []string, release func()) {
	release = func() {}
	apiHost := Host(c.Addrs.Addr(ctx, ln.Addr().String()))
	if tl, err := net.Listen("tcp", net.JoinHostPort(apiHost, "0")); err == nil {
		l.Tree = tl
		also = append(also, c.Addrs.Addr(ctx, tl.Addr().String()))
	}
	bind := c.Addrs.Bind
	h, port, err := net.SplitHostPort(bind)
	if err != nil {
		return also, release
	}
	var gl net.Listener
	if port == "0" {
		// Pick the port serf will bind: one free for TCP and UDP.
		for range 10 {
			tl, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
			if err != nil {
				break
			}
			u, err := net.ListenPacket("udp", tl.Addr().String())
			if err == nil {
				u.Close()
				gl = tl
				break
			}
			tl.Close()
		}
		if gl != nil {
			l.GossipBind = gl.Addr().String()
		}
	} else if tl, err := net.Listen("tcp", bind); err == nil {
		gl = tl
	}
	if gl == nil {
		return also, release
	}
	adv := c.Addrs.Gossip(ctx, l.GossipBind)
	if adv == "" {
		adv = c.Addrs.Addr(ctx, gl.Addr().String())
	}
	also = append(also, adv)
	return also, func() { gl.Close() }
}
