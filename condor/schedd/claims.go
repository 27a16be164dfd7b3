package schedd

import (
	"context"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// ClaimInfo says whether the schedd holds a claim, and for which job. A
// startd asks about a claim it has left idle: a schedd restarted since it
// made the claim no longer knows it, and the startd may release the slot
// at once instead of waiting for CLAIM_IDLE_TIMEOUT.
func (s *Schedd) ClaimInfo(ctx context.Context, req *wire.ClaimInfoRequest) (*wire.ClaimInfoResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.claims[req.ClaimID]
	if c == nil {
		return &wire.ClaimInfoResponse{}, nil
	}
	return &wire.ClaimInfoResponse{Exists: true, JobID: c.job.String(), Active: c.busy}, nil
}

// fits reports whether job can run in a claimed slot: both ads' requirements
// hold and the slot has the resources the job requests.
func fits(job, slot *classad.Ad) bool {
	if !classad.Match(job, slot) {
		return false
	}
	return job.EvalNumber("RequestCpus", slot, 1) <= slot.EvalNumber("Cpus", job, 0) &&
		job.EvalNumber("RequestMemory", slot, 0) <= slot.EvalNumber("Memory", job, 0) &&
		job.EvalNumber("RequestDisk", slot, 0) <= slot.EvalNumber("Disk", job, 0)
}

// finishClaim forgets a claim and its job, unless the job runs under
// another claim by now (it was requeued, and matched again, before this
// claim was let go).
func (s *Schedd) finishClaim(c *claim) {
	s.mu.Lock()
	if s.active[c.job] == c {
		delete(s.active, c.job)
	}
	if s.claims[c.id] == c {
		delete(s.claims, c.id)
	}
	s.jobEndedLocked()
	s.mu.Unlock()
}

// reuseAsync reuses a claim in the background.
func (s *Schedd) reuseAsync(c *claim) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.reuse(c)
	}()
}

// releaseAsync forgets and releases a claim in the background.
func (s *Schedd) releaseAsync(c *claim) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.finishClaim(c)
		s.release(c)
	}()
}

// reuse runs the next idle job that fits the claimed slot, or releases the
// claim.
func (s *Schedd) reuse(c *claim) {
	s.mu.Lock()
	if s.active[c.job] == c {
		delete(s.active, c.job)
	}
	c.busy, c.deadline = false, time.Time{}
	var next jobqueue.JobID
	var ij *idleJob
	// A claim in a pool the job was flocked to takes the next job only
	// while the schedd still flocks there, and only a job that may go
	// there: when the flock ends, the claim goes back.
	t, flocked := FlockTarget{}, c.pool == ""
	if c.pool != "" {
		for _, f := range s.fl.flocked {
			if f.Pool == c.pool {
				t, flocked = f, true
			}
		}
		if flocked && s.roomIn(t) == 0 {
			flocked = false
		}
	}
	idle, _ := s.flockParams()
	now := s.now()
	if c.slot != nil && !s.stopped && flocked {
		next, ij = s.idle.firstFit(func(ac *idleCluster, first *idleJob) bool {
			return fits(ac.ad, c.slot) && sameLimits(c.ad, ac.ad) && sameSubmitter(c.ad, ac.owner) &&
				(c.pool == "" || s.jobFlocks(first, t, now, idle))
		})
	}
	if ij != nil && !s.admitLocked(len(s.active)) {
		ij = nil
	}
	if ij == nil {
		s.jobEndedLocked()
		delete(s.claims, c.id)
		s.mu.Unlock()
		s.release(c)
		return
	}
	s.idle.delete(next)
	prev := c.ad
	c.job, c.busy = next, true
	// The job runs again under the claim (held, released, matched again):
	// its next final report is a new one.
	s.forgetFinalLocked(finalKey{claim: c.id, job: next})
	c.ad, c.outputStarted, c.outputErr, c.inputBytes, c.execute = nil, false, "", 0, nil
	// The claim starts its next job as a new claim starts its first: its
	// lease runs once the activation returns (run). Until then the startd
	// still holds the previous job, or none: a probe of the claim as a
	// silent job's would find the next job "not found" there, requeue it
	// and release the claim under its activation.
	c.contact, c.probed, c.unreachable, c.seaLost = time.Time{}, time.Time{}, false, false
	s.active[next] = c
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ja, err := s.loadJob(ctx, next)
	if err != nil {
		// Removed or held meanwhile: the claim takes the next one.
		s.log.Debug("reading the next job", "job", next, "err", err)
		s.reuse(c)
		return
	}
	if !fits(ja.ad, c.slot) || !sameLimits(prev, ja.ad) || !sameSubmitter(prev, submitterOf(ownerOf(ja.ad), ja.ad)) {
		// Its autocluster fits, its own ad does not: it waits for a
		// negotiation cycle.
		s.mu.Lock()
		s.idle.put(next, s.idleEntry(ij.owner, ij.since, ja))
		s.mu.Unlock()
		s.log.Debug("reusing claim: the next job does not fit the claimed slot", "slot", c.slotName, "job", next)
		s.mu.Lock()
		if s.active[next] == c {
			delete(s.active, next)
		}
		delete(s.claims, c.id)
		s.mu.Unlock()
		s.release(c)
		return
	}
	s.run(ctx, c, next, ja)
}

// release gives a claim back to its startd.
func (s *Schedd) release(c *claim) {
	if c.id == "" || c.addr() == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.peer(c.addr()).Startd().Release(ctx, &wire.ReleaseRequest{ClaimID: c.id}); err != nil {
		s.log.Debug("releasing claim", "slot", c.slotName, "err", err)
	}
}
