package schedd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// reportEnd says what a job's report leaves of the job's claim.
type reportEnd int

const (
	// reportFinished: the job no longer runs; the claim runs the next job
	// that fits.
	reportFinished reportEnd = iota
	// reportGone: the job was removed or held while it ran; the claim is
	// free again.
	reportGone
	// reportRequeued: the job went back to the queue; the claim is
	// released.
	reportRequeued
)

// finalReportTimeout bounds the application of a job's final report,
// which goes on when the starter stops waiting for the answer.
const finalReportTimeout = 5 * time.Minute

// finalsKept is how long the schedd remembers a final report it applied,
// to answer its starter's repeats (REPORT_RETRY_TIME, 10 minutes by
// default, from its first attempt) while the claim lives.
const finalsKept = 20 * time.Minute

// finalKey names a job's run under a claim.
type finalKey struct {
	claim string
	job   jobqueue.JobID
}

// finalReport is a job's final report being applied: done closes once it
// is, err then says how.
type finalReport struct {
	done chan struct{}
	err  error
	at   time.Time // when it was applied
}

// JobReport takes a starter's report on a job. A final report (exited,
// held, evicted) is applied once: its starter, which sends it again when
// the answer is late, gets for a repeat the first one's answer once that
// is known, and the repeat changes nothing; and it is applied whole even
// when the starter stops waiting.
func (s *Schedd) JobReport(ctx context.Context, r *wire.JobReport) (struct{}, error) {
	id, err := parseJobID(r.JobID)
	if err != nil {
		return struct{}{}, err
	}
	if r.Kind != wire.ReportUpdate && r.Kind != wire.ReportCheckpoint {
		return struct{}{}, s.finalJobReport(ctx, id, r)
	}
	return struct{}{}, s.jobReport(ctx, id, r)
}

// finalJobReport applies a job's final report unless it is being or was
// applied: a repeat waits for the first and answers as it did when it
// succeeded, and is applied itself when it failed.
func (s *Schedd) finalJobReport(ctx context.Context, id jobqueue.JobID, r *wire.JobReport) error {
	key := finalKey{claim: r.ClaimID, job: id}
	var f *finalReport
	for f == nil {
		s.mu.Lock()
		prev := s.finals[key]
		if prev == nil {
			f = &finalReport{done: make(chan struct{})}
			s.finals[key] = f
			s.sweepFinalsLocked()
		}
		s.mu.Unlock()
		if prev == nil {
			break
		}
		select {
		case <-prev.done:
			if prev.err == nil {
				s.log.Info("a job's final report again; answered as the first, which was applied", "job", id, "slot", r.SlotName, "kind", r.Kind)
				return nil
			}
			// The first failed, and was forgotten: this one is applied.
		case <-ctx.Done():
			return fmt.Errorf("job %s: waiting for its final report being applied: %w", id, ctx.Err())
		}
	}
	// What the report changes is made in a context of its own: a starter
	// that gives up waiting does not leave the job half-way.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalReportTimeout)
	defer cancel()
	err := s.jobReport(actx, id, r)
	s.mu.Lock()
	f.err, f.at = err, s.now()
	if err != nil {
		delete(s.finals, key)
	}
	s.mu.Unlock()
	close(f.done)
	return err
}

// sweepFinalsLocked forgets, once a minute at most, the final reports
// applied more than finalsKept ago, or whose claim the schedd no longer
// holds (a repeat is refused then, and its startd lets the claim go,
// as the schedd did). s.mu must be held.
func (s *Schedd) sweepFinalsLocked() {
	now := s.now()
	if now.Sub(s.finalsSwept) < time.Minute {
		return
	}
	s.finalsSwept = now
	for key, f := range s.finals {
		select {
		case <-f.done:
		default:
			continue
		}
		if now.Sub(f.at) > finalsKept || s.claims[key.claim] == nil {
			delete(s.finals, key)
		}
	}
}

// forgetFinalLocked forgets the applied final report of a job about to
// run again under the same claim. s.mu must be held.
func (s *Schedd) forgetFinalLocked(key finalKey) {
	f := s.finals[key]
	if f == nil {
		return
	}
	select {
	case <-f.done:
		delete(s.finals, key)
	default:
	}
}

