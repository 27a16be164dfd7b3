package schedd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/internal/confine"
	"github.com/pond-htc/pond/condor/internal/retry"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// maxWaitingShadows bounds the matches a schedd holds for shadows
// waiting their turn to claim their slot and start their job, behind the
// 64 that do at once (sem). Each holds its slot's ad and a goroutine;
// past the bound a match's job stays idle for a later cycle, whose match
// is the fresher: a slot's ad in the collector ages while its match
// waits, and a match that waited long is more likely refused by its
// startd.
const maxWaitingShadows = 1024

// Matches takes the negotiator's matches and starts a shadow for each.
// Each idle job is taken once, whichever negotiator matched it first: a
// job runs once even when several pools could take it. The matches of a
// pool the schedd flocks to are taken for the jobs that may flock there,
// within its max_jobs, and those of a pool it no longer flocks to are
// dropped. Once maxWaitingShadows shadows wait for their turn to start
// their job, the remaining matches are left: their jobs stay idle for the
// next cycle.
func (s *Schedd) Matches(ctx context.Context, req *wire.MatchesRequest) (struct{}, error) {
	deferred := 0
	defer func() {
		if deferred > 0 {
			s.metrics.deferred(deferred)
			s.log.Debug("matches left for a later cycle: shadows are waiting", "matches", deferred, "waiting", maxWaitingShadows)
		}
	}()
	for _, m := range req.Matches {
		id, err := parseJobID(m.JobID)
		if err != nil {
			return struct{}{}, err
		}
		s.mu.Lock()
		ij := s.idle.get(id)
		stopped := s.stopped
		t, flocked, refused := s.flockPeer(ctx, req.Negotiator)
		if ij != nil && flocked {
			idle, _ := s.flockParams()
			if !s.jobFlocks(ij, t, s.now(), idle) || s.roomIn(t) == 0 {
				ij = nil
			}
		}
		if refused || ij != nil && !stopped && !s.admitLocked(len(s.active)) {
			ij = nil
		}
		static := !partitionable(m.Slot)
		if ij != nil && static && (s.claiming[m.ClaimID] || s.claims[m.ClaimID] != nil) {
			// A static slot this schedd is claiming, or holds, matched
			// again: its ad in the collector predates the claim (the
			// startd's update is on its way). The startd would refuse
			// the claim; the job stays idle for the next cycle rather
			// than wait for that refusal behind the other shadows.
			s.log.Debug("a static slot matched again while claimed; the job stays idle", "slot", m.SlotName, "job", id)
			ij = nil
		}
		if ij != nil && !stopped && s.starting >= cap(s.sem)+maxWaitingShadows {
			deferred++
			ij = nil
		}
		if ij != nil && !stopped {
			s.starting++
			s.idle.delete(id)
			s.active[id] = &claim{startd: m.Startd, slotName: m.SlotName, job: id, busy: true, pool: t.Pool}
			if static {
				s.claiming[m.ClaimID] = true
			}
		}
		s.mu.Unlock()
		if ij == nil || stopped {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.shadow(id, ij, m)
		}()
	}
	return struct{}{}, nil
}

// partitionable says whether a match's slot ad is a partitionable slot's,
// whose one claim id is matched to a job for each dynamic slot carved of
// it.
func partitionable(slot wire.Ad) bool {
	v, ok := slot["PartitionableSlot"]
	return ok && strings.EqualFold(strings.TrimSpace(v), "true")
}

