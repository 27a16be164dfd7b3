package schedd

import (
	"context"
	"fmt"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// recover loads idle jobs and re-adopts the claims of running jobs; each
// gets JOB_LEASE_DURATION for its starter to report, or it is requeued.
func (s *Schedd) recover(ctx context.Context) error {
	clusters, err := s.q.IdleClusters(ctx)
	if err != nil {
		return fmt.Errorf("loading idle jobs: %w", err)
	}
	if err := s.indexIdle(ctx, clusters); err != nil {
		return fmt.Errorf("loading idle jobs: %w", err)
	}
	running, err := s.q.Query(ctx, jobqueue.Selector{All: true, Constraint: func(j jobqueue.Job) bool { return j.Status == jobqueue.Running }},
		[]string{"PondClaimId", "PondStartd", "RemoteHost", "JobStatus", "JobUniverse", attrLocalPid, attrLocalStart, "KillSig", "RemoveKillSig"})
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
		c := &claim{id: id, startd: startd, slotName: slotName, job: j.ID, busy: true, deadline: s.now().Add(s.lease), contact: s.now()}
		s.active[j.ID] = c
		if id != "" {
			s.claims[id] = c
		}
	}
	return nil
}

// expireLeases reconnects to the jobs recovered after a restart: a job
// whose startd says its claim no longer runs it, or whose starter has not
// reported within JOB_LEASE_DURATION, is requeued.
func (s *Schedd) expireLeases(ctx context.Context) {
	now := s.now()
	var expired, unverified []*claim
	s.mu.Lock()
	for _, c := range s.active {
		switch {
		case c.deadline.IsZero():
		case now.After(c.deadline):
			expired = append(expired, c)
		case !c.verified && c.addr() != "" && c.id != "":
			unverified = append(unverified, c)
		}
	}
	s.mu.Unlock()
	for _, c := range unverified {
		if s.lostClaim(ctx, c) {
			expired = append(expired, c)
		}
	}
	for _, c := range expired {
		s.requeueLost(ctx, c)
	}
}

// lostClaim asks the startd of a recovered claim whether it still runs the
// job, and reports whether the startd says it does not; a startd that does
// not answer, or the startd of another machine than the claim's, leaves
// the decision to the lease.
func (s *Schedd) lostClaim(ctx context.Context, c *claim) bool {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := s.peer(c.addr()).Startd().ClaimInfo(cctx,
		&wire.ClaimInfoRequest{ClaimID: c.id, Schedd: s.opts.Address, ScheddName: s.opts.Name})
	if err != nil {
		return false
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
		s.mu.Unlock()
		return false
	}
	return true
}

// requeueLost requeues the job of a lost claim, unless it reported
// meanwhile.
func (s *Schedd) requeueLost(ctx context.Context, c *claim) {
	s.mu.Lock()
	current := s.active[c.job] == c && !c.deadline.IsZero()
	s.mu.Unlock()
	if !current {
		return
	}
	s.log.Info("lost the claim of a recovered job; requeueing", "job", c.job)
	s.finishClaim(c)
	s.release(c)
	if err := s.q.Transition(ctx, c.job, jobqueue.Idle, nil); err != nil {
		s.log.Warn("requeueing job", "job", c.job, "err", err)
		return
	}
	s.writeEvent(ctx, c.job, nil, joblog.Event{Type: joblog.Evicted, Message: "Job lease expired"})
	s.addIdle(ctx, c.job)
}
