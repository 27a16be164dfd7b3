package schedd

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// pendingActivation is the activation of a claim's job whose answer never
// came: the job's own ad, for its requeue, and why the call failed.
type pendingActivation struct {
	ij  *ownAd
	err error
}

// unanswered says whether an activation's error leaves open whether the
// startd took the job: the request may have reached it and its answer been
// lost, as when the connection broke (a relay dropped the worker's
// tunnel), the call ran out of time, or a gateway between the two answered
// for the startd that it lost the way. An answer of the startd's own, or a
// request that never went out whole (wire.ErrNotSent: no connection, a
// failed handshake, a pooled connection the startd had closed), leaves no
// doubt: the job did not start.
func unanswered(err error) bool {
	if errors.Is(err, wire.ErrNotSent) {
		return false
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Status == http.StatusBadGateway || we.Status == http.StatusGatewayTimeout
	}
	return true
}

// awaitActivation keeps job id Running on claim c, whose activation got
// no answer (err), until its startd tells whether it took the job: were
// the job requeued now, a startd that did take it would run it while
// another slot ran it again. The claim waits as one recovered after a
// restart does (recover.go): the startd's first report on the job, or its
// answer that the claim runs it (lostClaim), makes the job a running one,
// its Execute event written then; an answer that the claim does not run
// it, nothing listening at the startd's address for a claim lease, or no
// word within the job lease (by then a startd that took it has killed it)
// requeues it as a failed activation (activationFailed).
func (s *Schedd) awaitActivation(c *claim, id jobqueue.JobID, ij *ownAd, err error) {
	now := s.now()
	s.mu.Lock()
	current := s.claims[c.id] == c && s.active[id] == c && c.job == id && c.contact.IsZero()
	if current {
		c.pending = &pendingActivation{ij: ij, err: err}
		c.recovered, c.verified = now, false
		c.deadline = now.Add(s.claimJobLease(c) + s.alive)
	}
	s.mu.Unlock()
	if !current {
		// The job's final report came first and was applied, or the
		// job was removed or held meanwhile: its claim is settled.
		return
	}
	s.log.Warn("the startd did not answer a job's activation; asking it whether it took the job", "job", id, "slot", c.slotName, "err", err,
		"job_lease", s.claimJobLease(c))
}

// activationConfirmed makes claim c, whose activation was not answered
// and whose startd says the claim runs the job, a running job's claim: its
// claim lease holds from now, and its Execute event is written.
func (s *Schedd) activationConfirmed(ctx context.Context, c *claim) {
	s.mu.Lock()
	confirmed := c.pending != nil && s.active[c.job] == c && !c.deadline.IsZero()
	if confirmed {
		c.pending, c.deadline, c.verified, c.contact, c.lost = nil, time.Time{}, true, s.now(), time.Time{}
	}
	job := c.job
	vacated := c.vacated == job
	s.mu.Unlock()
	if !confirmed {
		return
	}
	if vacated {
		// Removed or held meanwhile: its vacate may have come to the
		// startd before the activation did.
		s.log.Info("the startd runs the job whose activation it did not answer, removed or held since: it is stopped", "job", job, "slot", c.slotName)
		s.startdTold(ctx, c, job)
		s.vacateJob(c, job)
		return
	}
	s.log.Info("the startd runs the job whose activation it did not answer; the job goes on", "job", job, "slot", c.slotName)
	s.startdTold(ctx, c, job)
}

// activationGivenUp requeues the job of claim c, whose activation was not
// answered and whose startd did not take it: as any failed activation
// (activationFailed), its Execute event never written.
func (s *Schedd) activationGivenUp(ctx context.Context, c *claim, p *pendingActivation) {
	s.mu.Lock()
	x := c.execute
	s.mu.Unlock()
	if x != nil && x.job == c.job {
		s.dropExecute(x)
	}
	s.log.Info("the startd did not take the job whose activation it did not answer; requeueing", "job", c.job, "slot", c.slotName)
	s.activationFailed(ctx, c, c.job, p.ij, p.err)
}
