package schedd

import (
	"context"
	"strconv"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

func (s *Schedd) source() string { return "schedd@" + s.opts.Name }

// advertise sends the schedd ad and one submitter ad per owner.
func (s *Schedd) advertise(ctx context.Context) {
	s.adv.Lock()
	defer s.adv.Unlock()
	cm := s.opts.Collector()
	if cm == "" {
		return
	}
	jobs, err := s.q.Query(ctx, jobqueue.AllJobs(), []string{"Owner", "JobStatus"})
	if err != nil {
		s.log.Warn("counting jobs", "err", err)
		return
	}
	type counts struct{ idle, running, held int }
	per := map[string]*counts{}
	var total counts
	for _, j := range jobs {
		c := per[j.Owner]
		if c == nil {
			c = &counts{}
			per[j.Owner] = c
		}
		switch j.Status {
		case jobqueue.Idle:
			c.idle++
			total.idle++
		case jobqueue.Running:
			c.running++
			total.running++
		case jobqueue.Held:
			c.held++
			total.held++
		}
	}
	now := s.now().Unix()
	sched := wire.Ad{
		"MyType": `"Scheduler"`, "Name": strconv.Quote(s.opts.Name), "Machine": strconv.Quote(s.opts.Name),
		"MyAddress": strconv.Quote("<" + s.opts.Address + ">"), "PondAddress": strconv.Quote(s.opts.Address),
		"ScheddIpAddr":  strconv.Quote("<" + s.opts.Address + ">"),
		"TotalIdleJobs": strconv.Itoa(total.idle), "TotalRunningJobs": strconv.Itoa(total.running),
		"TotalHeldJobs": strconv.Itoa(total.held), "TotalJobAds": strconv.Itoa(len(jobs)),
		"CondorVersion": strconv.Quote("$CondorVersion: " + config.Version + " pond $"), "DaemonStartTime": strconv.FormatInt(now, 10),
	}
	c := wire.NewCollector(cm, s.opts.Token)
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Update(uctx, &wire.UpdateRequest{Type: wire.TypeSchedd, Source: s.source(), Ads: []wire.Ad{sched}}); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("updating collector", "collector", cm, "err", err)
		}
		return
	}
	var subs []wire.Ad
	for owner, n := range per {
		subs = append(subs, wire.Ad{
			"MyType": `"Submitter"`, "Name": strconv.Quote(owner + "@" + s.uid), "Owner": strconv.Quote(owner),
			"ScheddName": strconv.Quote(s.opts.Name), "PondAddress": strconv.Quote(s.opts.Address),
			"IdleJobs": strconv.Itoa(n.idle), "RunningJobs": strconv.Itoa(n.running), "HeldJobs": strconv.Itoa(n.held),
		})
	}
	if err := c.Update(uctx, &wire.UpdateRequest{Type: wire.TypeSubmitter, Source: s.source(), Ads: subs}); err != nil && ctx.Err() == nil {
		s.log.Warn("updating collector", "collector", cm, "err", err)
	}
}

func (s *Schedd) invalidate(ctx context.Context, cm string) {
	if cm == "" {
		return
	}
	c := wire.NewCollector(cm, s.opts.Token)
	_ = c.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeSchedd, Source: s.source()})
	_ = c.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeSubmitter, Source: s.source()})
}

// SetCollector is called on reconfig after CONDOR_HOST changed: the schedd
// withdraws its ads from the old collector and advertises to the new one.
func (s *Schedd) SetCollector(ctx context.Context, old string) {
	if old != "" && old != s.opts.Collector() {
		// After any update to the old collector still on its way.
		s.adv.Lock()
		s.invalidate(ctx, old)
		s.adv.Unlock()
	}
	s.markDirty()
	s.reschedule()
}