// jobReport applies a starter's report on a job.
func (s *Schedd) jobReport(ctx context.Context, id jobqueue.JobID, r *wire.JobReport) error {
	c, back, lost, moved := s.reportedClaim(id, r)
	if c == nil {
		return fmt.Errorf("%w: no claim %s for job %s", wire.ErrNotFound, r.SlotName, r.JobID)
	}
	if !lost.IsZero() {
		back = s.nodeBack(ctx, c, id, lost)
	}
	s.startdTold(ctx, c, id)
	if moved != "" {
		s.startdMoved(ctx, c, moved)
	}
	if back {
		s.reconnected(ctx, c)
	}
	if r.Kind == wire.ReportUpdate {
		s.recordRunningUsage(ctx, id, r)
		return nil
	}
	if r.Kind == wire.ReportCheckpoint {
		return s.checkpointReport(ctx, c, id, r)
	}
	// The claim's lease holds while the report is applied: a job whose
	// output is being put in place is not requeued meanwhile.
	s.mu.Lock()
	c.committing++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		c.committing--
		s.mu.Unlock()
	}()
	ad, err := s.runningAd(ctx, c, id)
	if err != nil {
		return err
	}
	end := reportGone
	if ad != nil {
		if c.slot == nil {
			// A claim recovered after a restart: learn the slot from the job.
			c.slotName = firstNonEmpty(c.slotName, r.SlotName)
		}
		if end, err = s.applyReport(ctx, id, ad, r); err != nil {
			return err
		}
	}
	switch {
	case end == reportRequeued || r.ClaimClosed:
		// A requeued job's claim, or one its startd ended (another claim
		// preempted the slot), runs no other job.
		s.markDirty()
		s.releaseAsync(c)
	case end == reportGone:
		s.freeClaim(c, id)
	default:
		s.mu.Lock()
		delete(s.active, id)
		s.mu.Unlock()
		s.markDirty()
		s.reuseAsync(c)
	}
	return nil
}

// reportedClaim returns the claim a report is about, or nil when the
// schedd holds no such claim for the job. An update renews the lease of a
// job recovered after a restart. back says that the claim's node had
// been declared lost (its job disconnected) and is heard of again; moved
// is the startd's former address when the report names another one (its
// node's address changed: a worker whose relay gave it other ports), which
// the claim follows from now on. lost is when the sea declared the node
// of a running job's claim lost, if it did: the report may have been on
// its way as the node went, and says the node is back only if its startd
// answers (nodeBack).
func (s *Schedd) reportedClaim(id jobqueue.JobID, r *wire.JobReport) (c *claim, back bool, lost time.Time, moved string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c = s.claims[r.ClaimID]
	if c == nil || c.job != id {
		return nil, false, time.Time{}, ""
	}
	if old := c.addr(); r.Startd != "" && r.Startd != old {
		c.moved.Store(&r.Startd)
		moved = old
	}
	if !c.deadline.IsZero() && r.Kind != wire.ReportEvicted {
		// The starter of a job recovered after a restart reports: the
		// schedd is reconnected to the job, whose claim lease holds from
		// now on (recover.go). The starter of a job whose activation was
		// not answered reports: the startd took the job, which was never
		// disconnected (unanswered.go).
		back = c.pending == nil
		c.deadline, c.verified, c.contact, c.lost, c.pending = time.Time{}, true, s.now(), time.Time{}, nil
		return c, back, time.Time{}, moved
	}
	if !c.contact.IsZero() {
		c.contact = s.now()
		back, lost = c.unreachable, c.lost
		if lost.IsZero() {
			c.unreachable = false
		}
	}
	return c, back, lost, moved
}

// nodeBack reports whether the node of claim c, which the sea declared
// lost at lost, is back, now that a report of the claim's job id came:
// the report may have been sent just before the node's agent died, and
// handled after the sea's verdict. Only an answer from the startd takes
// the report as the node's return: nothing listening at its address says
// the agent is dead, and the claim stays lost, for its probe to requeue
// the job once its claim lease runs out (expireClaims); no answer (a
// connection the dead agent's end closed, a timeout) leaves the claim
// lost too, its job running on under its lease while reports come, until
// the startd answers a probe.
func (s *Schedd) nodeBack(ctx context.Context, c *claim, id jobqueue.JobID, lost time.Time) bool {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	_, err := s.peer(c.addr()).Startd().ClaimInfo(pctx,
		&wire.ClaimInfoRequest{ClaimID: c.id, Schedd: s.opts.Address, ScheddName: s.opts.Name})
	if err != nil {
		s.log.Info("a report of a job on a lost node came, but its startd does not answer: the report may have been sent as the node went", "job", id, "slot", c.slotName, "err", err)
		return false
	}
	s.mu.Lock()
	back := c.lost.Equal(lost)
	if back {
		c.lost, c.unreachable = time.Time{}, false
	}
	s.mu.Unlock()
	return back
}

