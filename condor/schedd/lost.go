package schedd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// NodeLost tells the schedd that the sea declared the node name failed or
// gone (serf's failure detector). The jobs running there are disconnected:
// the schedd writes the event now, and requeues them when it knows the
// node's agent, and so the jobs, dead, or else once their job lease has
// surely run out on the node too (expireClaims): a node that is only cut
// off keeps running them until then.
func (s *Schedd) NodeLost(ctx context.Context, name string) {
	if name == "" {
		return
	}
	// A report that brings a claim back waits for its disconnected event
	// (reconnected), so that the log shows the two in order.
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	var lost []*claim
	now := s.now()
	s.mu.Lock()
	for _, c := range s.active {
		if c.stopInputs != nil && slotNode(c.slotName) == name {
			// Its input files are on their way to a node that is gone:
			// the job goes back to the queue now rather than when the
			// transfer stalls.
			c.stopInputs()
		}
		if slotNode(c.slotName) == name {
			c.seaLost = true
		}
		if c.lost.IsZero() && slotNode(c.slotName) == name {
			switch {
			case !c.contact.IsZero():
				c.lost = now
				lost = append(lost, c)
			case !c.deadline.IsZero():
				// Recovered after a restart, not reported yet: its
				// event waits for the requeue, if any.
				c.lost = now
			default:
				// Starting: its activation may still succeed, the
				// startd's answer on its way as the node went. Then
				// the job is disconnected (started), and requeued once
				// its silent node refuses connections, not after its
				// job lease.
				c.lost = now
			}
		}
	}
	s.mu.Unlock()
	for _, c := range lost {
		s.log.Info("the node of a running job is gone; the job is requeued when its agent is known dead, or after its job lease", "job", c.job, "node", name, "job_lease", c.lease)
		s.disconnected(ctx, c, "The execute node "+name+" failed or left the sea")
	}
}

// slotNode is the node of a slot name ("slot1_2@node" is on node).
func slotNode(slot string) string {
	i := strings.LastIndexByte(slot, '@')
	return slot[i+1:]
}

// disconnected writes a running job's disconnected event.
func (s *Schedd) disconnected(ctx context.Context, c *claim, why string) {
	s.writeEvent(ctx, c.job, nil, joblog.Event{Type: joblog.JobDisconnected, Message: why,
		SlotName: c.slotName, Host: "<" + c.addr() + ">"})
}

// reconnected writes the reconnected event of a disconnected job whose
// node was heard of again within the claim lease, and counts the
// reconnection (NumJobReconnects), as HTCondor's shadow does: the job goes
// on where it runs.
func (s *Schedd) reconnected(ctx context.Context, c *claim) {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	j, err := s.q.Get(ctx, c.job)
	if err != nil || j.Status != jobqueue.Running {
		return // removed or held meanwhile
	}
	s.log.Info("the node of a disconnected job is back; the job goes on", "job", c.job, "slot", c.slotName)
	n, _ := strconv.Atoi(j.Ad["NumJobReconnects"])
	if err := s.q.SetAttrs(ctx, c.job, jobqueue.Ad{"NumJobReconnects": strconv.Itoa(n + 1)}); err != nil && !gone(err) {
		s.log.Warn("counting a reconnection", "job", c.job, "err", err)
	}
	addr := "<" + c.addr() + ">"
	s.writeEvent(ctx, c.job, nil, joblog.Event{Type: joblog.JobReconnected, SlotName: c.slotName, Host: addr, StarterHost: addr})
}

