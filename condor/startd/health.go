package startd

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// Knobs of a worker's health and of its end, read from the node's
// configuration when the startd starts and at each reconfiguration.
const (
	// KnobBlackholeFailures is how many jobs in a row the machine must
	// fail to start through its own fault before it is quarantined as a
	// black hole; 0 turns the check off.
	KnobBlackholeFailures = "POND_BLACKHOLE_FAILURES"
	// KnobQuarantineTime is how long a quarantine lasts unless an
	// administrator lifts it first.
	KnobQuarantineTime = "POND_QUARANTINE_TIME"
	// KnobEndTime is when the machine goes away (unix seconds), such as a
	// glidein's end or a cloud lease's; 0 or nothing for none.
	KnobEndTime = "POND_END_TIME"
	// KnobEndGrace is how long before POND_END_TIME the machine stops
	// taking jobs.
	KnobEndGrace = "POND_END_GRACE"
)

// Defaults of the knobs of a worker's health and end.
const (
	DefaultBlackholeFailures = 5
	DefaultQuarantineTime    = 30 * time.Minute
	DefaultEndGrace          = 5 * time.Minute
)

// pondStart is what the startd adds to its START policy in the ads it
// advertises: a quarantined machine matches no job, and a machine with an
// end time (PondEndTime) none once it retires (PondEndGrace before its end)
// nor one whose declared runtime (AllowedJobDuration, else
// AllowedExecuteDuration, else MaxJobRetirementTime) would not end
// before it. The startd checks the same when it grants a claim or starts
// a job (refusal).
const pondStart = `MY.PondQuarantined =!= true && (MY.PondEndTime =?= undefined || ` +
	`(time() < MY.PondEndTime - (MY.PondEndGrace ?: 0) && ` +
	`time() + (TARGET.AllowedJobDuration ?: TARGET.AllowedExecuteDuration ?: TARGET.MaxJobRetirementTime ?: 0) <= MY.PondEndTime))`

// healthInterval is how often the startd looks whether a quarantine is
// over and how near its end time is.
const healthInterval = 500 * time.Millisecond

// health is what the startd reads of its health and end knobs.
type health struct {
	failures   int           // POND_BLACKHOLE_FAILURES
	quarantine time.Duration // POND_QUARANTINE_TIME
	end        time.Time     // POND_END_TIME; zero for none
	grace      time.Duration // POND_END_GRACE
	maxJobs    int           // POND_MAX_JOBS; 0 for no limit
}

// readHealth reads the health and end knobs of cfg, refusing bad values
// with an error that names the knob.
func readHealth(cfg *config.Config) (health, error) {
	h := health{}
	var err error
	if h.failures, err = cfg.Int(KnobBlackholeFailures, DefaultBlackholeFailures); err != nil {
		return h, err
	}
	if h.failures < 0 {
		return h, fmt.Errorf("%s: %d is negative (0 turns the check off)", KnobBlackholeFailures, h.failures)
	}
	if h.quarantine, err = cfg.Duration(KnobQuarantineTime, DefaultQuarantineTime); err != nil {
		return h, err
	}
	if h.grace, err = cfg.Duration(KnobEndGrace, DefaultEndGrace); err != nil {
		return h, err
	}
	for knob, d := range map[string]time.Duration{KnobQuarantineTime: h.quarantine, KnobEndGrace: h.grace} {
		if d < 0 {
			return h, fmt.Errorf("%s: %v is negative", knob, d)
		}
	}
	if h.maxJobs, err = cfg.Int(KnobMaxJobs, 0); err != nil {
		return h, err
	}
	if h.maxJobs < 0 {
		return h, fmt.Errorf("%s: %d is negative (0 is no limit)", KnobMaxJobs, h.maxJobs)
	}
	end, err := cfg.Int(KnobEndTime, 0)
	if err != nil {
		return h, err
	}
	if end < 0 {
		return h, fmt.Errorf("%s: %d is not a time (unix seconds)", KnobEndTime, end)
	}
	if end > 0 {
		h.end = time.Unix(int64(end), 0)
	}
	return h, nil
}

// Quarantine says why and until when a machine that could not start jobs
// again and again through its own fault (a black hole: a full disk, a
// broken execute directory) takes no jobs.
type Quarantine struct {
	// Reason says why, for people.
	Reason string `json:"reason"`
	// Since is when the quarantine began.
	Since time.Time `json:"since"`
	// Until is when it lifts by itself.
	Until time.Time `json:"until"`
}

// Quarantined returns the machine's quarantine, or nil when it takes jobs.
func (s *Startd) Quarantined() *Quarantine {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quarantine == nil {
		return nil
	}
	q := *s.quarantine
	return &q
}

// Lift ends the machine's quarantine, as an administrator may; it reports
// whether there was one. The count of failed jobs starts again from zero.
func (s *Startd) Lift(why string) bool {
	s.mu.Lock()
	q := s.quarantine
	s.quarantine, s.streak = nil, 0
	s.mu.Unlock()
	if q == nil {
		return false
	}
	s.log.Warn("quarantine lifted; the machine takes jobs again", "why", why)
	s.quarantineChanged()
	return true
}