// startdMoved records that the startd of a running job's claim moved
// from the address was: the job's PondStartd names the new one, so that a
// schedd restarted meanwhile finds the claim there.
func (s *Schedd) startdMoved(ctx context.Context, c *claim, was string) {
	s.log.Info("the startd of a running job moved; following it", "job", c.job, "slot", c.slotName, "address", c.addr(), "was", was)
	if err := s.q.SetAttrs(ctx, c.job, jobqueue.Ad{"PondStartd": strconv.Quote(c.addr())}); err != nil && !gone(err) {
		s.log.Warn("recording a running job's startd address", "job", c.job, "err", err)
	}
}

// runningAd returns the ad of the job a claim runs, or nil when the job
// no longer runs.
func (s *Schedd) runningAd(ctx context.Context, c *claim, id jobqueue.JobID) (*classad.Ad, error) {
	s.mu.Lock()
	ad := c.ad
	s.mu.Unlock()
	if ad != nil {
		return ad, nil
	}
	job, err := s.q.Get(ctx, id)
	if err != nil || job.Status != jobqueue.Running {
		return nil, nil
	}
	if ad, err = wire.ToClassAd(job.Ad); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return ad, nil
}

// freeClaim frees the claim of a job removed or held while it ran.
func (s *Schedd) freeClaim(c *claim, id jobqueue.JobID) {
	s.mu.Lock()
	if s.active[id] == c {
		delete(s.active, id)
	}
	s.mu.Unlock()
	s.reuseAsync(c)
}

// applyReport records in the queue and the job's event log what a report
// says of the job.
func (s *Schedd) applyReport(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, r *wire.JobReport) (reportEnd, error) {
	attrs := usageAttrs(r)
	// As HTCondor's, the job's wall-clock time on remote machines sums
	// every run: an evicted job's earlier runs count.
	if prev := ad.EvalNumber("RemoteWallClockTime", nil, 0); prev > 0 && r.Kind != wire.ReportUpdate {
		attrs["RemoteWallClockTime"] = strconv.FormatFloat(prev+r.WallClock, 'f', 3, 64)
	}
	s.commitOnEnd(r, ad, attrs)
	switch r.Kind {
	case wire.ReportExited:
		return s.exited(ctx, id, ad, r, attrs)
	case wire.ReportHold:
		if err := s.q.SetAttrs(ctx, id, attrs); gone(err) {
			return reportGone, nil
		} else if err != nil {
			s.log.Warn("recording usage", "job", id, "err", err)
		}
		s.hold(ctx, id, ad, r.HoldReason, r.HoldCode, r.HoldSubCode)
		return reportFinished, nil
	case wire.ReportEvicted:
		return s.evicted(ctx, id, ad, r, attrs)
	}
	return 0, fmt.Errorf("%w: unknown report kind %q", wire.ErrBadRequest, r.Kind)
}

// usageAttrs are the job attributes of the resource usage a report gives.
func usageAttrs(r *wire.JobReport) jobqueue.Ad {
	ad := runningUsage(r)
	ad["RemoteWallClockTime"] = strconv.FormatFloat(r.WallClock, 'f', 3, 64)
	return ad
}

// runningUsage are the job attributes of the resource usage a report
// gives, but the run's wall clock time, which a job's ad counts once the
// run ends: MemoryUsage is the peak of the job's cgroup when the starter
// reads one, else its resident set size, in MiB.
func runningUsage(r *wire.JobReport) jobqueue.Ad {
	mem := (r.ResidentKB + 1023) / 1024
	if r.MemoryUsageMB > 0 {
		mem = r.MemoryUsageMB
	}
	ad := jobqueue.Ad{
		"RemoteUserCpu":   strconv.FormatFloat(r.UserCPU, 'f', 3, 64),
		"RemoteSysCpu":    strconv.FormatFloat(r.SysCPU, 'f', 3, 64),
		"ImageSize":       strconv.FormatInt(max(r.ImageSizeKB, 1), 10),
		"ResidentSetSize": strconv.FormatInt(r.ResidentKB, 10),
		"MemoryUsage":     strconv.FormatInt(mem, 10),
	}
	if r.CpusUsage > 0 {
		ad["CpusUsage"] = strconv.FormatFloat(r.CpusUsage, 'f', 3, 64)
	}
	return ad
}

