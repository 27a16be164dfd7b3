package collector

import (
	"net"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// CondorVersion is the version the collector's own ad shows HTCondor's
// clients: the HTCondor release whose protocol pond's CEDAR server speaks,
// so that a client picks the protocol features it has.
const CondorVersion = "$CondorVersion: 25.0.0 2025-01-01 BuildID: pond $"

// selfAd makes the collector's own ad, which HTCondor's clients read to
// locate the collector (htcondor2.Collector.locate(DaemonType.Collector),
// `htcondor cm status`): its Name, Machine, MyAddress as a sinful string
// and CondorVersion, and RecentDaemonCoreDutyCycle, the share of time the
// collector spent serving CEDAR commands since the ad was last asked for.
type selfAd struct {
	name    string
	addr    func() string
	started time.Time

	mu   sync.Mutex
	busy time.Duration // serving commands since last
	last time.Time
	duty float64
}

// newSelfAd returns nil without a name and an address: the collector then
// has no ad of its own.
func newSelfAd(name string, addr func() string) *selfAd {
	if name == "" || addr == nil {
		return nil
	}
	now := time.Now()
	return &selfAd{name: name, addr: addr, started: now, last: now}
}

// track counts the time a command takes toward the duty cycle; call the
// function it returns when the command is done.
func (s *selfAd) track() func() {
	if s == nil {
		return func() {}
	}
	start := time.Now()
	return func() {
		s.mu.Lock()
		s.busy += time.Since(start)
		s.mu.Unlock()
	}
}

// sinful writes host:port as HTCondor's sinful string, <host:port>, with
// an IPv6 host in brackets.
func sinful(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "<" + addr + ">"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return "<" + host + ":" + port + ">"
}

func (s *selfAd) build(c *Collector) *classad.Ad {
	now := time.Now()
	s.mu.Lock()
	if window := now.Sub(s.last); window >= time.Second {
		s.duty = min(1, s.busy.Seconds()/window.Seconds())
		s.busy, s.last = 0, now
	}
	duty := s.duty
	s.mu.Unlock()
	addr := s.addr()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ad := classad.NewAd()
	ad.SetString("MyType", TypeCollector)
	ad.SetString("Name", s.name)
	ad.SetString("Machine", s.name)
	ad.SetString("MyAddress", sinful(addr))
	ad.SetString("CollectorIpAddr", sinful(addr))
	ad.SetString("MyHost", host)
	ad.SetString("CondorVersion", CondorVersion)
	ad.SetString("CondorPlatform", "$CondorPlatform: X86_64-Linux pond $")
	ad.SetString("PondVersion", config.Version)
	ad.SetInt("DaemonStartTime", s.started.Unix())
	ad.SetInt("LastHeardFrom", now.Unix())
	ad.SetReal("RecentDaemonCoreDutyCycle", duty)
	c.mu.RLock()
	ad.SetInt("ClassAdLifetime", int64(c.opts.Lifetime/time.Second))
	c.mu.RUnlock()
	return ad
}
