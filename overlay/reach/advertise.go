package reach

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// A node that listens on every address (-bind or -api 0.0.0.0, as a
// glidein does on a machine whose addresses it cannot know beforehand)
// must still tell its peers one address they reach it at: the address of
// the interface it reaches its central manager from (or the first agent it
// joins), which the central manager's side can reach back on a network
// without NAT.

// Advertiser finds the addresses a node tells others.
type Advertiser struct {
	// PeerTarget is the address the node finds its own address from: its
	// central manager's, else the first agent it joins, else "".
	PeerTarget string
	// Advertise is the gossip address given (-advertise), "" for none.
	Advertise string
	// Bind is the gossip address the node binds (-bind, or its default).
	Bind string
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

// Host is the host part of addr.
func Host(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// Unspecified reports whether addr (HOST:PORT) listens on every address.
func Unspecified(addr string) bool {
	ip, err := netip.ParseAddr(Host(addr))
	return err == nil && ip.IsUnspecified()
}

// Addr is the address the node tells others for addr, where it listens:
// addr itself, or, when addr listens on every address, the same port on
// the address of the interface it reaches its peers from.
func (ad Advertiser) Addr(ctx context.Context, addr string) string {
	if !Unspecified(addr) {
		return addr
	}
	ip := outboundIP(ctx, ad.PeerTarget)
	if ip == "" {
		return addr
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(ip, port)
}

// Gossip is the gossip address the node advertises when none was given:
// "" (serf's choice) unless it binds every address, when it is the
// address of the interface it reaches its peers from, with the bound port
// (0: the one serf picks). bound is the gossip address the connect-back
// check chose ("" for none), which takes the place of Bind.
func (ad Advertiser) Gossip(ctx context.Context, bound string) string {
	if ad.Advertise != "" {
		return ad.Advertise
	}
	h, port, err := net.SplitHostPort(cmp.Or(bound, ad.Bind))
	if err != nil {
		return ""
	}
	if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
		return ""
	}
	ip := outboundIP(ctx, ad.PeerTarget)
	if ip == "" {
		return ""
	}
	if _, err := strconv.Atoi(port); err != nil {
		return ""
	}
	return net.JoinHostPort(ip, port)
}
