package schedd

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// FlockTarget is a pool the schedd may flock its idle jobs to: HTCondor's
// FLOCK_TO entry, given at run time by the pool's central manager's agent
// from its willing list (overlay/flock), nearest first.
type FlockTarget struct {
	// Pool is the pool's name; Node its central manager's node name, as
	// its negotiator authenticates (node/NODE); Collector its API address.
	Pool, Node, Collector string
	// JobRequirements are ClassAd expressions of the job (MY): a job
	// flocks to the pool when one of them is true; none lets every job.
	JobRequirements []string
	// MaxJobs bounds how many jobs of the schedd's pool run in the pool
	// at once, the schedd's own and OthersRunning together; 0 is no
	// bound.
	MaxJobs int
	// OthersRunning is how many jobs of the other schedds of the
	// schedd's pool run in the pool, as its collector last showed them
	// (the claimed slots whose ClientMachine is one of them).
	OthersRunning int
	// IdleSlots is how many slots the pool announced idle: the schedd
	// adds a pool only with some, and keeps one it flocks to without.
	IdleSlots int
}

// Job attributes a flocked job carries.
const (
	// AttrFlockedTo is the pool a job runs in (or ran in last) when it
	// was flocked there.
	AttrFlockedTo = "PondFlockedTo"
	// AttrLastRemotePool is HTCondor's name for the same.
	AttrLastRemotePool = "LastRemotePool"
)

// flockState is the schedd's flocking, guarded by Schedd.mu.
type flockState struct {
	// flocked are the pools the schedd advertises its submitters to
	// besides its own, in the order they were added.
	flocked []FlockTarget
	// known are the central managers' nodes the schedd ever flocked to:
	// their negotiators get no job and no match once not flocked.
	known map[string]bool
	// lastAdd is when the last pool was added; nudged when each pool's
	// negotiator was last asked for a cycle.
	lastAdd time.Time
	nudged  map[string]time.Time
	// exprs caches parsed job requirements.
	exprs map[string]classad.Expr
	// homeCycle is when the pool's own negotiator last asked for the idle
	// jobs (a negotiation cycle at home).
	homeCycle time.Time
}

// flockInterval is how often the schedd reconsiders its flocking.
const flockInterval = 2 * time.Second

// flockLifetime is the lifetime of the submitter ads the schedd sends to
// the pools it flocks to: ads it could not withdraw vanish by then.
const flockLifetime = 30 * time.Second

// flockParams reads FLOCK_IDLE_TIME (how long a job stays idle before it
// may flock) and FLOCK_INCREMENT (how many pools are added at a time).
func (s *Schedd) flockParams() (idle time.Duration, incr int) {
	idle, err := s.opts.Config.Duration("FLOCK_IDLE_TIME", 10*time.Second)
	if err != nil || idle < 0 {
		idle = 10 * time.Second
	}
	incr, err = s.opts.Config.Int("FLOCK_INCREMENT", 1)
	if err != nil || incr < 1 {
		incr = 1
	}
	return idle, incr
}

// waiting says whether job ij waits for another pool: its own pool could
// not run it, as far as the schedd knows. It has been idle for
// FLOCK_IDLE_TIME, and a negotiation cycle at home since it became idle
// left it unmatched, or, when no cycle came (the pool's negotiator is down
// or moving), it has been idle three times as long. s.mu held.
func (s *Schedd) waiting(ij *idleJob, now time.Time, idle time.Duration) bool {
	d := now.Sub(ij.since)
	return d >= idle && (s.fl.homeCycle.After(ij.since) || d >= 3*idle)
}

// jobFlocks says whether job ij may flock to t now; s.mu held.
func (s *Schedd) jobFlocks(ij *idleJob, t FlockTarget, now time.Time, idle time.Duration) bool {
	if !s.waiting(ij, now, idle) {
		return false
	}
	if len(t.JobRequirements) == 0 {
		return true
	}
	for _, src := range t.JobRequirements {
		e, ok := s.fl.exprs[src]
		if !ok {
			var err error
			if e, err = classad.ParseExpr(src); err != nil {
				e = nil
			}
			if s.fl.exprs == nil {
				s.fl.exprs = map[string]classad.Expr{}
			}
			s.fl.exprs[src] = e
		}
		if e != nil && ij.ac.ad.EvalExpr(e).IsTrue() {
			return true
		}
	}
	return false
}