// expireClaims requeues the running jobs whose startd the schedd has not
// heard of for their job lease and one renewal interval more: by then the
// startd has killed the job if it still runs (startd.JobLease). A job
// not heard of for the claim lease (and an interval) is requeued sooner
// only if its worker is known dead (workerDead): a worker merely cut off
// keeps running it until the job lease.
func (s *Schedd) expireClaims(ctx context.Context) {
	now := s.now()
	cutoff := now.Add(-s.claimLease - s.alive)
	// Each claim with its job as the sweep saw it: the claim may go on to
	// another job before it is acted on.
	type probe struct {
		c   *claim
		job jobqueue.JobID
	}
	var expired, silent []probe
	s.mu.Lock()
	for _, c := range s.active {
		if c.contact.IsZero() || !c.contact.Before(cutoff) || c.receiving != 0 || c.committing != 0 {
			continue
		}
		if c.contact.Before(now.Add(-s.claimJobLease(c) - s.alive)) {
			expired = append(expired, probe{c, c.job})
		} else if !c.probing && now.Sub(c.probed) >= s.alive {
			c.probing, c.probed = true, now
			silent = append(silent, probe{c, c.job})
		}
	}
	s.mu.Unlock()
	for _, p := range expired {
		s.reconnectFailed(ctx, p.c, p.job, fmt.Sprintf("Job disconnected too long: JobLeaseDuration (%d seconds) expired", int(s.claimJobLease(p.c).Seconds())))
	}
	for _, p := range silent {
		c := p.c
		s.startProbe(c, func() {
			pctx, cancel := context.WithTimeout(s.done, probeTimeout)
			dead, why := s.workerDead(pctx, c, p.job)
			cancel()
			s.mu.Lock()
			c.probing = false
			// The claim may have gone on to another job meanwhile: what
			// the startd said is of the job probed.
			current := s.active[p.job] == c && c.job == p.job
			waiting := !dead && !c.unreachable && current
			c.unreachable = c.unreachable || waiting
			s.mu.Unlock()
			switch {
			case dead && current:
				s.log.Info("the worker of a silent job is dead; requeueing the job now", "job", p.job, "slot", c.slotName, "why", why)
				s.reconnectFailed(context.WithoutCancel(ctx), c, p.job, why)
			case waiting:
				s.log.Warn("cannot reach the worker of a running job; it may still run the job, which is requeued after its job lease",
					"job", p.job, "slot", c.slotName, "job_lease", s.claimJobLease(c), "why", why)
			}
		})
	}
}

// startProbe runs probe, which asks the startd of claim c about it, in
// the background when fewer than maxProbes are on their way. Else the
// claim is asked at a later sweep: it is marked not probing, and not
// probed lately.
func (s *Schedd) startProbe(c *claim, probe func()) {
	select {
	case s.probes <- struct{}{}:
	default:
		s.mu.Lock()
		c.probing, c.probed = false, time.Time{}
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.probes }()
		probe()
	}()
}

// probeTimeout bounds how long the schedd waits for the startd of a
// silent job to answer whether it still runs the job; maxProbes bounds
// the probes on their way at once (a partition may silence the workers of
// thousands of jobs), each claim's one ALIVE_INTERVAL apart at least.
const (
	probeTimeout = 5 * time.Second
	maxProbes    = 64
)

// claimJobLease is the job lease of a running job's claim.
func (s *Schedd) claimJobLease(c *claim) time.Duration {
	if c.lease > 0 {
		return c.lease
	}
	return max(s.lease, s.claimLease)
}

// workerDead asks the startd of a running job whose claim lease ran out
// whether it still runs the job, and reports whether the job surely runs
// there no more, and why: the startd answers that it does not run it, or
// the sea declared the node failed or gone and its address refuses
// connections (nothing listens there: the node's agent is dead, and the
// job died with it, its supervisor bound to the agent's life). A worker
// that does not answer, or answers that it runs the job, may run it: the
// job lease holds.
func (s *Schedd) workerDead(ctx context.Context, c *claim, job jobqueue.JobID) (bool, string) {
	s.mu.Lock()
	lost := !c.lost.IsZero() || c.seaLost
	s.mu.Unlock()
	info, err := s.peer(c.addr()).Startd().ClaimInfo(ctx,
		&wire.ClaimInfoRequest{ClaimID: c.id, Schedd: s.opts.Address, ScheddName: s.opts.Name})
	switch {
	case err != nil && refused(err) && lost:
		return true, "The execute node " + slotNode(c.slotName) + " failed and its agent is gone: " + err.Error()
	case err != nil:
		// A time of its own: the old address may have spent the probe's
		// (a listener that never answers).
		mctx, cancel := context.WithTimeout(s.done, probeTimeout)
		gone, why := s.restartedElsewhere(mctx, c)
		cancel()
		if gone {
			return true, why
		}
		return false, err.Error()
	case info.Machine != "" && slotNode(c.slotName) != "" && info.Machine != slotNode(c.slotName):
		// Another machine answers at the address: the claim's startd
		// moved; its next report, if any, says where to.
		return false, "another machine (" + info.Machine + ") answers at " + c.addr()
	case info.Exists && info.Active && info.JobID == job.String():
		// It runs the job, or sends its report.
		return false, "its startd still runs the job"
	}
	return true, "Job not found at execution machine"
}

