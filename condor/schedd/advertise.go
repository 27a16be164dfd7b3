package schedd

import (
	"context"
	"strconv"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// source names the schedd's ads at the collector.
func (s *Schedd) source() string { return "schedd@" + s.opts.Name }

// jobCounts counts jobs by status.
type jobCounts struct{ idle, running, held int }

// addN counts n jobs in state st.
func (c *jobCounts) addN(st jobqueue.Status, n int) {
	switch st {
	case jobqueue.Idle:
		c.idle += n
	case jobqueue.Running:
		c.running += n
	case jobqueue.Held:
		c.held += n
	}
}

// adClock times the schedd's ads: when the schedd first advertised (its
// DaemonStartTime) and how much of the time between two ads went to making
// and sending them, the schedd's own work on its queue, which HTCondor's
// tools read as RecentDaemonCoreDutyCycle (`htcondor ap status`).
type adClock struct {
	started time.Time     // the first ad
	last    time.Time     // the ad before this one
	busy    time.Duration // making and sending the ad before this one
}

// duty is the share, from 0 to 1, of the time from the last ad to now
// that making and sending it took; 0 before a second ad.
func (c *adClock) duty(now time.Time) float64 {
	since := now.Sub(c.last)
	if c.last.IsZero() || since <= 0 {
		return 0
	}
	return min(1, c.busy.Seconds()/since.Seconds())
}

// advertise sends the schedd ad and one submitter ad per owner. It
// reports whether the collector took them (or there is none).
func (s *Schedd) advertise(ctx context.Context) bool {
	s.adv.Lock()
	defer s.adv.Unlock()
	cm := s.opts.Collector()
	if cm == "" {
		return true
	}
	begin := time.Now()
	if s.clock.started.IsZero() {
		s.clock.started = s.now()
	}
	defer func() {
		s.clock.last, s.clock.busy = begin, time.Since(begin)
	}()
	counts, err := s.q.CountsByOwner(ctx)
	if err != nil {
		s.log.Warn("counting jobs", "err", err)
		return false
	}
	per := map[string]*jobCounts{}
	var total jobCounts
	jobs := 0
	for owner, byStatus := range counts {
		c := &jobCounts{}
		per[owner] = c
		for st, n := range byStatus {
			c.addN(st, n)
			total.addN(st, n)
			jobs += n
		}
	}
	s.mu.Lock()
	splitGroups(per, s.groupCountsLocked())
	s.mu.Unlock()
	c := s.peer(cm).Collector()
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s.advMu.Lock()
	s.advTo, s.advStop = cm, cancel
	s.advMu.Unlock()
	defer func() {
		s.advMu.Lock()
		s.advTo, s.advStop = "", nil
		s.advMu.Unlock()
	}()
	ad := s.scheddAd(total, jobs)
	s.limitAttrs(ad)
	ad["RecentDaemonCoreDutyCycle"] = strconv.FormatFloat(s.clock.duty(time.Now()), 'f', 6, 64)
	if err := c.Update(uctx, &wire.UpdateRequest{Type: wire.TypeSchedd, Source: s.source(), Ads: []wire.Ad{ad}}); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("updating collector", "collector", cm, "err", err)
		}
		return false
	}
	var subs []wire.Ad
	for owner, n := range per {
		subs = append(subs, s.submitterAd(owner, n))
	}
	if err := c.Update(uctx, &wire.UpdateRequest{Type: wire.TypeSubmitter, Source: s.source(), Ads: subs}); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("updating collector", "collector", cm, "err", err)
		}
		return false
	}
	return true
}

// scheddAd is the schedd's ad, with the counts of its jobs: what pond's
// negotiator and HTCondor's tools read of it (`htcondor ap status` reads
// Machine and RecentDaemonCoreDutyCycle, which advertise adds).
func (s *Schedd) scheddAd(total jobCounts, jobs int) wire.Ad {
	return wire.Ad{
		"MyType": `"Scheduler"`, "Name": strconv.Quote(s.opts.Name), "Machine": strconv.Quote(s.opts.Name),
		"MyAddress": strconv.Quote("<" + s.opts.Address + ">"), "PondAddress": strconv.Quote(s.opts.Address),
		"ScheddIpAddr":  strconv.Quote("<" + s.opts.Address + ">"),
		"TotalIdleJobs": strconv.Itoa(total.idle), "TotalRunningJobs": strconv.Itoa(total.running),
		"TotalHeldJobs": strconv.Itoa(total.held), "TotalJobAds": strconv.Itoa(jobs),
		"CondorVersion": strconv.Quote("$CondorVersion: " + config.Version + " pond $"), "DaemonStartTime": strconv.FormatInt(s.clock.started.Unix(), 10),
	}
}

// submitterAd is the ad of an owner's jobs in the queue.
func (s *Schedd) submitterAd(owner string, n *jobCounts) wire.Ad {
	return wire.Ad{
		"MyType": `"Submitter"`, "Name": strconv.Quote(owner + "@" + s.uid), "Owner": strconv.Quote(owner),
		"ScheddName": strconv.Quote(s.opts.Name), "PondAddress": strconv.Quote(s.opts.Address),
		"IdleJobs": strconv.Itoa(n.idle), "RunningJobs": strconv.Itoa(n.running), "HeldJobs": strconv.Itoa(n.held),
	}
}

// invalidate withdraws the schedd's ads from the collector at cm.
func (s *Schedd) invalidate(ctx context.Context, cm string) {
	if cm == "" {
		return
	}
	c := s.peer(cm).Collector()
	_ = c.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeSchedd, Source: s.source()})
	_ = c.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeSubmitter, Source: s.source()})
}

// SetCollector is called on reconfig after CONDOR_HOST changed: the schedd
// withdraws its ads from the old collector and advertises to the new one.
func (s *Schedd) SetCollector(ctx context.Context, old string) {
	if old != "" && old != s.opts.Collector() {
		// After any update to the old collector still on its way
		// (canceled: an old collector that does not answer holds up
		// nothing); updates from now on go to the new one.
		s.advMu.Lock()
		if s.advTo == old && s.advStop != nil {
			s.advStop()
		}
		s.advMu.Unlock()
		s.adv.Lock()
		//lint:ignore SA2001 the empty section waits for an update in flight
		s.adv.Unlock()
		// The new collector hears of the schedd while the old one is
		// told to forget it.
		s.markDirty()
		s.reschedule()
		s.invalidate(ctx, old)
		return
	}
	s.markDirty()
	s.reschedule()
}