// QuarantineCall answers a wire.QuarantineRequest: the machine's
// quarantine, lifted first when the request asks.
func (s *Startd) QuarantineCall(ctx context.Context, req *wire.QuarantineRequest) (*wire.QuarantineResponse, error) {
	resp := &wire.QuarantineResponse{Machine: s.opts.Name}
	if req.Lift {
		resp.Lifted = s.Lift(firstNonEmpty(req.Why, "lifted by an administrator"))
	}
	if q := s.Quarantined(); q != nil {
		resp.Quarantined, resp.Reason, resp.Since, resp.Until = true, q.Reason, q.Since, q.Until
	}
	resp.EndTime = s.EndTime()
	return resp, nil
}

// EndTime returns when the machine goes away (POND_END_TIME), zero when
// it does not know.
func (s *Startd) EndTime() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health.end
}

// quarantineChanged advertises the slots again and tells the
// OnQuarantine hook.
func (s *Startd) quarantineChanged() {
	s.markDirty()
	if s.opts.OnQuarantine != nil {
		s.opts.OnQuarantine(s.Quarantined())
	}
}

// outcome is what a job's end says of the machine's health.
type outcome int

const (
	neutral   outcome = iota // says nothing (evicted, held, the job's own fault)
	healthy                  // the machine started the job and it ran to its end
	nodeFault                // the machine could not start the job: its own fault
)

// judge says what a job's report tells of the machine, with a few words
// on a fault of the machine. Only the machine's own faults count against
// it: a job the starter could not start because of the machine (its
// scratch directory or input files could not be written, its executable
// could not be exec'd from the execute directory), which goes back to the
// queue (startFailed with an eviction). A job that ran to its end says the
// machine works, whatever its exit code or the signal that killed it: a
// non-zero exit, a SIGSEGV, are the job's, and the user sees them in the
// job's own exit status. A job held at its start (no such executable, bad
// arguments) is the job's fault, and a vacated one says nothing.
func (h health) judge(r *wire.JobReport, startFailed bool) (outcome, string) {
	switch {
	case startFailed && r.Kind == wire.ReportEvicted:
		return nodeFault, fmt.Sprintf("job %s could not start: %s", r.JobID, firstNonEmpty(r.Reason, r.HoldReason))
	case startFailed:
		return neutral, ""
	case r.Kind == wire.ReportExited:
		return healthy, ""
	}
	return neutral, ""
}

// noteOutcomeLocked counts a job's end towards the machine's health and
// quarantines the machine when POND_BLACKHOLE_FAILURES jobs in a row
// could not start through its own fault. s.mu must be held; it reports
// whether the machine was just quarantined.
func (s *Startd) noteOutcomeLocked(r *wire.JobReport, startFailed bool) bool {
	o, what := s.health.judge(r, startFailed)
	switch o {
	case healthy:
		s.streak = 0
		return false
	case neutral:
		return false
	}
	s.streak++
	if s.health.failures == 0 || s.streak < s.health.failures || s.quarantine != nil {
		return false
	}
	now := s.now()
	s.quarantine = &Quarantine{
		Reason: fmt.Sprintf("%d jobs in a row could not start through a fault of the machine; the last: %s", s.streak, what),
		Since:  now, Until: now.Add(s.health.quarantine),
	}
	s.log.Warn("quarantining the machine: it cannot start jobs", "reason", s.quarantine.Reason, "until", s.quarantine.Until.Format(time.RFC3339))
	// No claim of a quarantined machine runs another job: idle claims
	// go back now, the others once their job's report is sent.
	for _, sl := range s.claims {
		switch {
		case sl.partitionable || sl.state != "Claimed":
		case sl.run != nil || sl.reporting:
			sl.retire = true
		default:
			s.releaseLocked(sl)
		}
	}
	return true
}

// refusalLocked says why the machine takes no job now, or job in
// particular (nil for none): it is quarantined, or it retires before its
// end time, or the job's declared runtime would not end before it. s.mu
// must be held.
func (s *Startd) refusalLocked(job *classad.Ad) error {
	if q := s.quarantine; q != nil {
		return fmt.Errorf("%w: the machine is quarantined until %s: %s", wire.ErrConflict, q.Until.UTC().Format(time.RFC3339), q.Reason)
	}
	if s.spentLocked() {
		return s.spentError()
	}
	end := s.health.end
	if end.IsZero() {
		return nil
	}
	now := s.now()
	if !now.Before(end.Add(-s.health.grace)) {
		return fmt.Errorf("%w: the machine retires: it ends at %s (PondEndTime) and takes no job within %v of it",
			wire.ErrConflict, end.UTC().Format(time.RFC3339), s.health.grace)
	}
	if job == nil {
		return nil
	}
	if d, attr := declaredRuntime(job); d > 0 && now.Add(d).After(end) {
		return fmt.Errorf("%w: the job's %s of %v would not end before the machine's end at %s (PondEndTime), %v from now",
			wire.ErrConflict, attr, d, end.UTC().Format(time.RFC3339), end.Sub(now).Round(time.Second))
	}
	return nil
}

