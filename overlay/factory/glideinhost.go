package factory

import (
	"net"
	"net/netip"
)

// GlideinCondorHost is the central manager's API address a glidein of
// the factory is told: the pool's, cm, or, when the factory's agent
// listens on every address ("[::]:PORT", which names no machine to a
// glidein elsewhere), the same port on the host of the agent's gossip
// address gossip (the address of the interface it reaches its peers
// from). An entry's agent_args may name another (-condor-host, the
// provider's central_manager_address).
func GlideinCondorHost(cm, gossip string) string {
	_, port, err := net.SplitHostPort(cm)
	if err != nil || !unspecified(cm) {
		return cm
	}
	h, _, err := net.SplitHostPort(gossip)
	if err != nil || unspecified(gossip) {
		return cm
	}
	return net.JoinHostPort(h, port)
}

// unspecified reports whether addr (HOST:PORT) listens on every address.
func unspecified(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsUnspecified()
}
