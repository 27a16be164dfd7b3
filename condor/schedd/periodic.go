package schedd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// The periodic job policy's knobs' defaults, HTCondor's.
const (
	// DefaultPeriodicExprInterval is PERIODIC_EXPR_INTERVAL: how often
	// the schedd evaluates the jobs' periodic expressions.
	DefaultPeriodicExprInterval = 60 * time.Second
	// DefaultMaxPeriodicExprInterval is MAX_PERIODIC_EXPR_INTERVAL: the
	// longest the schedd waits between two evaluations when a large
	// queue stretches the interval (see PERIODIC_EXPR_TIMESLICE).
	DefaultMaxPeriodicExprInterval = 1200 * time.Second
	// DefaultPeriodicExprTimeslice is PERIODIC_EXPR_TIMESLICE: the
	// share of its time the schedd spends evaluating periodic
	// expressions at most; an evaluation that takes longer pushes the
	// next one further away.
	DefaultPeriodicExprTimeslice = 0.01
)

// HTCondor's HoldReasonCode values the periodic policy sets.
const (
	// HoldCodeJobPolicy is a hold by the job's own periodic_hold (or
	// on_exit_hold); HoldReasonSubCode is the job's periodic_hold_subcode.
	HoldCodeJobPolicy = 3
	// HoldCodeSystemPolicy is a hold by SYSTEM_PERIODIC_HOLD;
	// HoldReasonSubCode is SYSTEM_PERIODIC_HOLD_SUBCODE.
	HoldCodeSystemPolicy = 26
)

// periodicPageSize is how many jobs one evaluation reads from the queue
// at once: the evaluation holds no more in memory.
const periodicPageSize = 500

// The job attributes whose jobs the evaluation reads when no system
// policy is set.
var periodicAttrs = []string{"PeriodicHold", "PeriodicRelease", "PeriodicRemove"}

// periodicStates are the states whose jobs the policy applies to: every
// state but removed and completed.
var periodicStates = []jobqueue.Status{jobqueue.Idle, jobqueue.Running, jobqueue.Held,
	jobqueue.Suspended, jobqueue.TransferringOutput}

// policyAction is what a periodic expression does to a job.
type policyAction int

const (
	policyNone policyAction = iota
	policyHold
	policyRelease
	policyRemove
)

// policyDecision is what the periodic policy does to one job, and why, in
// the words and codes HTCondor records.
type policyDecision struct {
	action  policyAction
	reason  string
	code    int // HoldReasonCode, for a hold
	subcode int // HoldReasonSubCode, for a hold
}

// periodicPolicy is the configuration of the periodic job policy.
type periodicPolicy struct {
	interval, maxInterval time.Duration
	timeslice             float64
	// The SYSTEM_PERIODIC_* expressions; nil when not set.
	hold, release, remove          classad.Expr
	holdReason, holdSubCode        classad.Expr
	releaseReason, removeReason    classad.Expr
	holdSrc, releaseSrc, removeSrc string
}

// system reports whether a system policy applies to every job.
func (p *periodicPolicy) system() bool {
	return p.hold != nil || p.release != nil || p.remove != nil
}

// loadPeriodicPolicy reads the periodic policy's knobs; a bad value is an
// error naming the knob.
func loadPeriodicPolicy(cfg *config.Config) (*periodicPolicy, error) {
	p := &periodicPolicy{}
	var err error
	if p.interval, err = cfg.Duration("PERIODIC_EXPR_INTERVAL", DefaultPeriodicExprInterval); err != nil {
		return nil, fmt.Errorf("PERIODIC_EXPR_INTERVAL: %w", err)
	}
	if p.interval <= 0 {
		return nil, fmt.Errorf("PERIODIC_EXPR_INTERVAL: %v is not more than zero", p.interval)
	}
	if p.maxInterval, err = cfg.Duration("MAX_PERIODIC_EXPR_INTERVAL", DefaultMaxPeriodicExprInterval); err != nil {
		return nil, fmt.Errorf("MAX_PERIODIC_EXPR_INTERVAL: %w", err)
	}
	p.maxInterval = max(p.maxInterval, p.interval)
	if p.timeslice, err = cfg.Float("PERIODIC_EXPR_TIMESLICE", DefaultPeriodicExprTimeslice); err != nil {
		return nil, fmt.Errorf("PERIODIC_EXPR_TIMESLICE: %w", err)
	}
	if p.timeslice <= 0 || p.timeslice > 1 {
		return nil, fmt.Errorf("PERIODIC_EXPR_TIMESLICE: %g is not a share of time between 0 and 1", p.timeslice)
	}
	for _, k := range []struct {
		name string
		expr *classad.Expr
		src  *string
	}{
		{"SYSTEM_PERIODIC_HOLD", &p.hold, &p.holdSrc},
		{"SYSTEM_PERIODIC_HOLD_REASON", &p.holdReason, nil},
		{"SYSTEM_PERIODIC_HOLD_SUBCODE", &p.holdSubCode, nil},
		{"SYSTEM_PERIODIC_RELEASE", &p.release, &p.releaseSrc},
		{"SYSTEM_PERIODIC_RELEASE_REASON", &p.releaseReason, nil},
		{"SYSTEM_PERIODIC_REMOVE", &p.remove, &p.removeSrc},
		{"SYSTEM_PERIODIC_REMOVE_REASON", &p.removeReason, nil},
	} {
		v, _ := cfg.Get(k.name)
		if strings.TrimSpace(v) == "" {
			continue
		}
		e, err := classad.ParseExpr(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a ClassAd expression: %w", k.name, v, err)
		}
		*k.expr = e
		if k.src != nil {
			*k.src = e.String()
		}
	}
	return p, nil
}

