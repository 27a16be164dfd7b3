package schedd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// recover re-adopts the claims of running jobs; each gets its job lease
// (JobLeaseDuration, else JOB_LEASE_DURATION) from now for its starter to
// report, or it is requeued. The startd of a job whose schedd is down
// keeps it for that lease from its last contact, which was earlier
// (condor/startd/schedddown.go); until the starter reports, the claim
// lease does not apply to the job. It reads only the running jobs, through
// the queue's status index: the idle jobs, which may be many, are filed
// after (loadIdle), so that a large queue does not hold up the daemons'
// start.
func (s *Schedd) recover(ctx context.Context) error {
	running, err := s.q.Query(ctx, jobqueue.Selector{All: true, Statuses: []jobqueue.Status{jobqueue.Running}},
		[]string{"PondClaimId", "PondStartd", "RemoteHost", "JobStatus", "JobUniverse", attrLocalPid, attrLocalStart, "KillSig", "RemoveKillSig",
			"JobLeaseDuration"})
	if err != nil {
		return fmt.Errorf("loading running jobs: %w", err)
	}
	for _, j := range running {
		if j.Status != jobqueue.Running {
			continue
		}
		if isLocalAd(j.Ad) {
			s.recoverLocal(j)
			continue
		}
		id, _ := classad.UnquoteString(j.Ad["PondClaimId"])
		startd, _ := classad.UnquoteString(j.Ad["PondStartd"])
		slotName, _ := classad.UnquoteString(j.Ad["RemoteHost"])
		lease := s.jobLease(j.Ad)
		now := s.now()
		c := &claim{id: id, startd: startd, slotName: slotName, job: j.ID, busy: true, deadline: now.Add(lease), lease: lease, recovered: now}
		s.active[j.ID] = c
		if id != "" {
			s.claims[id] = c
		}
	}
	return nil
}

