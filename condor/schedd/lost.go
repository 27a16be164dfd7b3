package schedd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// NodeLost tells the schedd that the sea declared the node name failed or
// gone (serf's failure detector). The jobs running there are disconnected:
// the schedd writes the event now and requeues them once their claim
// lease has surely run out on the node too (expireClaims), since a node
// that is only cut off keeps running them until then.
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
		if !c.contact.IsZero() && c.lost.IsZero() && slotNode(c.slotName) == name {
			c.lost = now
			lost = append(lost, c)
		}
	}
	s.mu.Unlock()
	for _, c := range lost {
		s.log.Info("the node of a running job is gone; waiting for its claim lease", "job", c.job, "node", name)
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
// heard of for the claim lease and one renewal interval more: by then the
// startd has killed the job if it still runs (see startd.ClaimLease).
func (s *Schedd) expireClaims(ctx context.Context) {
	cutoff := s.now().Add(-s.claimLease - s.alive)
	var expired []*claim
	s.mu.Lock()
	for _, c := range s.active {
		if !c.contact.IsZero() && c.contact.Before(cutoff) && c.receiving == 0 && c.committing == 0 {
			expired = append(expired, c)
		}
	}
	s.mu.Unlock()
	for _, c := range expired {
		s.reconnectFailed(ctx, c)
	}
}

// reconnectFailed requeues the job of a claim whose lease ran out, unless
// the job ended or reported meanwhile. The claim is forgotten first: a
// late report of it is refused, and the startd, told so, stops its copy.
// A job lost more often than its JobMaxRetries is held instead.
func (s *Schedd) reconnectFailed(ctx context.Context, c *claim) {
	cutoff := s.now().Add(-s.claimLease - s.alive)
	s.mu.Lock()
	// A claim whose job's output arrives, or whose final report is being
	// applied, is alive.
	current := s.active[c.job] == c && c.contact.Before(cutoff) && c.receiving == 0 && c.committing == 0
	logged := !c.lost.IsZero()
	if current {
		delete(s.active, c.job)
		delete(s.claims, c.id)
	}
	s.mu.Unlock()
	if !current {
		return
	}
	s.log.Info("lost a running job's claim; requeueing", "job", c.job, "slot", c.slotName)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.release(c)
	}()
	j, err := s.q.Get(ctx, c.job)
	if err != nil || j.Status != jobqueue.Running {
		return // removed or held meanwhile
	}
	if !logged {
		s.disconnected(ctx, c, "Socket between submit and execute hosts closed unexpectedly")
	}
	losses, _ := strconv.Atoi(j.Ad["NumJobsLost"])
	losses++
	if err := s.logged(ctx, nil, joblog.Event{Type: joblog.JobReconnectFailed, SlotName: c.slotName,
		Message: fmt.Sprintf("Job disconnected too long: JobLeaseDuration (%d seconds) expired", int((s.claimLease + s.alive).Seconds()))},
		func(ctx context.Context) error {
			return s.q.Transition(ctx, c.job, jobqueue.Idle, jobqueue.Ad{"NumJobsLost": strconv.Itoa(losses)})
		}); err != nil {
		s.log.Warn("requeueing job", "job", c.job, "err", err)
		return
	}
	if limit, err := strconv.Atoi(j.Ad["JobMaxRetries"]); err == nil && losses > limit {
		reason := fmt.Sprintf("The job's execute node was lost %d times, more than JobMaxRetries (%d)", losses, limit)
		if err := s.logged(ctx, nil, joblog.Event{Type: joblog.Held, Message: reason, HoldCode: holdCodeShadowExceptions}, func(ctx context.Context) error {
			_, err := s.q.Hold(ctx, jobqueue.OneJob(c.job), reason, holdCodeShadowExceptions, 0)
			return err
		}); err == nil {
			s.markDirty()
			return
		}
	}
	s.markDirty()
	s.addIdle(ctx, c.job)
	s.reschedule()
}