// evalPolicy decides what the periodic policy does to a job in state
// status, in HTCondor's order: periodic_hold (a job not held), then
// periodic_release (a held job), then periodic_remove; for each, the
// job's own expression before the system's. An expression that is not
// true (false, UNDEFINED, an error, a string) does nothing; a number is
// true when it is not zero, as HTCondor takes it.
func evalPolicy(ad *classad.Ad, status jobqueue.Status, p *periodicPolicy) policyDecision {
	if status.Terminal() {
		return policyDecision{}
	}
	if status != jobqueue.Held {
		if src, ok := jobTrue(ad, "PeriodicHold"); ok {
			d := policyDecision{action: policyHold, code: HoldCodeJobPolicy,
				reason: jobReason("PeriodicHold", src)}
			if r, ok := ad.EvalAttr("PeriodicHoldReason").StringValue(); ok && r != "" {
				d.reason = r
			}
			if sub, ok := ad.EvalAttr("PeriodicHoldSubCode").IntValue(); ok {
				d.subcode = int(sub)
			}
			return d
		}
		if systemTrue(ad, p.hold) {
			d := policyDecision{action: policyHold, code: HoldCodeSystemPolicy,
				reason: systemReason(ad, "SYSTEM_PERIODIC_HOLD", p.holdSrc, p.holdReason)}
			if p.holdSubCode != nil {
				if sub, ok := classad.EvalWith(p.holdSubCode, ad, nil).IntValue(); ok {
					d.subcode = int(sub)
				}
			}
			return d
		}
	}
	if status == jobqueue.Held {
		if src, ok := jobTrue(ad, "PeriodicRelease"); ok {
			return policyDecision{action: policyRelease, reason: jobReason("PeriodicRelease", src)}
		}
		if systemTrue(ad, p.release) {
			return policyDecision{action: policyRelease, reason: systemReason(ad, "SYSTEM_PERIODIC_RELEASE", p.releaseSrc, p.releaseReason)}
		}
	}
	if src, ok := jobTrue(ad, "PeriodicRemove"); ok {
		return policyDecision{action: policyRemove, reason: jobReason("PeriodicRemove", src)}
	}
	if systemTrue(ad, p.remove) {
		return policyDecision{action: policyRemove, reason: systemReason(ad, "SYSTEM_PERIODIC_REMOVE", p.removeSrc, p.removeReason)}
	}
	return policyDecision{}
}

// jobTrue evaluates the job's expression name and returns its text when
// it is true.
func jobTrue(ad *classad.Ad, name string) (string, bool) {
	e, ok := ad.Lookup(name)
	if !ok || !ad.EvalExpr(e).IsTrue() {
		return "", false
	}
	return e.String(), true
}

// systemTrue evaluates a system policy expression (nil: not set) against
// the job's ad.
func systemTrue(ad *classad.Ad, e classad.Expr) bool {
	return e != nil && classad.EvalWith(e, ad, nil).IsTrue()
}

// jobReason is HTCondor's reason for an action of the job's own policy.
func jobReason(attr, src string) string {
	return fmt.Sprintf("The job attribute %s expression '%s' evaluated to TRUE", attr, src)
}

// systemReason is the reason a system policy gives: its _REASON knob's
// string when that evaluates to one that is not empty, HTCondor's words
// otherwise.
func systemReason(ad *classad.Ad, knob, src string, reason classad.Expr) string {
	if reason != nil {
		if r, ok := classad.EvalWith(reason, ad, nil).StringValue(); ok && r != "" {
			return r
		}
	}
	return fmt.Sprintf("The system macro %s expression '%s' evaluated to TRUE", knob, src)
}