// recordRunningUsage records in the queue the usage a running job's
// update reports, when it reports any.
func (s *Schedd) recordRunningUsage(ctx context.Context, id jobqueue.JobID, r *wire.JobReport) {
	if r.ResidentKB <= 0 && r.MemoryUsageMB <= 0 {
		return
	}
	if err := s.q.SetAttrs(ctx, id, runningUsage(r)); err != nil && !gone(err) {
		s.log.Warn("recording a running job's usage", "job", id, "err", err)
	}
}

// requeuedEvent is the event of a job that ran to its end and that its
// OnExitRemove keeps in the queue to run again (max_retries), as
// HTCondor's shadow writes it: an eviction "terminated and requeued",
// with how the job ended and why it was kept.
func requeuedEvent(ad *classad.Ad, exitCode, signal int) joblog.Event {
	ev := joblog.Event{Type: joblog.Evicted, TerminatedAndRequeued: true, TerminatedNormally: signal == 0, ReturnValue: exitCode, Signal: signal}
	if e, ok := ad.Lookup("OnExitRemove"); ok {
		ev.Message = "The OnExitRemove expression '" + e.String() + "' evaluated to False"
	}
	return ev
}

func usageOf(r *wire.JobReport) joblog.Usage {
	return joblog.Usage{User: secs(r.UserCPU), Sys: secs(r.SysCPU)}
}

// exited completes a job that ran to its end: it stores the job's
// outputs and exit status, unless writing the outputs fails or
// OnExitHold holds the job.
func (s *Schedd) exited(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, r *wire.JobReport, attrs jobqueue.Ad) (reportEnd, error) {
	if err := s.commitOutputs(r, id); errors.Is(err, wire.ErrResend) {
		return 0, err
	} else if err != nil {
		s.hold(ctx, id, ad, "Error from shadow: "+err.Error(), 12, 2)
		return reportFinished, nil
	}
	s.mu.Lock()
	started, received := false, int64(0)
	if c := s.claims[r.ClaimID]; c != nil {
		started, received = c.outputStarted, c.inputBytes
	}
	s.mu.Unlock()
	// The end of the output transfer and the job's image size, in one
	// write.
	evs := make([]joblog.Event, 0, 3)
	if !started {
		evs = append(evs, joblog.Event{Type: joblog.FileTransfer, TransferKind: joblog.TransferOutputStarted})
	}
	evs = append(evs, joblog.Event{Type: joblog.FileTransfer, TransferKind: joblog.TransferOutputFinished},
		joblog.Event{Type: joblog.ImageSize, ImageSizeKB: max(r.ImageSizeKB, 1),
			MemoryUsageMB: max((r.ResidentKB+1023)/1024, r.MemoryUsageMB), ResidentSetSizeKB: r.ResidentKB})
	s.writeEvents(ctx, id, ad, evs...)
	attrs["ExitBySignal"] = strconv.FormatBool(r.Signal != 0)
	if r.Signal != 0 {
		attrs["ExitSignal"] = strconv.Itoa(r.Signal)
	} else {
		attrs["ExitCode"] = strconv.Itoa(r.ExitCode)
	}
	attrs["ExitStatus"] = strconv.Itoa(r.ExitCode)
	completions, _ := ad.EvalAttr("NumJobCompletions").IntValue()
	attrs["NumJobCompletions"] = strconv.FormatInt(completions+1, 10)
	if reason, sub, ok := onExitHold(ad, attrs); ok {
		// Held with how it exited, which periodic_release may read.
		s.holdWith(ctx, id, ad, reason, HoldCodeJobPolicy, sub, attrs)
		return reportFinished, nil
	}
	if _, ok := ad.Lookup("OnExitRemove"); ok && !holdExpr(ad, "OnExitRemove", attrs) {
		// The job's OnExitRemove (max_retries) keeps it: it goes back to
		// the queue to run again, as HTCondor requeues it.
		ev := requeuedEvent(ad, r.ExitCode, r.Signal)
		ev.RunRemote, ev.TotalRemote = usageOf(r), usageOf(r)
		if err := s.logged(ctx, ad, ev, func(ctx context.Context) error {
			return s.q.Transition(ctx, id, jobqueue.Idle, attrs)
		}); gone(err) {
			return reportGone, nil
		} else if err != nil {
			return 0, fmt.Errorf("requeueing job %s: %w", id, err)
		}
		s.log.Info("the job's OnExitRemove keeps it; requeued", "job", id, "exit_code", r.ExitCode, "signal", r.Signal,
			"completions", completions+1)
		s.mu.Lock()
		delete(s.active, id)
		s.mu.Unlock()
		s.addIdle(ctx, id)
		return reportRequeued, nil
	}
	var sent int64
	for _, f := range r.Outputs {
		sent += f.Size
	}
	usage := usageOf(r)
	// The termination event reaches the job's logs before the job leaves
	// the queue (complete, leave.go).
	if err := s.complete(ctx, id, ad, attrs, joblog.Event{Type: joblog.Terminated, TerminatedNormally: r.Signal == 0, ReturnValue: r.ExitCode,
		Signal: r.Signal, RunRemote: usage, TotalRemote: usage, SentBytes: sent, TotalSentBytes: sent,
		ReceivedBytes: received, TotalReceivedBytes: received}); gone(err) {
		return reportGone, nil
	} else if err != nil {
		return 0, fmt.Errorf("completing job %s: %w", id, err)
	}
	s.ckpt.remove(id)
	return reportFinished, nil
}