// shadow reads the matched job's ad from the queue, claims the matched
// slot and runs the job on it. A job whose own ad does not match the slot
// (its autocluster was matched for it) waits for the next cycle.
func (s *Schedd) shadow(id jobqueue.JobID, ij *idleJob, m wire.Match) {
	// The match's claim id is being claimed until the shadow holds the
	// claim (below), or gives it up.
	held := false
	defer func() {
		if !held {
			s.mu.Lock()
			delete(s.claiming, m.ClaimID)
			s.mu.Unlock()
		}
	}()
	s.sem <- struct{}{}
	defer func() {
		<-s.sem
		s.mu.Lock()
		s.starting--
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ja, err := s.loadJob(ctx, id)
	if err != nil {
		// Removed or held since it was matched.
		s.log.Debug("reading matched job", "job", id, "err", err)
		s.mu.Lock()
		delete(s.active, id)
		s.mu.Unlock()
		return
	}
	backToIdle := func() {
		s.mu.Lock()
		delete(s.active, id)
		s.idle.put(id, s.idleEntry(ij.owner, ij.since, ja))
		s.mu.Unlock()
		s.reschedule()
	}
	if m.Slot != nil {
		if slot, err := wire.ToClassAd(m.Slot); err == nil && !classad.Match(ja.ad, slot) {
			s.log.Debug("matched job does not match its slot", "slot", m.SlotName, "job", id)
			backToIdle()
			return
		}
	}
	cctx, ccancel := claimContext(ctx, m)
	resp, err := s.peer(m.Startd).Startd().Claim(cctx,
		&wire.ClaimRequest{ClaimID: m.ClaimID, Job: ja.w, Schedd: s.opts.Address, ScheddName: s.opts.Name, Epoch: m.Epoch,
			Preempts: m.Preempts})
	ccancel()
	if m.Preempt {
		// The claim waited for the preempted job: the start gets its
		// own time.
		var cancel2 context.CancelFunc
		ctx, cancel2 = context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel2()
	}
	if err != nil {
		s.log.Debug("claiming slot", "slot", m.SlotName, "job", id, "err", err)
		backToIdle()
		return
	}
	slot, err := wire.ToClassAd(resp.Slot)
	if err != nil {
		slot = classad.NewAd()
	}
	s.mu.Lock()
	pool, lost := "", time.Time{}
	if a := s.active[id]; a != nil {
		// The sea may have lost the node while its startd's grant was
		// on its way (NodeLost): the claim is on a lost node.
		pool, lost = a.pool, a.lost
	}
	s.mu.Unlock()
	c := &claim{id: resp.ClaimID, startd: m.Startd, slotName: firstNonEmpty(strings.Trim(resp.Slot["Name"], `"`), m.SlotName), slot: slot, job: id, busy: true,
		pool: pool, lost: lost}
	s.mu.Lock()
	s.claims[c.id] = c
	s.active[id] = c
	// Held from here under its claim id, a static slot's own.
	delete(s.claiming, m.ClaimID)
	held = true
	s.mu.Unlock()
	s.run(ctx, c, id, ja)
}

// run sends claim c the input files of job id and activates it.
func (s *Schedd) run(ctx context.Context, c *claim, id jobqueue.JobID, ij *ownAd) {
	acct, err := s.jobAccount(ij.ad)
	var in *inputSet
	if err == nil {
		in, err = inputFiles(ij.ad, acct, s.asUser)
	}
	if err != nil {
		s.hold(ctx, id, ij.ad, "Error from shadow: "+err.Error(), 13, 2)
		s.reuse(c)
		return
	}
	defer in.Close()
	s.ckptInputs(id, in)
	attrs := jobqueue.Ad{"RemoteHost": strconv.Quote(c.slotName), "PondClaimId": strconv.Quote(c.id),
		"PondStartd": strconv.Quote(c.addr()), "LastRemoteHost": strconv.Quote(c.slotName)}
	flockAttrs(c, ij.ad, attrs)
	x, err := s.startRunning(ctx, c, id, ij.ad, attrs)
	if err != nil {
		// Removed or held in the meantime.
		s.log.Debug("starting job", "job", id, "err", err)
		s.reuse(c)
		return
	}
	s.metrics.started()
	s.mu.Lock()
	c.ad = ij.ad
	c.lease = s.jobLease(ij.w)
	s.mu.Unlock()
	s.markDirty()
	// The transfer takes as long as it makes progress (xfer.Send gives
	// up on a stalled one), not the shadow's 60 s.
	tctx, stop := context.WithCancel(s.done)
	s.mu.Lock()
	c.stopInputs = stop
	s.mu.Unlock()
	inputs, hold, err := s.sendInputs(tctx, c, id, ij.ad, in)
	s.mu.Lock()
	c.stopInputs = nil
	c.inputBytes = 0
	for _, f := range inputs {
		c.inputBytes += f.Size
	}
	s.mu.Unlock()
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err == nil {
		// The job's Execute event waits for the startd to accept it: an
		// activation refused leaves no trace of a start in the job log,
		// only the shadow exception of its requeue.
		s.mu.Lock()
		c.execute = x
		s.mu.Unlock()
		req := &wire.ActivateRequest{ClaimID: c.id, JobID: id.String(), Job: s.withJobLease(ij.w), Inputs: inputs}
		err = s.peer(c.addr()).Startd().Activate(ctx, req)
		// An activation that never went out whole (a pooled connection
		// the startd had closed, a handshake that failed) is sent again,
		// on another connection: the startd did not take it.
		for try := 0; try < 2 && errors.Is(err, wire.ErrNotSent) && !refused(err) && ctx.Err() == nil; try++ {
			s.log.Debug("an activation did not go out; sending it again", "job", id, "slot", c.slotName, "err", err)
			err = s.peer(c.addr()).Startd().Activate(ctx, req)
		}
		if err == nil {
			s.logExecute(ctx, x)
		} else if unanswered(err) {
			// The startd may have taken the job: it is asked, not
			// given the job again elsewhere meanwhile.
			s.awaitActivation(c, id, ij, err)
			return
		}
	}
	if err != nil {
		// The job did not start: its Execute event is not written.
		s.dropExecute(x)
		// An activation that took all of ctx (a partition: no answer)
		// leaves none for what follows: the job is requeued or held
		// with a context of its own, never left Running.
		fctx, fcancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer fcancel()
		if hold {
			s.hold(fctx, id, ij.ad, "Error from shadow: "+err.Error(), 13, 2)
			s.reuse(c)
			return
		}
		s.activationFailed(fctx, c, id, ij, err)
		return
	}
	// The claim's lease runs from here: the startd started its own when
	// it took the job, earlier. A node the sea lost while the job was
	// being activated has the job disconnected now (NodeLost). A job that
	// ended before its activation's answer came has its claim on its
	// next job, or released: that job's lease runs from its own
	// activation.
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	s.mu.Lock()
	lost := false
	if s.claims[c.id] == c && c.job == id {
		c.contact = s.now()
		lost = !c.lost.IsZero()
	}
	vacated := c.vacated == id
	s.mu.Unlock()
	if vacated {
		// Removed or held while its activation was on its way: the
		// vacate may have come to the startd first, and found nothing
		// to stop.
		s.log.Info("a job removed or held while it was being activated is stopped", "job", id, "slot", c.slotName)
		s.vacateJob(c, id)
		return
	}
	if lost {
		s.log.Info("the node of a job was gone before its activation returned; the job is requeued when its agent is known dead, or after its job lease",
			"job", c.job, "node", slotNode(c.slotName), "job_lease", c.lease)
		s.disconnected(ctx, c, "The execute node "+slotNode(c.slotName)+" failed or left the sea")
	}
}

// startRunning marks job id, whose ad is ad, Running on claim c with
// attrs. Its Execute event is stored in the outbox with the change and
// written once the startd accepts the job (logExecute): a schedd killed
// in between writes it as it starts again (replayExecute).
func (s *Schedd) startRunning(ctx context.Context, c *claim, id jobqueue.JobID, ad *classad.Ad, attrs jobqueue.Ad) (*executeLog, error) {
	x := &executeLog{job: id, ad: ad, seq: -1,
		ev: joblog.Event{Type: joblog.Execute, Host: "<" + c.addr() + ">", SlotName: c.slotName, Time: s.now()}}
	ob := s.eventOutbox(x.ev)
	if err := s.q.Transition(jobqueue.WithOutbox(ctx, ob), id, jobqueue.Running, attrs); err != nil {
		return nil, err
	}
	if len(ob.Entries) == 1 {
		x.seq = ob.Entries[0].Seq
	}
	return x, nil
}

// executeLog is a job's Execute event, written once: when its startd
// accepted its activation, or when the startd first tells of the job
// (a report, its output), whichever comes first. A short job can end, and
// its final report arrive, before the activation's answer: its events
// stay in order, the Execute event first.
type executeLog struct {
	job  jobqueue.JobID
	ad   *classad.Ad
	ev   joblog.Event
	seq  int64 // the event's outbox record; -1 if none
	once sync.Once
}

// logExecute writes x's event unless it was written; a caller
// that comes while another writes it waits for it.
func (s *Schedd) logExecute(ctx context.Context, x *executeLog) {
	x.once.Do(func() {
		s.writeEvent(ctx, x.job, x.ad, x.ev)
		s.forgetRecord(x.seq)
	})
}

// dropExecute drops the outbox record of x's event, of a job whose
// activation failed: a schedd that stops now does not write the event as
// it starts again. The startd may still tell of the job (an activation
// whose answer was lost), and the event be written then.
func (s *Schedd) dropExecute(x *executeLog) {
	s.forgetRecord(x.seq)
}

// forgetRecord drops outbox record seq (none if negative) with the
// queue's next commit that drops records: an Execute event's, written or
// given up. Should the schedd stop first, replayExecute tells the one
// written from the one to write.
func (s *Schedd) forgetRecord(seq int64) {
	if seq >= 0 {
		s.q.DeliveredLater(seq)
	}
}

// startdTold writes the Execute event of job id on claim c, unless it was
// written, before the events of what the claim's startd tells of the
// job: that it tells of it says it accepted the job, whether or not the
// activation's answer has arrived.
func (s *Schedd) startdTold(ctx context.Context, c *claim, id jobqueue.JobID) {
	s.mu.Lock()
	x := c.execute
	s.mu.Unlock()
	if x != nil && x.job == id {
		s.logExecute(ctx, x)
	}
}

// activationFailed requeues a job whose claim could not be activated or
// whose input files could not be sent to it. A startd that refused the
// job or its files (it drains, retires before its end time, is
// quarantined, or no longer knows the claim) says nothing of the job: the
// job goes back to the queue as it was. Any other failure is a shadow
// exception, counted in the job's NumShadowExceptions; a job whose shadow
// failed more than MAX_SHADOW_EXCEPTIONS times is held.
func (s *Schedd) activationFailed(ctx context.Context, c *claim, id jobqueue.JobID, ij *ownAd, err error) {
	s.finishClaim(c)
	defer s.release(c)
	var we *wire.Error
	if errors.As(err, &we) && (we.Status == http.StatusConflict || we.Status == http.StatusNotFound) {
		s.log.Info("the startd refused the job", "slot", c.slotName, "job", id, "err", err)
		if terr := s.untilStored(ctx, "requeueing a job whose activation was refused", id, func(ctx context.Context) error {
			if _, err := s.stillRunning(ctx, id); err != nil {
				return err
			}
			return s.logged(ctx, ij.ad, joblog.Event{Type: joblog.ShadowException,
				Message: "Request to run on " + c.slotName + " <" + c.addr() + "> was REFUSED: " + we.Msg}, func(ctx context.Context) error {
				return s.q.Transition(ctx, id, jobqueue.Idle, nil)
			})
		}); terr == nil {
			s.fileRequeued(ctx, id)
		}
		return
	}
	if reason, code, ok := credentialHold(c.slotName, err); ok {
		// Not the job's failure, nor the shadow's: the job waits, held,
		// for the credential to be renewed, as Condor-G holds a job
		// whose proxy expired, and is released then.
		s.log.Warn("the startd refused the schedd's credential: holding the job", "slot", c.slotName, "job", id, "err", err)
		if terr := s.untilStored(ctx, "requeueing a job whose credential was refused", id, func(ctx context.Context) error {
			if _, err := s.stillRunning(ctx, id); err != nil {
				return err
			}
			return s.q.Transition(ctx, id, jobqueue.Idle, nil)
		}); terr != nil {
			return // removed or held meanwhile, or the schedd stops
		}
		s.hold(ctx, id, ij.ad, reason, code, 0)
		return
	}
	if s.done.Err() != nil {
		// The schedd stops (its input transfers with it): not the job's
		// failure, nor the shadow's.
		if terr := s.q.Transition(ctx, id, jobqueue.Idle, nil); terr == nil {
			s.addIdle(ctx, id)
		}
		return
	}
	s.log.Warn("activating claim", "slot", c.slotName, "job", id, "err", err)
	var n int
	if terr := s.untilStored(ctx, "requeueing a job whose activation failed", id, func(ctx context.Context) error {
		j, gerr := s.stillRunning(ctx, id)
		if gerr != nil {
			return gerr
		}
		n, _ = strconv.Atoi(j.Ad["NumShadowExceptions"])
		n++
		return s.logged(ctx, ij.ad, joblog.Event{Type: joblog.ShadowException, Message: "Can no longer talk to condor_starter: " + err.Error()}, func(ctx context.Context) error {
			return s.q.Transition(ctx, id, jobqueue.Idle, jobqueue.Ad{"NumShadowExceptions": strconv.Itoa(n)})
		})
	}); terr != nil {
		return
	}
	if n > s.maxExceptions {
		reason := fmt.Sprintf("The job's shadow failed %d times, more than MAX_SHADOW_EXCEPTIONS (%d); the last: %v", n, s.maxExceptions, err)
		if herr := s.logged(ctx, ij.ad, joblog.Event{Type: joblog.Held, Message: reason, HoldCode: holdCodeShadowExceptions}, func(ctx context.Context) error {
			_, err := s.q.Hold(ctx, jobqueue.OneJob(id), reason, holdCodeShadowExceptions, 0)
			return err
		}); herr == nil {
			s.markDirty()
			return
		}
	}
	s.fileRequeued(ctx, id)
}

// untilStored makes change, the requeue of a job whose start failed, with
// ctx and then, while it fails for another reason than the job's being
// gone (removed, held or no longer Running: gone), again with a minute of
// its own each time, waiting about 1 s, then twice as long up to 30 s
// (retry.Backoff), until it is stored or the schedd stops. A job whose
// requeue failed once (its transaction waited a minute for the queue's
// database, busy with a mass removal of thousands of jobs) used to stay
// Running without a claim until the schedd restarted.
func (s *Schedd) untilStored(ctx context.Context, what string, id jobqueue.JobID, change func(context.Context) error) error {
	err := change(ctx)
	backoff := retry.New(time.Second, 30*time.Second)
	for err != nil && !gone(err) && s.done.Err() == nil {
		wait := backoff.Failed()
		s.log.Warn(what+"; trying again", "job", id, "in", wait.Round(time.Millisecond), "err", err)
		select {
		case <-s.done.Done():
			return err
		case <-time.After(wait):
		}
		actx, cancel := context.WithTimeout(s.done, time.Minute)
		err = change(actx)
		cancel()
	}
	if err != nil && !gone(err) {
		s.log.Warn(what+": the schedd stops; its restart recovers the job", "job", id, "err", err)
	}
	return err
}

// fileRequeued files job id, requeued, among the idle jobs offered to
// the negotiator, reading it as untilStored stores: a job requeued but
// not filed would wait, Idle, for the schedd's restart.
func (s *Schedd) fileRequeued(ctx context.Context, id jobqueue.JobID) {
	_ = s.untilStored(ctx, "filing a requeued job", id, func(ctx context.Context) error {
		j, err := s.q.Get(ctx, id)
		if err != nil {
			return err
		}
		if j.Status != jobqueue.Idle {
			return &jobqueue.TransitionError{ID: id, From: j.Status, To: jobqueue.Idle} // held or removed meanwhile
		}
		ja, err := s.parseJob(j)
		if err != nil {
			s.log.Warn("filing a requeued job", "job", id, "err", err)
			return nil
		}
		s.addIdleJob(ctx, j, ja)
		return nil
	})
}

// stillRunning reads job id, and fails with a TransitionError (gone) when
// it is no longer Running: removed or held meanwhile, it is not requeued.
func (s *Schedd) stillRunning(ctx context.Context, id jobqueue.JobID) (jobqueue.Job, error) {
	j, err := s.q.Get(ctx, id)
	if err == nil && j.Status != jobqueue.Running {
		err = &jobqueue.TransitionError{ID: id, From: j.Status, To: jobqueue.Idle}
	}
	return j, err
}

// HTCondor's HoldReasonCode values of a job held for its credentials:
// CorruptedCredential and ExpiredCredential.
const (
	holdCodeCorruptedCredential = 4
	holdCodeExpiredCredential   = 8
)

// credentialHold reports whether err, from activating a claim on the
// startd of slot, is the startd's refusal of the schedd's credential (HTTP
// 401: its token expired, was revoked or is not the pool's), with the
// job's HoldReason and HoldReasonCode naming it: ExpiredCredential for a
// token past its expiry, CorruptedCredential otherwise.
func credentialHold(slot string, err error) (reason string, code int, ok bool) {
	var we *wire.Error
	if !errors.As(err, &we) || we.Status != http.StatusUnauthorized {
		return "", 0, false
	}
	code = holdCodeCorruptedCredential
	if strings.Contains(we.Msg, auth.ErrExpired.Error()) {
		code = holdCodeExpiredCredential
	}
	return "The startd of " + slot + " refused the schedd's token (" + we.Msg + "): renew the submit node's token " +
		"(pondctl apply renews a local node's; see docs/security.md), then release the job (condor release)", code, true
}

// holdCodeShadowExceptions is the HoldReasonCode of a job held for too
// many shadow exceptions or lost nodes: HTCondor's JobPolicy, the code of
// a hold by the job's or the pool's policy.
const holdCodeShadowExceptions = 3

// inputFiles finds the files a job transfers in: its executable (unless
// transfer_executable is false), its stdin and transfer_input_files, and
// opens each once to check it can be read; each is opened again when it
// is sent. It opens them with the rights of acct (the job's owner, see
// jobAccount), or the schedd's own when acct is nil; with an acct it
// opens the job's Iwd first, so that a job whose owner cannot read its
// Iwd (or that has none) is refused before it runs. A relative name stays
// inside the Iwd: a name with "..", or a symbolic link on the way that
// leads out of it, is refused. An absolute name is read as it is.
// Directories and special files are refused either way.
func inputFiles(job *classad.Ad, acct *asuser.Account, threads *asuser.Threads) (*inputSet, error) {
	in := &inputSet{}
	err := threads.Do(acct, func() error {
		iwd, _ := job.EvalAttr("Iwd").StringValue()
		openIwd := func() error {
			if in.root != nil {
				return nil
			}
			if iwd == "" && acct != nil {
				return errors.New("the job has no Iwd (initial directory) to find its files in")
			}
			var err error
			if in.root, err = os.OpenRoot(firstNonEmpty(iwd, ".")); err != nil {
				return fmt.Errorf("opening the job's initial directory%s: %w", as(acct), err)
			}
			return nil
		}
		if acct != nil {
			// Whatever the job's files, its owner must be able to open
			// its initial directory.
			if err := openIwd(); err != nil {
				return err
			}
		}
		add := func(p, name, what string) error {
			var open func() (*os.File, error)
			if filepath.IsAbs(p) {
				open = func() (*os.File, error) { return confine.OpenPath(p) }
			} else {
				rel, err := confine.Local(iwd, p)
				if err != nil {
					return fmt.Errorf("%s%s: %w", what, as(acct), err)
				}
				if err := openIwd(); err != nil {
					return err
				}
				open = func() (*os.File, error) { return confine.Open(in.root, rel) }
			}
			f, err := open()
			if err != nil {
				return fmt.Errorf("%s%s: %w", what, as(acct), err)
			}
			f.Close()
			in.files = append(in.files, inputSource{name: name, what: what + as(acct), open: func() (*os.File, error) {
				var f *os.File
				err := threads.Do(acct, func() error {
					var err error
					f, err = open()
					return err
				})
				return f, err
			}})
			return nil
		}
		if te, ok := job.EvalAttr("TransferExecutable").BoolValue(); !ok || te {
			cmd, _ := job.EvalAttr("Cmd").StringValue()
			if err := add(cmd, "condor_exec.exe", "reading executable"); err != nil {
				return err
			}
		}
		if stdin, _ := job.EvalAttr("In").StringValue(); stdin != "" && stdin != "/dev/null" {
			if err := add(stdin, filepath.Base(stdin), "reading input"); err != nil {
				return err
			}
		}
		if list, ok := job.EvalAttr("TransferInput").StringValue(); ok {
			for _, f := range config.SplitFileList(list) {
				if err := add(f, filepath.Base(f), "transfer input file "+f); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

// as is " as USER" for messages about what was done with acct's rights.
func as(acct *asuser.Account) string {
	if acct == nil {
		return ""
	}
	return " as " + acct.Name
}

// jobAccount returns the local account whose rights the schedd reads and
// writes a job's files with (its input files, Iwd, output, error and event
// log): the job's Owner's when the schedd runs as root. A schedd that does
// not run as root can act only as itself, and jobAccount returns nil. An
// Owner with no local account is refused with an error that names it.
func (s *Schedd) jobAccount(ad *classad.Ad) (*asuser.Account, error) {
	if !s.asRoot {
		return nil, nil
	}
	owner, _ := ad.EvalAttr("Owner").StringValue()
	acct, err := s.accounts.Lookup(owner)
	switch {
	case errors.Is(err, asuser.ErrNoAccount):
		return nil, fmt.Errorf("the job's owner %q has no account on this machine, and the schedd runs as root: it reads and writes a job's files only with its owner's rights", owner)
	case err != nil:
		return nil, err
	case acct != nil && acct.UID == 0:
		return nil, nil // root's rights are the schedd's
	}
	return acct, nil
}