// periodicLoop evaluates the periodic policy every PERIODIC_EXPR_INTERVAL
// until ctx ends. An evaluation that takes more than its share of time
// (PERIODIC_EXPR_TIMESLICE) pushes the next one further away, up to
// MAX_PERIODIC_EXPR_INTERVAL, as HTCondor's schedd does; the time spent
// acting on the jobs it picked (writing the queue and the job logs) does
// not count, so that a hold does not put off the next job's removal.
func (s *Schedd) periodicLoop(ctx context.Context, p *periodicPolicy) {
	defer s.wg.Done()
	wait := p.interval
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		start := time.Now()
		n, acting, err := s.periodicPass(ctx, p)
		s.retireCompleted(ctx)
		took := time.Since(start) - acting
		if err != nil && ctx.Err() == nil {
			s.log.Error("evaluating the periodic job policy", "err", err)
		}
		wait = min(max(p.interval, time.Duration(float64(took)/p.timeslice)), p.maxInterval)
		if wait > p.interval {
			s.log.Info("periodic job policy evaluation is slow; next one later", "jobs", n, "took", took, "next", wait)
		}
	}
}

// periodicPass evaluates the policy of every job it applies to (those
// carrying a periodic expression, or all when a system policy is set), a
// page at a time, and returns how many jobs it evaluated and how long it
// spent acting on them.
func (s *Schedd) periodicPass(ctx context.Context, p *periodicPolicy) (n int, acting time.Duration, err error) {
	pq := jobqueue.PageQuery{Limit: periodicPageSize, Status: periodicStates}
	if !p.system() {
		pq.Carrying = periodicAttrs
	}
	acted := false
	defer func() {
		if acted {
			s.markDirty()
		}
	}()
	for {
		page, err := s.q.Page(ctx, pq)
		if err != nil {
			return n, acting, err
		}
		for _, j := range page {
			if err := ctx.Err(); err != nil {
				return n, acting, err
			}
			n++
			ad, err := wire.ToClassAd(j.Ad)
			if err != nil {
				s.log.Warn("job ad unreadable; its periodic policy is not evaluated", "job", j.ID, "err", err)
				continue
			}
			ad.SetInt("JobStatus", int64(j.Status))
			ad.SetInt("EnteredCurrentStatus", j.EnteredStatus.Unix())
			if d := evalPolicy(ad, j.Status, p); d.action != policyNone {
				start := time.Now()
				acted = s.applyPolicy(ctx, j, ad, d) || acted
				acting += time.Since(start)
			}
		}
		if len(page) < pq.Limit {
			return n, acting, nil
		}
		pq.After = page[len(page)-1].ID
	}
}

// applyPolicy holds, releases or removes a job as the policy decided,
// unless its state changed since it was evaluated, records HTCondor's
// reason and codes and the job's event, and reports whether it did.
func (s *Schedd) applyPolicy(ctx context.Context, j jobqueue.Job, ad *classad.Ad, d policyDecision) bool {
	sel := jobqueue.OneJob(j.ID)
	sel.Constraint = func(cur jobqueue.Job) bool { return cur.Status == j.Status }
	var changed []jobqueue.Changed
	var what string
	var ev joblog.Event
	var act func(context.Context) error
	switch d.action {
	case policyHold:
		what = "held"
		ev = joblog.Event{Type: joblog.Held, Message: d.reason, HoldCode: d.code, HoldSubCode: d.subcode}
		act = func(ctx context.Context) (err error) {
			changed, err = s.q.Hold(ctx, sel, d.reason, d.code, d.subcode)
			return err
		}
	case policyRelease:
		what = "released"
		ev = joblog.Event{Type: joblog.Released, Message: d.reason}
		act = func(ctx context.Context) (err error) {
			changed, err = s.q.Release(ctx, sel, d.reason)
			return err
		}
	case policyRemove:
		what = "removed"
		ev = joblog.Event{Type: joblog.Aborted, Message: d.reason}
		act = func(ctx context.Context) (err error) {
			changed, err = s.q.Remove(ctx, sel, d.reason)
			return err
		}
	default:
		return false
	}
	// The job's event is stored with its change (outbox.go).
	events, err := s.recordEvents(ctx, ev, act)
	for _, e := range events {
		s.deliverEvent(ctx, e, ad, false)
	}
	if errors.Is(err, jobqueue.ErrNotFound) {
		return false
	}
	if err != nil {
		s.log.Warn("applying the periodic job policy", "job", j.ID, "action", what, "err", err)
		return false
	}
	for _, c := range changed {
		s.log.Info("periodic job policy "+what+" a job", "job", c.ID, "reason", d.reason)
		s.afterPolicy(ctx, c, ad, d)
	}
	return len(changed) > 0
}

// afterPolicy queues a job the policy released and vacates a held or
// removed job that was running.
func (s *Schedd) afterPolicy(ctx context.Context, c jobqueue.Changed, ad *classad.Ad, d policyDecision) {
	s.mu.Lock()
	s.idle.delete(c.ID)
	cl := s.active[c.ID]
	s.mu.Unlock()
	if d.action == policyRelease {
		s.addIdle(ctx, c.ID)
		return
	}
	if c.From == jobqueue.Running {
		s.vacateJob(cl, c.ID)
	}
}
