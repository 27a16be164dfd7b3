package glidein

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	site "github.com/pond-htc/pond/overlay/glidein"
)

// A glidein runs on another machine than the pool's central manager (a
// Slurm node, an SSH host, an EC2 instance), and is told where to reach
// it: the central manager's API address (-condor-host) and its gossip
// address (-join). The pool's central_manager is the address its agent
// listens on, which may be a wildcard (bind_address 0.0.0.0: "[::]:PORT"),
// which names no machine to anyone else, or a loopback one, which names
// the glidein's own machine. reachOf turns them into addresses a glidein
// reaches, and checkReach refuses, before anything is started, what a
// glidein elsewhere could never reach.

// reachOf returns the API and gossip addresses the glideins reach the
// pool's central manager at, from its API address cm and gossip address
// gossipAddr (as the pool's central manager reports them) and the
// provider's central_manager_address, override (HOST or HOST:PORT; ""
// for none):
//
//   - override, when given, is the API address, on cm's port when it has
//     none; and its host is the gossip address's too when the pool's
//     gossip listens on a wildcard or loopback address and override's
//     host is not loopback;
//   - else a wildcard host of cm is the host the pool's gossip
//     advertises (the address of the interface its agent reaches its
//     peers from), on cm's port;
//   - a wildcard host left is an error that says what to set.
func reachOf(cm, gossipAddr, override string) (api, join string, err error) {
	cmHost, cmPort, err := net.SplitHostPort(cm)
	if err != nil {
		return "", "", fmt.Errorf("the pool's central manager address %q: %w", cm, err)
	}
	gHost, gPort, err := net.SplitHostPort(gossipAddr)
	if err != nil {
		return "", "", fmt.Errorf("the pool's central manager's gossip address %q: %w", gossipAddr, err)
	}
	api, join = cm, gossipAddr
	switch {
	case override != "":
		host, port := override, cmPort
		if h, p, err := net.SplitHostPort(override); err == nil {
			host, port = h, p
		}
		api = net.JoinHostPort(host, port)
		if wildcard(gHost) || site.IsLoopbackHost(gHost) && !site.IsLoopbackHost(host) {
			join = net.JoinHostPort(host, gPort)
		}
	case wildcard(cmHost) && gHost != "" && !wildcard(gHost):
		api = net.JoinHostPort(gHost, cmPort)
	}
	for _, a := range []struct{ what, addr string }{{"API", api}, {"gossip", join}} {
		if h, _, _ := net.SplitHostPort(a.addr); wildcard(h) {
			return "", "", fmt.Errorf("the pool's central manager's %s address is %s, a wildcard no glidein can reach it at: set the provider's central_manager_address to an address of the central manager's machine the glideins reach", a.what, a.addr)
		}
	}
	return api, join, nil
}

// wildcard reports whether host is empty or an unspecified address
// (0.0.0.0, ::).
func wildcard(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// parseReachOverride checks a central_manager_address: HOST or
// HOST:PORT, HOST an IP address or a DNS name, neither a wildcard.
func parseReachOverride(s string) error {
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		host = h
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("central_manager_address %q: the port must be a number", s)
		}
	}
	host = strings.Trim(host, "[]")
	switch {
	case host == "" || strings.ContainsAny(host, " /\t"):
		return fmt.Errorf("central_manager_address %q: want HOST or HOST:PORT (an IPv6 address in brackets with a port)", s)
	case wildcard(host):
		return fmt.Errorf("central_manager_address %q is a wildcard, which names no machine: give an address of the central manager's machine the glideins reach", s)
	}
	return nil
}

// checkReach refuses a loopback address for the glideins to reach the
// central manager at (api, join) unless they run on this machine: the
// site says so (site.Local), or, for a site that cannot tell (Slurm), the
// glideins bind a loopback address (bind, bind_address or the pool's
// loopback-only gossip), which only an agent of this machine can use.
func (p *Provider) checkReach(api, join, bind string) error {
	local := site.IsLoopbackHost(bind)
	if l, ok := p.site.(site.Local); ok {
		local = l.OnThisMachine()
	}
	if local {
		return nil
	}
	for _, a := range []string{api, join} {
		if h, _, _ := net.SplitHostPort(a); site.IsLoopbackHost(h) {
			return fmt.Errorf("the glideins would reach the pool's central manager at %s, a loopback address, but they run on other machines than this one: give the pool's provider a bind_address they reach (or 0.0.0.0), or set this provider's central_manager_address", a)
		}
	}
	return nil
}
