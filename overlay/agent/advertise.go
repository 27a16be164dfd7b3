package agent

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// An agent that listens on every address (-bind or -api 0.0.0.0, as a
// glidein does on a machine whose addresses it cannot know beforehand)
// must still tell its peers one address they reach it at: the address of
// the interface it reaches its central manager from (or the first agent it
// joins), which the central manager's side can reach back on a network
// without NAT.

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

// outboundIP returns the IP address of the interface this machine reaches
// target (HOST:PORT) from, found by connecting a UDP socket to it (which
// sends nothing), or "" when there is none.
func outboundIP(ctx context.Context, target string) string {
	if target == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", target)
	if err != nil {
		return ""
	}
	defer c.Close()
	ap, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil || ap.Addr().IsUnspecified() {
		return ""
	}
	return ap.Addr().Unmap().String()
}

// unspecified reports whether addr (HOST:PORT) listens on every address.
func unspecified(addr string) bool {
	ip, err := netip.ParseAddr(host(addr))
	return err == nil && ip.IsUnspecified()
}

// advertised is the address the agent tells others for addr, where it
// listens: addr itself, or, when addr listens on every address, the same
// port on the address of the interface it reaches its peers from.
func (a *Agent) advertised(ctx context.Context, addr string) string {
	if !unspecified(addr) {
		return addr
	}
	ip := outboundIP(ctx, a.cfg.peerTarget())
	if ip == "" {
		return addr
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(ip, port)
}

// gossipAdvertise is the gossip address the agent advertises when none
// was given: "" (serf's choice) unless it binds every address, when it
// is the address of the interface it reaches its peers from, with the
// bound port (0: the one serf picks).
func (a *Agent) gossipAdvertise(ctx context.Context) string {
	if a.cfg.Advertise != "" {
		return a.cfg.Advertise
	}
	bind := cmp.Or(a.gossipBind, a.cfg.Bind, DefaultBind)
	h, port, err := net.SplitHostPort(bind)
	if err != nil {
		return ""
	}
	if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
		return ""
	}
	ip := outboundIP(ctx, a.cfg.peerTarget())
	if ip == "" {
		return ""
	}
	if _, err := strconv.Atoi(port); err != nil {
		return ""
	}
	return net.JoinHostPort(ip, port)
}