// runningIn counts the schedd's jobs running (or starting) in pool; s.mu
// held.
// roomIn is how many more of the schedd's jobs may run in the flocked
// pool t under its MaxJobs (the pool's own schedds' running there
// counted), -1 when t has no bound; s.mu held.
func (s *Schedd) roomIn(t FlockTarget) int {
	if t.MaxJobs <= 0 {
		return -1
	}
	return max(0, t.MaxJobs-t.OthersRunning-s.runningIn(t.Pool))
}

func (s *Schedd) runningIn(pool string) int {
	n := 0
	for _, c := range s.active {
		if c.pool == pool {
			n++
		}
	}
	return n
}

// flockedTo returns the flocked pool whose negotiator runs on node; s.mu
// held.
func (s *Schedd) flockedTo(node string) (FlockTarget, bool) {
	for _, t := range s.fl.flocked {
		if strings.EqualFold(t.Node, node) {
			return t, true
		}
	}
	return FlockTarget{}, false
}

// callerNode is the node whose token made the call (node/NAME), "" for
// any other caller.
func callerNode(ctx context.Context) string {
	cl, ok := auth.FromContext(ctx)
	if !ok {
		return ""
	}
	name, _ := strings.CutPrefix(cl.Subject, "node/")
	if name == cl.Subject {
		return ""
	}
	return name
}

// flockPeer classifies the negotiator that calls: flocked (a pool the
// schedd flocks to now, with the pool), refused (one it flocked to once and
// no longer does), or neither (its own pool's). The negotiator is the node
// of the call's credential; stated, the node the negotiator names in its
// request, only for a call without credentials (an API that takes them
// without), where a negotiator of a pool flocked to would otherwise pass
// for the schedd's own pool's and get every idle job, past the flock's
// max_jobs. s.mu held.
func (s *Schedd) flockPeer(ctx context.Context, stated string) (t FlockTarget, flocked, refused bool) {
	node := callerNode(ctx)
	if _, authenticated := auth.FromContext(ctx); !authenticated {
		node = stated
	}
	if node == "" || strings.EqualFold(node, s.opts.Name) {
		return FlockTarget{}, false, false
	}
	if t, ok := s.flockedTo(node); ok {
		return t, true, false
	}
	return FlockTarget{}, false, s.fl.known[strings.ToLower(node)]
}

// flock reconsiders the pools the schedd flocks to: it drops those no
// longer willing, and adds the next willing pools (FLOCK_INCREMENT at a
// time, nearest first) while jobs have been idle for FLOCK_IDLE_TIME since
// the last pool was added; with no such job it drops them all. Then it
// advertises its submitters to each pool it flocks to (the jobs that may
// go there) and withdraws them from the pools it dropped.
func (s *Schedd) flock(ctx context.Context) {
	var targets []FlockTarget
	if s.opts.FlockTargets != nil {
		targets = s.opts.FlockTargets()
	}
	// The jobs a flock's job requirements tell apart must not share an
	// autocluster, whose one ad the requirements are tested against.
	if attrs := requirementAttrs(targets); len(attrs) > 0 {
		s.widen(ctx, attrs)
	}
	idle, incr := s.flockParams()
	now := s.now()
	s.mu.Lock()
	if len(targets) == 0 && len(s.fl.flocked) == 0 {
		s.mu.Unlock()
		return
	}
	kept, dropped := s.stillWilling(targets)
	if waiting := s.countWaiting(now, idle); waiting == 0 {
		kept, dropped = s.keepBusy(kept, dropped)
	} else if len(kept) < len(targets) && (len(kept) == 0 || now.Sub(s.fl.lastAdd) >= idle) {
		kept = s.addPools(kept, targets, incr, waiting)
		s.fl.lastAdd = now
	}
	s.fl.flocked = kept
	if s.fl.known == nil {
		s.fl.known = map[string]bool{}
		s.fl.nudged = map[string]time.Time{}
	}
	for _, t := range kept {
		s.fl.known[strings.ToLower(t.Node)] = true
	}
	advs := s.flockAdverts(kept, now, idle)
	for _, t := range dropped {
		if !slices.ContainsFunc(kept, func(k FlockTarget) bool { return strings.EqualFold(k.Pool, t.Pool) }) {
			s.log.Info("no longer flocking", "pool", t.Pool, "collector", t.Collector)
		}
	}
	s.mu.Unlock()

	s.adv.Lock()
	defer s.adv.Unlock()
	for _, t := range dropped {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = s.peer(t.Collector).Collector().Invalidate(ictx, &wire.InvalidateRequest{Type: wire.TypeSubmitter, Source: s.source()})
		cancel()
	}
	for _, a := range advs {
		s.advertiseFlocked(ctx, a, now)
	}
}