// declaredRuntime is the longest a job says it runs, and the attribute
// that says it: AllowedJobDuration (allowed_job_duration), else
// AllowedExecuteDuration, else MaxJobRetirementTime; zero when it says
// nothing.
func declaredRuntime(job *classad.Ad) (time.Duration, string) {
	for _, attr := range []string{"AllowedJobDuration", "AllowedExecuteDuration", "MaxJobRetirementTime"} {
		if f, ok := job.EvalAttr(attr).NumberValue(); ok {
			return time.Duration(f * float64(time.Second)), attr
		}
	}
	return 0, ""
}

// retiringLocked reports whether the machine takes no new job because its
// end is near. s.mu must be held.
func (s *Startd) retiringLocked() bool {
	end := s.health.end
	return !end.IsZero() && !s.now().Before(end.Add(-s.health.grace))
}

// checkHealth lifts a quarantine whose time is up, and near the machine's
// end time drains it: from PondEndTime minus POND_END_GRACE it releases
// its idle claims (the negotiator and the startd give it no new job), and
// at PondEndTime it vacates the jobs still running, which go back to their
// schedds' queues to run elsewhere.
func (s *Startd) checkHealth() {
	now := s.now()
	s.mu.Lock()
	lifted := s.quarantine != nil && !now.Before(s.quarantine.Until)
	if lifted {
		s.quarantine, s.streak = nil, 0
	}
	retiring := s.retiringLocked()
	if retiring != s.retiring {
		s.retiring = retiring
		if retiring {
			s.log.Info("the machine nears its end time: taking no new jobs", "end", s.health.end.UTC().Format(time.RFC3339))
		}
		s.markDirty()
	}
	var stop []*run
	if retiring {
		ended := !now.Before(s.health.end)
		for _, sl := range s.claims {
			switch {
			case sl.partitionable || sl.state != "Claimed":
			case sl.run != nil:
				sl.retire = true
				if ended && !sl.run.exited() {
					// A job that has exited and whose output is on its
					// way is let finish: vacating it would lose a result.
					stop = append(stop, sl.run)
				}
			case sl.reporting:
				sl.retire = true
			default:
				s.releaseLocked(sl)
			}
		}
	}
	s.mu.Unlock()
	if lifted {
		s.log.Warn("quarantine over; the machine takes jobs again")
		s.quarantineChanged()
	}
	for _, r := range stop {
		if r.vacated.CompareAndSwap(false, true) {
			s.log.Warn("vacating a job at the machine's end time", "end", s.health.end.UTC().Format(time.RFC3339))
			r.kill(endReason)
		}
	}
}

// endReason is why a job still running at the machine's end is vacated.
const endReason = "The execute machine reached its end time (PondEndTime): the job goes back to the queue"

// healthAttrs sets the attributes of the machine's health and end on a
// slot ad. s.mu must be held.
func (s *Startd) healthAttrs(ad *classad.Ad) {
	if q := s.quarantine; q != nil {
		ad.SetBool("PondQuarantined", true)
		ad.SetString("PondQuarantineReason", q.Reason)
		ad.SetInt("PondQuarantineUntil", q.Until.Unix())
	}
	if !s.health.end.IsZero() {
		ad.SetInt("PondEndTime", s.health.end.Unix())
		ad.SetInt("PondEndGrace", int64(s.health.grace/time.Second))
	}
	s.maxJobsAttrs(ad)
}

// startExpr is the START the startd advertises: the configured one and
// pondStart.
func startExpr(start classad.Expr) (classad.Expr, error) {
	e, err := classad.ParseExpr("(" + start.String() + ") && (" + pondStart + ") && " + maxJobsStart)
	if err != nil {
		return nil, fmt.Errorf("START: %w", err)
	}
	return e, nil
}

// workerError is a failure to start a job that is the machine's fault,
// not the job's (the scratch directory cannot be written: a full disk, a
// broken file system): the job goes back to the queue instead of being
// held.
type workerError struct{ err error }

func (e *workerError) Error() string { return e.err.Error() }
func (e *workerError) Unwrap() error { return e.err }

// machineFault wraps err, if any, as the machine's fault.
func machineFault(err error) error {
	if err == nil {
		return nil
	}
	return &workerError{err}
}

// execFault says whose fault err, a failure to exec the job's executable,
// is. The machine's when exec ran short of what the machine gives (memory,
// processes, file descriptors, an executable still busy being written) or
// could not run an executable the starter itself wrote and made
// executable (transferred: EACCES or EPERM from a noexec execute
// directory, one the job's user cannot reach); the job's otherwise (no such
// file, not an executable, a missing interpreter), and the job is held.
func execFault(err error, transferred bool) error {
	for _, errno := range []syscall.Errno{syscall.EAGAIN, syscall.ENOMEM, syscall.ENFILE, syscall.EMFILE, syscall.ETXTBSY} {
		if errors.Is(err, errno) {
			return machineFault(err)
		}
	}
	if transferred && (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)) {
		return machineFault(err)
	}
	return err
}

// isMachineFault reports whether err is the machine's fault.
func isMachineFault(err error) bool {
	var we *workerError
	return errors.As(err, &we)
}