// restartedElsewhere reports whether the claim's node has a startd at
// another address than the claim's that does not hold the claim: its
// agent started again elsewhere (a port of its taken), and the job it ran
// died with the agent before. (A startd that moved with its claims, as a
// relayed one may, holds the claim, and its next report says where it
// is.) The node's current address is its slots' ads'
// at the collector (PondAddress); an ad of the old address, not yet
// replaced, tells nothing.
func (s *Schedd) restartedElsewhere(ctx context.Context, c *claim) (bool, string) {
	node, cm := slotNode(c.slotName), s.opts.Collector()
	if node == "" || cm == "" {
		return false, ""
	}
	ads, err := s.peer(cm).Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine,
		Constraint: "Machine == " + classad.QuoteString(node), Projection: []string{"PondAddress"}})
	if err != nil {
		return false, ""
	}
	for _, ad := range ads {
		addr, _ := classad.UnquoteString(ad["PondAddress"])
		if addr == "" || addr == c.addr() {
			continue
		}
		info, err := s.peer(addr).Startd().ClaimInfo(ctx, &wire.ClaimInfoRequest{ClaimID: c.id, Schedd: s.opts.Address, ScheddName: s.opts.Name})
		if err != nil || info.Exists || (info.Machine != "" && info.Machine != node) {
			return false, ""
		}
		return true, "The execute node " + node + " started again (its startd now at " + addr + ") and does not hold the job's claim"
	}
	return false, ""
}

// refused reports whether err says that nothing listens at the address
// called.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// reconnectFailed requeues job, of a claim whose lease ran out, or whose
// worker is dead, for why, unless the job ended or reported meanwhile, or
// the claim went on to another job, or is starting one (its activation
// has not returned: it has no contact). The claim is forgotten first: a
// late report of it is refused, and the startd, told so, stops its copy.
// A job lost more often than its JobMaxRetries is held instead.
func (s *Schedd) reconnectFailed(ctx context.Context, c *claim, job jobqueue.JobID, why string) {
	cutoff := s.now().Add(-s.claimLease - s.alive)
	s.mu.Lock()
	// A claim whose job's output arrives, or whose final report is being
	// applied, is alive.
	current := c.job == job && s.active[job] == c && !c.contact.IsZero() && c.contact.Before(cutoff) && c.receiving == 0 && c.committing == 0
	logged := !c.lost.IsZero()
	if current {
		delete(s.active, job)
		delete(s.claims, c.id)
	}
	s.mu.Unlock()
	if !current {
		return
	}
	s.log.Info("lost a running job's claim; requeueing", "job", job, "slot", c.slotName)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.release(c)
	}()
	j, err := s.q.Get(ctx, job)
	if err != nil || j.Status != jobqueue.Running {
		return // removed or held meanwhile
	}
	if !logged {
		s.disconnected(ctx, c, "Socket between submit and execute hosts closed unexpectedly")
	}
	losses, _ := strconv.Atoi(j.Ad["NumJobsLost"])
	losses++
	if err := s.logged(ctx, nil, joblog.Event{Type: joblog.JobReconnectFailed, SlotName: c.slotName, Message: why},
		func(ctx context.Context) error {
			return s.q.Transition(ctx, job, jobqueue.Idle, jobqueue.Ad{"NumJobsLost": strconv.Itoa(losses)})
		}); err != nil {
		s.log.Warn("requeueing job", "job", job, "err", err)
		return
	}
	if limit, err := strconv.Atoi(j.Ad["JobMaxRetries"]); err == nil && losses > limit {
		reason := fmt.Sprintf("The job's execute node was lost %d times, more than JobMaxRetries (%d)", losses, limit)
		if err := s.logged(ctx, nil, joblog.Event{Type: joblog.Held, Message: reason, HoldCode: holdCodeShadowExceptions}, func(ctx context.Context) error {
			_, err := s.q.Hold(ctx, jobqueue.OneJob(job), reason, holdCodeShadowExceptions, 0)
			return err
		}); err == nil {
			s.markDirty()
			return
		}
	}
	s.markDirty()
	s.addIdle(ctx, job)
	s.reschedule()
}