// requirementAttrs returns the job attributes the targets' job
// requirements refer to (lower-case); an unparsable requirement lets no
// job go (see jobFlocks) and refers to none.
func requirementAttrs(targets []FlockTarget) []string {
	var out []string
	for _, t := range targets {
		for _, src := range t.JobRequirements {
			if e, err := classad.ParseExpr(src); err == nil {
				my, _ := classad.References(e)
				out = append(out, my...)
			}
		}
	}
	return out
}

// stillWilling keeps the pools flocked to that are still among targets,
// with what they say now, and drops the others. A pool whose central
// manager changed (a replica took over, or handed the pool back) is kept
// at its new one, and the old one is dropped, so that the submitters are
// withdrawn from it. s.mu held.
func (s *Schedd) stillWilling(targets []FlockTarget) (kept, dropped []FlockTarget) {
	byPool := map[string]FlockTarget{}
	for _, t := range targets {
		if _, ok := byPool[strings.ToLower(t.Pool)]; !ok {
			byPool[strings.ToLower(t.Pool)] = t
		}
	}
	for _, t := range s.fl.flocked {
		nt, ok := byPool[strings.ToLower(t.Pool)]
		switch {
		case !ok:
			dropped = append(dropped, t)
		case !strings.EqualFold(nt.Node, t.Node) || nt.Collector != t.Collector:
			s.log.Info("flocking to the pool's new central manager", "pool", t.Pool, "from", t.Node, "to", nt.Node, "collector", nt.Collector)
			kept = append(kept, nt)
			dropped = append(dropped, t)
		default:
			kept = append(kept, nt)
		}
	}
	return kept, dropped
}

// countWaiting counts the idle jobs that wait for another pool; s.mu held.
func (s *Schedd) countWaiting(now time.Time, idle time.Duration) int {
	waiting := 0
	s.idle.each(func(_ jobqueue.JobID, ij *idleJob) bool {
		if s.waiting(ij, now, idle) {
			waiting++
		}
		return true
	})
	return waiting
}

// keepBusy keeps, when nothing waits, only the pools that run jobs of the
// schedd, whose claims may take the next ones, and drops the others;
// s.mu held.
func (s *Schedd) keepBusy(kept, dropped []FlockTarget) ([]FlockTarget, []FlockTarget) {
	var busy []FlockTarget
	for _, t := range kept {
		if s.runningIn(t.Pool) > 0 {
			busy = append(busy, t)
		} else {
			dropped = append(dropped, t)
		}
	}
	return busy, dropped
}

// addPools adds to kept the next willing pools of targets, nearest first,
// FLOCK_INCREMENT (incr) at a time; the next ones come only when jobs
// still wait FLOCK_IDLE_TIME later. s.mu held.
func (s *Schedd) addPools(kept, targets []FlockTarget, incr, waiting int) []FlockTarget {
	in := map[string]bool{}
	for _, t := range kept {
		in[strings.ToLower(t.Pool)] = true
	}
	added := 0
	for _, t := range targets {
		if added == incr {
			break
		}
		if !in[strings.ToLower(t.Pool)] && t.IdleSlots > 0 {
			in[strings.ToLower(t.Pool)] = true
			kept = append(kept, t)
			added++
			s.log.Info("flocking", "pool", t.Pool, "collector", t.Collector, "waiting", waiting)
		}
	}
	return kept
}

