package startd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// drainPoll is how often Drain looks for jobs that have ended.
const drainPoll = 100 * time.Millisecond

// DrainResult says what a drain did.
type DrainResult struct {
	// Finished is how many jobs ran to their end while the startd drained.
	Finished int `json:"finished"`
	// Evicted is how many jobs were stopped and handed back to their schedd
	// to run elsewhere.
	Evicted int `json:"evicted"`
	// Took is how long the drain lasted.
	Took time.Duration `json:"took"`
}

// DrainMode is how a drain evicts the jobs running on the machine, as
// condor_drain's schedules.
type DrainMode int

const (
	// DrainGraceful lets each job run out its retirement time (the lesser
	// of MAXJOBRETIREMENTTIME and its MaxJobRetirementTime, counted from
	// its start) and then vacates it. As HTCondor's, the machine's jobs
	// retire together: each may run until the latest of their
	// retirements ends, the machine being busy until then anyway.
	DrainGraceful DrainMode = iota + 1
	// DrainQuick vacates the jobs at once: each gets its soft-kill signal
	// and its vacate time (MachineMaxVacateTime, JobMaxVacateTime), then is
	// killed.
	DrainQuick
	// DrainFast kills the jobs at once.
	DrainFast
)

// String is the mode's name, as condor_drain's option.
func (m DrainMode) String() string {
	switch m {
	case DrainGraceful:
		return wire.DrainGraceful
	case DrainQuick:
		return wire.DrainQuick
	case DrainFast:
		return wire.DrainFast
	}
	return "DrainMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseDrainMode reads a drain schedule's name ("graceful", "quick",
// "fast"; "" is graceful).
func ParseDrainMode(name string) (DrainMode, error) {
	switch name {
	case "", wire.DrainGraceful:
		return DrainGraceful, nil
	case wire.DrainQuick:
		return DrainQuick, nil
	case wire.DrainFast:
		return DrainFast, nil
	}
	return 0, fmt.Errorf("unknown drain schedule %q: want %s, %s or %s", name, wire.DrainGraceful, wire.DrainQuick, wire.DrainFast)
}

// how is the eviction the mode gives a running job.
func (m DrainMode) how() evictHow {
	switch m {
	case DrainQuick:
		return evictVacate
	case DrainFast:
		return evictKill
	}
	return evictRetire
}

// adminDrain is a drain an administrator asked for (condor_drain).
type adminDrain struct {
	mode   DrainMode
	reason string
	id     string
	by     string
	start  time.Time
}

// ErrNotDraining is returned when a drain is cancelled on a machine that
// is not draining (or not by the request named).
var ErrNotDraining = errors.New("the machine is not draining")

// drainingLocked reports whether the machine takes no new claim or job
// because it drains; s.mu must be held.
func (s *Startd) drainingLocked() bool { return s.draining || s.drain != nil }

// jobsRunLocked reports whether a job runs (or is reporting its end) on
// the machine; s.mu must be held.
func (s *Startd) jobsRunLocked() bool {
	for _, sl := range s.claims {
		if sl.run != nil || sl.reporting {
			return true
		}
	}
	return false
}

// drainAttrsLocked sets the drain attributes of a slot ad, as HTCondor's
// startd: DrainReason and DrainingRequestId while an administrator's drain
// lasts, LastDrainStartTime and LastDrainStopTime once one began and
// ended; PondDrainSchedule says how its jobs are evicted. s.mu must be
// held.
func (s *Startd) drainAttrsLocked(ad *classad.Ad) {
	if d := s.drain; d != nil {
		ad.SetString("DrainReason", d.reason)
		ad.SetString("DrainingRequestId", d.id)
		ad.SetString("PondDrainSchedule", d.mode.String())
	}
	if !s.lastDrainStart.IsZero() {
		ad.SetInt("LastDrainStartTime", s.lastDrainStart.Unix())
	}
	if !s.lastDrainStop.IsZero() {
		ad.SetInt("LastDrainStopTime", s.lastDrainStop.Unix())
	}
}

// evictAllLocked starts evicting every job running on the machine as how
// says (see evictLocked), marks every claim to end with its job, and
// releases the idle claims. It returns how many jobs run. s.mu must be
// held.
func (s *Startd) evictAllLocked(how evictHow, why string, drain bool) int {
	var retireEnd time.Time
	if how == evictRetire {
		// The machine's jobs retire together: until the latest end of
		// their retirements.
		for _, sl := range s.claims {
			if sl.run != nil && !sl.partitionable && sl.state == "Claimed" {
				if end := sl.entered.Add(s.retirementLocked(s.slotAd(sl), sl.job)); end.After(retireEnd) {
					retireEnd = end
				}
			}
		}
	}
	running := 0
	for _, sl := range s.claims {
		switch {
		case sl.partitionable || sl.state != "Claimed":
		case sl.run != nil:
			running++
			sl.retire = true
			s.evictLocked(sl, how, why, retireEnd, drain)
		case sl.reporting:
			// Released once its report is delivered.
			sl.retire = true
		default:
			// An idle claim: nothing more runs on it while drained.
			s.releaseLocked(sl)
		}
	}
	s.markDirty()
	return running
}

// StartDrain drains the machine, as condor_drain does: until CancelDrain
// it takes no new claim or job (its unclaimed slots are Drained, and
// claimed ones Retiring until their jobs end), its idle claims are
// released, and the jobs running on it are evicted as mode says, each
// claim ending with its job. An evicted job goes back to its schedd's
// queue to run elsewhere. It returns at once. A machine already draining
// goes on draining under the quicker of the two modes, with the new
// reason. by is who asked (for the log and the default reason).
func (s *Startd) StartDrain(mode DrainMode, reason, by string) (*wire.DrainResponse, error) {
	if mode < DrainGraceful || mode > DrainFast {
		return nil, fmt.Errorf("%w: unknown drain mode %d", wire.ErrBadRequest, int(mode))
	}
	if reason == "" {
		reason = "drained by " + by
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
	}
	d := s.drain
	if d == nil {
		s.drainSeq++
		d = &adminDrain{mode: mode, id: strconv.Itoa(s.drainSeq), start: time.Now()}
		s.drain, s.lastDrainStart = d, d.start
	} else if mode > d.mode {
		d.mode = mode
	}
	d.reason, d.by = reason, by
	why := "the machine is draining: " + reason
	running := s.evictAllLocked(d.mode.how(), why, true)
	s.log.Warn("draining the machine: it takes no new job", "schedule", d.mode, "reason", reason, "by", by,
		"request_id", d.id, "running_jobs", running)
	return s.drainResponseLocked(), nil
}

// CancelDrain ends the drain StartDrain began (the one of id, when not
// empty): the machine takes claims and jobs again, and the jobs still
// retiring under it run on as before; those already vacated or killed are
// not called back. It returns ErrNotDraining when no such drain is under
// way.
func (s *Startd) CancelDrain(id, by string) (*wire.DrainResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.drain
	if d == nil || id != "" && id != d.id {
		if d != nil {
			return nil, fmt.Errorf("%w: %w: the drain under way is request %s, not %s", wire.ErrConflict, ErrNotDraining, d.id, id)
		}
		return nil, fmt.Errorf("%w: %w", wire.ErrConflict, ErrNotDraining)
	}
	resp := s.drainResponseLocked()
	resp.Cancelled, resp.Draining = true, s.draining
	s.drain, s.lastDrainStop = nil, time.Now()
	for _, sl := range s.claims {
		if s.cancelEvictionLocked(sl) {
			resp.Resumed++
		}
	}
	s.markDirty()
	s.log.Warn("drain cancelled: the machine takes jobs again", "by", by, "request_id", d.id, "retiring_jobs_resumed", resp.Resumed)
	return resp, nil
}

// drainResponseLocked describes the machine's drain; s.mu must be held.
func (s *Startd) drainResponseLocked() *wire.DrainResponse {
	resp := &wire.DrainResponse{Machine: s.opts.Name, Draining: s.drainingLocked()}
	if d := s.drain; d != nil {
		resp.Schedule, resp.Reason, resp.RequestID, resp.Since = d.mode.String(), d.reason, d.id, d.start
	}
	for _, sl := range s.claims {
		if sl.run != nil {
			resp.Running++
			if sl.evicting != nil || sl.run.vacated.Load() {
				resp.Evicting++
			}
		}
	}
	return resp
}

// DrainCall answers a wire.DrainRequest: it drains the machine, or ends
// its drain, as the caller (an administrator) asks.
func (s *Startd) DrainCall(ctx context.Context, req *wire.DrainRequest) (*wire.DrainResponse, error) {
	by := "an administrator"
	if cl, ok := auth.FromContext(ctx); ok && cl != nil && cl.Subject != "" {
		by = cl.Subject
	}
	if req.Cancel {
		if req.Schedule != "" {
			return nil, fmt.Errorf("%w: a cancel takes no drain schedule", wire.ErrBadRequest)
		}
		return s.CancelDrain(req.RequestID, by)
	}
	if req.RequestID != "" {
		return nil, fmt.Errorf("%w: a request id names the drain a cancel ends", wire.ErrBadRequest)
	}
	mode, err := ParseDrainMode(req.Schedule)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	const maxReason = 1024
	if len(req.Reason) > maxReason {
		return nil, fmt.Errorf("%w: the drain reason is %d bytes, more than %d", wire.ErrBadRequest, len(req.Reason), maxReason)
	}
	return s.StartDrain(mode, req.Reason, by)
}

// Drain stops the startd from taking claims or starting jobs, as
// condor_drain does, and returns once no job runs on it: at once after
// killing every running job when evict is true (as condor_drain -fast),
// otherwise when the running jobs have ended by themselves, or, if ctx
// ends first, after killing those still running. Evicted jobs go back to
// their schedd's queue as idle jobs. Idle claims are released. The startd
// stays drained until Resume. A pond release drains its nodes so.
func (s *Startd) Drain(ctx context.Context, evict bool) DrainResult {
	began := time.Now()
	s.mu.Lock()
	s.draining = true
	initial := 0
	for _, sl := range s.claims {
		if sl.run != nil {
			initial++
		}
	}
	s.mu.Unlock()
	s.markDirty()
	var res DrainResult
	for {
		var runs []*slot
		reporting := 0
		s.mu.Lock()
		for _, sl := range s.claims {
			switch {
			case sl.partitionable || sl.state != "Claimed":
			case sl.run != nil:
				runs = append(runs, sl)
			case sl.reporting:
				// Released once its report is delivered; waited for
				// unless the drain's time is up (a schedd that does not
				// answer keeps a report for REPORT_RETRY_TIME).
				sl.retire = true
				if ctx.Err() == nil {
					reporting++
				}
			default:
				// An idle claim: nothing more runs on it while drained.
				s.releaseLocked(sl)
			}
		}
		if evict || ctx.Err() != nil {
			for _, sl := range runs {
				if r := sl.run; !r.wasKilled() {
					s.evictLocked(sl, evictKill, "the machine is draining", time.Time{}, false)
					res.Evicted++
				}
			}
		}
		s.mu.Unlock()
		if len(runs) == 0 && reporting == 0 {
			break
		}
		select {
		case <-s.stop.Done():
			res.Took = time.Since(began)
			return res
		case <-time.After(drainPoll):
		}
	}
	res.Finished = max(0, initial-res.Evicted)
	res.Took = time.Since(began)
	return res
}

// Resume ends a drain Drain began: the slots take claims again, unless an
// administrator's drain (StartDrain) goes on.
func (s *Startd) Resume() {
	s.mu.Lock()
	s.draining = false
	s.mu.Unlock()
	s.markDirty()
}