// loadIdle files the idle jobs of the queue for matchmaking as the
// schedd starts, a cluster at a time, while the schedd already serves
// (the negotiator's requests wait for it: Idle). A failed read is tried
// again after retry, until ctx is done. Once done, the schedd advertises
// its idle jobs and asks for a negotiation cycle.
func (s *Schedd) loadIdle(ctx context.Context, retry time.Duration) {
	start := time.Now()
	for {
		err := s.loadIdleOnce(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Error("loading the idle jobs of the queue; trying again", "err", err, "retry", retry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
	s.mu.Lock()
	n := s.idle.len()
	s.mu.Unlock()
	if n > 0 {
		s.log.Info("filed the idle jobs of the queue", "idle", n, "took", time.Since(start).Round(time.Millisecond))
	}
	s.markDirty()
	s.reschedule()
}

// loadIdleOnce files every idle job of the queue, a cluster at a time,
// each under regroup so that a negotiator's new significant attributes
// (widen) refile it whole.
func (s *Schedd) loadIdleOnce(ctx context.Context) error {
	clusters, err := s.q.IdleClusters(ctx)
	if err != nil {
		return fmt.Errorf("loading idle jobs: %w", err)
	}
	for _, c := range clusters {
		s.regroup.Lock()
		err := s.indexIdle(ctx, []int{c})
		s.regroup.Unlock()
		if err != nil {
			return fmt.Errorf("loading idle jobs: %w", err)
		}
	}
	return nil
}

// expireLeases reconnects to the jobs recovered after a restart, and to
// those whose activation was not answered (unanswered.go): a job whose
// startd says its claim does not run it, or whose starter has not reported
// within JOB_LEASE_DURATION, is requeued.
func (s *Schedd) expireLeases(ctx context.Context) {
	now := s.now()
	var expired, unverified []*claim
	s.mu.Lock()
	for _, c := range s.active {
		switch {
		case c.deadline.IsZero():
		case now.After(c.deadline):
			expired = append(expired, c)
		case !c.verified && c.addr() != "" && c.id != "" && !c.probing && now.Sub(c.probed) >= s.alive:
			c.probing, c.probed = true, now
			unverified = append(unverified, c)
		}
	}
	s.mu.Unlock()
	for _, c := range expired {
		s.requeueLost(ctx, c)
	}
	// The startds are asked in parallel, as many at once as the schedd
	// allows its probes (lost.go), each claim once an ALIVE_INTERVAL at
	// most: a startd that does not answer holds up no other.
	for _, c := range unverified {
		s.startProbe(c, func() {
			lost := s.lostClaim(ctx, c)
			s.mu.Lock()
			c.probing = false
			s.mu.Unlock()
			if lost {
				s.requeueLost(context.WithoutCancel(ctx), c)
			}
		})
	}
}

// lostClaim asks the startd of a recovered claim whether it still runs the
// job, and reports whether the startd says it does not, or nothing has
// listened at its address for a claim lease and a renewal interval since
// the recovery (the worker's agent died, and the job with it, while the
// schedd was down: the sea, restarted with the schedd, may never tell of
// that failure); a startd that does not answer, or the startd of another
// machine than the claim's, leaves the decision to the job lease.
//
// A refusal right after the restart proves nothing: a worker reached
// through this agent as its relay is listened for here only once its
// tunnel is open again, a second or two after the agent starts. By the
// end of the claim lease the worker has either come back or, not renewed,
// killed the job itself.
func (s *Schedd) lostClaim(ctx context.Context, c *claim) bool {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := s.peer(c.addr()).Startd().ClaimInfo(cctx,
		&wire.ClaimInfoRequest{ClaimID: c.id, Schedd: s.opts.Address, ScheddName: s.opts.Name})
	if err != nil {
		if !refused(err) {
			return false
		}
		if s.now().Sub(c.recovered) < s.claimLease+s.alive {
			s.log.Debug("nothing listens at the address of a recovered claim's startd yet", "job", c.job, "address", c.addr(), "err", err)
			return false
		}
		s.log.Info("nothing listens at the address of a recovered claim's startd: its agent is dead", "job", c.job,
			"address", c.addr(), "err", err)
		return true
	}
	if node := slotNode(c.slotName); info.Machine != "" && node != "" && info.Machine != node {
		// Another machine answers where the claim's startd was: it has
		// moved (its relay gave it another port), and its next report
		// says where to.
		s.log.Info("another machine answers at the address of a recovered claim's startd; waiting for its report", "job", c.job,
			"address", c.addr(), "machine", info.Machine, "slot", c.slotName)
		return false
	}
	if info.Exists && info.Active && info.JobID == c.job.String() {
		s.mu.Lock()
		c.verified = true
		pending := c.pending != nil
		s.mu.Unlock()
		if pending {
			s.activationConfirmed(ctx, c)
		}
		return false
	}
	return true
}

// requeueLost requeues the job of a lost claim, unless it reported
// meanwhile.
func (s *Schedd) requeueLost(ctx context.Context, c *claim) {
	// The first of the sweep and a probe to find the claim lost requeues
	// its job; the deadline, cleared, tells the other.
	s.mu.Lock()
	current := s.active[c.job] == c && !c.deadline.IsZero()
	pending, deadline := c.pending, c.deadline
	if current {
		c.deadline = time.Time{}
	}
	s.mu.Unlock()
	if !current {
		return
	}
	if pending != nil {
		s.activationGivenUp(ctx, c, pending)
		return
	}
	s.log.Info("lost the claim of a recovered job; requeueing", "job", c.job)
	s.finishClaim(c)
	s.release(c)
	why := "Job not found at execution machine"
	if s.now().After(deadline) {
		why = fmt.Sprintf("Job disconnected too long: JobLeaseDuration (%d seconds) expired", int(s.claimJobLease(c).Seconds()))
	}
	if err := s.logged(ctx, nil, joblog.Event{Type: joblog.JobReconnectFailed, SlotName: c.slotName, Message: why}, func(ctx context.Context) error {
		return s.q.Transition(ctx, c.job, jobqueue.Idle, nil)
	}); err != nil {
		s.log.Warn("requeueing job", "job", c.job, "err", err)
		return
	}
	s.addIdle(ctx, c.job)
}

// jobLease is a job's lease (startd.JobLease): its JobLeaseDuration, else
// JOB_LEASE_DURATION; never shorter than the claim lease. The startd of a
// job it cannot reach keeps the job for that lease, counted from the last
// renewal the schedd accepted.
func (s *Schedd) jobLease(ad map[string]string) time.Duration {
	lease := s.lease
	for k, v := range ad {
		if strings.EqualFold(k, "JobLeaseDuration") {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
				lease = time.Duration(n) * time.Second
			}
		}
	}
	return max(lease, s.claimLease)
}

// withJobLease is the ad of a job sent to its startd, whose
// JobLeaseDuration is the job lease the schedd counts with (jobLease): the
// two daemons agree on it whatever the job's ad said.
func (s *Schedd) withJobLease(w wire.Ad) wire.Ad {
	out := make(wire.Ad, len(w)+1)
	for k, v := range w {
		if !strings.EqualFold(k, "JobLeaseDuration") {
			out[k] = v
		}
	}
	out["JobLeaseDuration"] = strconv.FormatInt(int64(s.jobLease(w)/time.Second), 10)
	return out
}