// flockAdvert is what the schedd advertises to one flocked pool: its
// submitter ads and how many idle jobs they count.
type flockAdvert struct {
	t    FlockTarget
	ads  []wire.Ad
	idle int
}

// flockAdverts counts, per owner, the jobs that may go to each pool of
// kept (within the pool's room) and those running there, as submitter
// ads; s.mu held.
func (s *Schedd) flockAdverts(kept []FlockTarget, now time.Time, idle time.Duration) []flockAdvert {
	var advs []flockAdvert
	for _, t := range kept {
		per := map[string]*jobCounts{}
		total := 0
		room := s.roomIn(t)
		s.idle.each(func(_ jobqueue.JobID, ij *idleJob) bool {
			if room >= 0 && total >= room {
				return false
			}
			if s.jobFlocks(ij, t, now, idle) {
				c := per[ij.owner]
				if c == nil {
					c = &jobCounts{}
					per[ij.owner] = c
				}
				c.idle++
				total++
			}
			return true
		})
		for _, c := range s.active {
			if c.pool == t.Pool && c.ad != nil {
				owner, _ := c.ad.EvalAttr("Owner").StringValue()
				owner = submitterOf(owner, c.ad)
				if per[owner] == nil {
					per[owner] = &jobCounts{}
				}
				per[owner].running++
			}
		}
		a := flockAdvert{t: t, idle: total}
		for owner, n := range per {
			a.ads = append(a.ads, s.submitterAd(owner, n))
		}
		advs = append(advs, a)
	}
	return advs
}

// advertiseFlocked sends a's submitter ads to its pool's collector and,
// when jobs there wait and the pool's negotiator was not asked in the
// last 5 seconds, asks it for a cycle. s.adv held.
func (s *Schedd) advertiseFlocked(ctx context.Context, a flockAdvert, now time.Time) {
	uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := s.peer(a.t.Collector).Collector().Update(uctx, &wire.UpdateRequest{Type: wire.TypeSubmitter, Source: s.source(),
		Ads: a.ads, Lifetime: int(flockLifetime / time.Second)})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("advertising to a flocked pool", "pool", a.t.Pool, "collector", a.t.Collector, "err", err)
		}
		return
	}
	s.mu.Lock()
	last := s.fl.nudged[a.t.Node]
	nudge := a.idle > 0 && now.Sub(last) >= 5*time.Second
	if nudge {
		s.fl.nudged[a.t.Node] = now
	}
	s.mu.Unlock()
	if nudge {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := s.peer(a.t.Collector).Negotiator().Reschedule(rctx); err != nil && ctx.Err() == nil {
			s.log.Debug("asking a flocked pool's negotiator for a cycle", "pool", a.t.Pool, "err", err)
		}
		cancel()
	}
}

// withdrawFlocks withdraws the schedd's submitters from every pool it
// flocks to, as it stops.
func (s *Schedd) withdrawFlocks(ctx context.Context) {
	s.mu.Lock()
	fl := s.fl.flocked
	s.fl.flocked = nil
	s.mu.Unlock()
	for _, t := range fl {
		_ = s.peer(t.Collector).Collector().Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeSubmitter, Source: s.source()})
	}
}

// flockAttrs are the attributes a job (its ad job) gets as it starts under
// claim c: the pool it was flocked to, if any. A job that ran in another
// pool before and starts at home now is flocked nowhere: its
// PondFlockedTo becomes undefined, and LastRemotePool stays.
func flockAttrs(c *claim, job *classad.Ad, attrs jobqueue.Ad) {
	if c.pool == "" {
		if _, ok := job.Lookup(AttrFlockedTo); ok {
			attrs[AttrFlockedTo] = "undefined"
		}
		return
	}
	attrs[AttrFlockedTo] = strconv.Quote(c.pool)
	attrs[AttrLastRemotePool] = strconv.Quote(c.pool)
}