// evicted requeues a job stopped by its startd, unless it was held or
// removed while it ran: it was evicted because of that, and stays as it
// is rather than going back to the idle queue.
func (s *Schedd) evicted(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, r *wire.JobReport, attrs jobqueue.Ad) (reportEnd, error) {
	if j, err := s.q.Get(ctx, id); err == nil && j.Status != jobqueue.Running {
		if err := s.q.SetAttrs(ctx, id, attrs); err != nil && !gone(err) {
			s.log.Warn("recording usage", "job", id, "err", err)
		}
		s.mu.Lock()
		delete(s.active, id)
		s.mu.Unlock()
		return reportGone, nil
	}
	if r.Reason != "" {
		// Why the execute machine stopped the job, as HTCondor records it.
		attrs["VacateReason"] = strconv.Quote(r.Reason)
	}
	attrs["LastVacateTime"] = strconv.FormatInt(s.now().Unix(), 10)
	usage := usageOf(r)
	if err := s.logged(ctx, ad, joblog.Event{Type: joblog.Evicted, RunRemote: usage, TotalRemote: usage}, func(ctx context.Context) error {
		return s.q.Transition(ctx, id, jobqueue.Idle, attrs)
	}); gone(err) {
		return reportGone, nil
	} else if err != nil {
		return 0, fmt.Errorf("requeueing job %s: %w", id, err)
	}
	if r.Reason != "" {
		s.log.Info("the execute machine stopped a job; requeued", "job", id, "slot", r.SlotName, "reason", r.Reason)
	}
	s.mu.Lock()
	delete(s.active, id)
	s.mu.Unlock()
	s.addIdle(ctx, id)
	return reportRequeued, nil
}

// gone reports whether a queue error says the job is no longer running
// (removed or held meanwhile).
func gone(err error) bool {
	var te *jobqueue.TransitionError
	return errors.Is(err, jobqueue.ErrNotFound) || errors.As(err, &te)
}

// secs converts seconds to a duration.
func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// holdExpr evaluates the job's expression name with attrs set.
func holdExpr(ad *classad.Ad, name string, attrs jobqueue.Ad) bool {
	e, ok := ad.Lookup(name)
	if !ok {
		return false
	}
	if readsNothing(e) {
		return classad.EvalWith(e, ad, nil).IsTrue()
	}
	tmp := ad.Copy()
	for k, v := range attrs {
		_ = tmp.SetExpr(k, v)
	}
	return classad.EvalWith(e, tmp, nil).IsTrue()
}

// readsNothing says that e reads no attribute (a literal, as submit
// writes OnExitRemove, OnExitHold and LeaveJobInQueue by default): it
// is evaluated without the copy of the job's ad the attributes of its
// end are set in.
func readsNothing(e classad.Expr) bool {
	names, opaque := classad.AttrNames(e)
	return !opaque && len(names) == 0
}

// hold puts a job on hold and writes the event.
func (s *Schedd) hold(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, reason string, code, sub int) {
	s.holdWith(ctx, id, ad, reason, code, sub, nil)
}

// holdWith is hold, setting attrs too in the same transaction.
func (s *Schedd) holdWith(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, reason string, code, sub int, attrs jobqueue.Ad) {
	if err := s.logged(ctx, ad, joblog.Event{Type: joblog.Held, Message: reason, HoldCode: code, HoldSubCode: sub}, func(ctx context.Context) error {
		if len(attrs) > 0 {
			return s.q.HoldWith(ctx, id, reason, code, sub, attrs)
		}
		_, err := s.q.Hold(ctx, jobqueue.OneJob(id), reason, code, sub)
		return err
	}); err != nil {
		s.log.Warn("holding job", "job", id, "err", err)
		return
	}
	s.markDirty()
}
