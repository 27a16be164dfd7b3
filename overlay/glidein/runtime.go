package glidein

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
)

// The phases of a glidein's life, as its status shows them.
const (
	// PhaseValidating: the agent runs its checks; it has not joined the
	// pool.
	PhaseValidating = "validating"
	// PhaseFailed: the glidein never joined: a check failed (reason
	// validation) or the agent could not start (reason error).
	PhaseFailed = "failed"
	// PhaseRunning: validated, its daemons report to the pool.
	PhaseRunning = "running"
	// PhaseDraining: it takes no new job and its running jobs finish or
	// are handed back before it leaves.
	PhaseDraining = "draining"
	// PhaseEnded: it has left the sea; the status is final.
	PhaseEnded = "ended"
)

// The reasons a glidein fails, drains and ends.
const (
	// ReasonValidation: a check failed.
	ReasonValidation = "validation"
	// ReasonIdle: no slot was claimed for the idle timeout.
	ReasonIdle = "idle"
	// ReasonLifetime: its lifetime (-lifetime) ends.
	ReasonLifetime = "lifetime"
	// ReasonEndTime: its batch job's end (-end-time) approaches.
	ReasonEndTime = "end-time"
	// ReasonCMGone: its central manager did not answer for the central
	// manager timeout.
	ReasonCMGone = "central-manager-gone"
	// ReasonSignal: the process was told to stop (SIGTERM, SIGINT).
	ReasonSignal = "signal"
	// ReasonLeave: it was asked to leave through its API.
	ReasonLeave = "leave"
	// ReasonMaxJobs: it ran the most jobs it may (-max-jobs), and the
	// last has ended.
	ReasonMaxJobs = "max-jobs"
	// ReasonQuarantined: the node was quarantined as a black hole (its
	// could not start jobs again and again): a glidein retires at once, so
	// that whoever keeps the depth replaces it with another.
	ReasonQuarantined = "quarantined"
	// ReasonError: the agent failed.
	ReasonError = "error"
)

// ExitValidation is the exit code of a glidein whose validation failed,
// so that whoever started it tells it from an error (1) and from a
// glidein that ran itself down (0).
const ExitValidation = 3

// StatusFile is the name of the status file in a glidein's data
// directory, unless it is given another path.
const StatusFile = "glidein.status"

// ReadStatus reads a glidein's status file.
func ReadStatus(path string) (*api.GlideinStatus, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var st api.GlideinStatus
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}

// Config configures a glidein's runtime.
type Config struct {
	// ID is the glidein's ID and Name its node's name.
	ID, Name string
	// StatusFile is where its status is written; "" writes none.
	StatusFile string
	// Started is when the agent started.
	Started time.Time
	// End is when the glidein must be gone (zero: no end), and EndReason
	// why: ReasonLifetime or ReasonEndTime.
	End       time.Time
	EndReason string
	// Grace is how long before End the glidein starts draining.
	Grace time.Duration
	// IdleTimeout is how long no slot may be claimed before the glidein
	// leaves (0: no limit).
	IdleTimeout time.Duration
	// CMTimeout is how long the central manager may not answer before the
	// glidein leaves (0: no limit); CentralManager is its address.
	CMTimeout      time.Duration
	CentralManager string
	// MaxJobs is the most jobs the glidein runs (0: no limit); its
	// startd refuses more, and the glidein leaves once they have ended.
	MaxJobs int
	// Interval is how often the runtime looks at the node; a second when
	// zero.
	Interval time.Duration
	Logger   *slog.Logger
}

// Node is what the runtime needs of the agent it runs in. The agent
// implements it.
type Node interface {
	// Claimed reports whether one of the node's slots is claimed.
	Claimed() bool
	// JobsSpent reports whether the node's startd has started the most
	// jobs it may (POND_MAX_JOBS) and none of them still runs.
	JobsSpent() bool
	// Quarantined reports whether the node is quarantined as a black
	// hole, and why.
	Quarantined() (reason string, ok bool)
	// ReachCentralManager makes one authenticated call to the glidein's
	// central manager and says what is wrong.
	ReachCentralManager(ctx context.Context) error
	// Drain empties the node: it starts no new job and waits for the
	// running ones to end, evicting them (back to their schedd's queue)
	// when evict is true or ctx ends. It returns what it did and a
	// function that ends the drain.
	Drain(ctx context.Context, evict bool) (api.DrainResult, func())
}

// Ending is why and how a glidein ended its run.
type Ending struct {
	Reason, Message string
	Drain           api.DrainResult
}

// ErrAskedToLeave is the cause with which the agent stops a runtime when
// it is asked to leave through its API.
var ErrAskedToLeave = errors.New("asked to leave through the API")

// Drain bounds: how long evicting drains may last (reports to a schedd
// that does not answer are not waited for longer), and the most time kept
// between the end of a draining for the end and the end itself, to leave
// the sea and stop.
const (
	evictDrain = 10 * time.Second
	maxMargin  = 30 * time.Second
)

// Runtime is a glidein's life in its agent: it validates, watches the
// node for a reason to leave (idle, the end coming, the central manager
// gone), drains it, and keeps the glidein's status, which it writes to
// the status file at every change of phase. Its methods may be called
// concurrently.
type Runtime struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	st     api.GlideinStatus
	ending *Ending
	// interrupts holds the first Interrupt until Run takes it.
	interrupts chan Ending
}

// NewRuntime returns the runtime of a glidein configured by cfg, in the
// validating phase; it writes the status file.
func NewRuntime(cfg Config) (*Runtime, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{cfg: cfg, log: cfg.Logger.With("glidein", cfg.ID), interrupts: make(chan Ending, 1)}
	r.st = api.GlideinStatus{
		ID: cfg.ID, Name: cfg.Name, Phase: PhaseValidating, PID: os.Getpid(), Started: cfg.Started,
		EndTime: cfg.End, DrainAt: r.drainAt(), IdleTimeout: cfg.IdleTimeout, CMTimeout: cfg.CMTimeout, MaxJobs: cfg.MaxJobs,
		CentralManager: cfg.CentralManager,
	}
	if err := r.update(func(*api.GlideinStatus) {}); err != nil {
		return nil, err
	}
	return r, nil
}

// drainAt is when the glidein starts draining for its end.
func (r *Runtime) drainAt() time.Time {
	if r.cfg.End.IsZero() {
		return time.Time{}
	}
	return r.cfg.End.Add(-r.cfg.Grace)
}

// Status returns the glidein's status.
func (r *Runtime) Status() api.GlideinStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.Checks = append([]api.GlideinCheck(nil), st.Checks...)
	return st
}

// update changes the status with f and writes it to the status file.
func (r *Runtime) update(f func(*api.GlideinStatus)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.st)
	r.st.Updated = time.Now().UTC()
	if r.cfg.StatusFile == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(r.cfg.StatusFile), 0o700); err != nil {
		return fmt.Errorf("glidein status file: %w", err)
	}
	if err := jsonfile.Write(r.cfg.StatusFile, r.st); err != nil {
		return fmt.Errorf("glidein status file: %w", err)
	}
	return nil
}

// write is update for a change the glidein goes on after: a status file
// that cannot be written is logged.
func (r *Runtime) write(f func(*api.GlideinStatus)) {
	if err := r.update(f); err != nil {
		r.log.Error("cannot write the glidein's status", "err", err)
	}
}

// Validate runs the checks (see Validate) and records their results. When
// one fails, the glidein's phase becomes failed, with the reason
// validation and the exit code ExitValidation, and the error is a
// *ValidationError.
func (r *Runtime) Validate(ctx context.Context, checks []api.ValidationCheck, env Env) error {
	if len(checks) == 0 {
		return nil
	}
	r.log.Info("validating the glidein", "checks", len(checks))
	results, err := Validate(ctx, checks, env)
	r.write(func(st *api.GlideinStatus) { st.Checks = results })
	for _, c := range results {
		if c.OK {
			r.log.Info("glidein check passed", "check", c.Name, "detail", c.Detail, "took", c.Took.Round(time.Millisecond))
		} else {
			r.log.Error("glidein check failed", "check", c.Name, "reason", c.Detail, "took", c.Took.Round(time.Millisecond))
		}
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		r.Fail(ReasonValidation, err, ExitValidation)
	}
	return err
}

// Fail records that the glidein never joined: phase failed, with reason
// and the exit code of the process.
func (r *Runtime) Fail(reason string, err error, code int) {
	r.write(func(st *api.GlideinStatus) {
		st.Phase, st.Reason, st.Message, st.ExitCode = PhaseFailed, reason, err.Error(), &code
	})
}

// Run watches the node, once the glidein has joined, until a reason to
// leave comes: no slot claimed for the idle timeout, its last job
// (max_jobs) ended, the drain time before
// the end, the central manager unanswering for its timeout, or ctx ending
// (ErrAskedToLeave as its cause: the API asked the agent to leave; any
// other: a signal). It then drains the node (see drain) and returns why;
// the caller leaves the sea and calls Finish.
func (r *Runtime) Run(ctx context.Context, node Node) Ending {
	started := time.Now()
	r.write(func(st *api.GlideinStatus) { st.Phase = PhaseRunning; st.CMLastSeen = time.Time{} })
	r.log.Info("glidein running", "end", fmtTime(r.cfg.End), "drain_at", fmtTime(r.drainAt()),
		"idle_timeout", r.cfg.IdleTimeout, "cm_timeout", r.cfg.CMTimeout, "max_jobs", r.cfg.MaxJobs)
	probeEvery := min(max(r.cfg.CMTimeout/5, r.cfg.Interval), 30*time.Second)
	var (
		idleSince = started
		cmSeen    = started // the timeout runs from the start
		cmErr     error
		nextProbe time.Time
	)
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	for {
		now := time.Now()
		var e *Ending
		if node.Claimed() {
			idleSince = time.Time{}
		} else if idleSince.IsZero() {
			idleSince = now
		}
		if r.cfg.CMTimeout > 0 && !now.Before(nextProbe) {
			pctx, cancel := context.WithTimeout(ctx, min(max(probeEvery, time.Second), 10*time.Second))
			cmErr = node.ReachCentralManager(pctx)
			cancel()
			now = time.Now()
			if cmErr == nil {
				cmSeen = now
			} else if ctx.Err() == nil {
				r.log.Warn("the central manager does not answer", "central_manager", r.cfg.CentralManager, "err", cmErr,
					"leaving_in", (r.cfg.CMTimeout - now.Sub(cmSeen)).Round(time.Second))
			}
			nextProbe = now.Add(probeEvery)
		}
		r.mu.Lock()
		r.st.IdleSince = idleSince
		if cmErr == nil && r.cfg.CMTimeout > 0 {
			r.st.CMLastSeen = cmSeen
		}
		r.mu.Unlock()
		switch at := r.drainAt(); {
		case ctx.Err() != nil:
		case !at.IsZero() && !now.Before(at):
			msg := fmt.Sprintf("the batch job ends at %s", fmtTime(r.cfg.End))
			if r.cfg.EndReason == ReasonLifetime {
				msg = fmt.Sprintf("its lifetime of %s ends at %s", r.cfg.End.Sub(r.cfg.Started).Round(time.Second), fmtTime(r.cfg.End))
			}
			e = &Ending{Reason: r.cfg.EndReason, Message: msg}
		case quarantined(node):
			reason, _ := node.Quarantined()
			e = &Ending{Reason: ReasonQuarantined, Message: "quarantined as a black hole: " + reason}
		case node.JobsSpent():
			msg := "it ran the jobs its startd may start (POND_MAX_JOBS) and the last has ended"
			if r.cfg.MaxJobs > 0 {
				msg = fmt.Sprintf("it ran the %d jobs it may (max_jobs) and the last has ended", r.cfg.MaxJobs)
			}
			e = &Ending{Reason: ReasonMaxJobs, Message: msg}
		case r.cfg.IdleTimeout > 0 && !idleSince.IsZero() && now.Sub(idleSince) >= r.cfg.IdleTimeout:
			e = &Ending{Reason: ReasonIdle, Message: fmt.Sprintf("no slot claimed for %s", r.cfg.IdleTimeout)}
		case r.cfg.CMTimeout > 0 && now.Sub(cmSeen) >= r.cfg.CMTimeout:
			e = &Ending{Reason: ReasonCMGone, Message: fmt.Sprintf("the central manager %s did not answer for %s: %v",
				r.cfg.CentralManager, r.cfg.CMTimeout, cmErr)}
		}
		if e == nil {
			select {
			case <-ctx.Done():
				e = &Ending{Reason: ReasonSignal, Message: "signalled to stop"}
				if errors.Is(context.Cause(ctx), ErrAskedToLeave) {
					e = &Ending{Reason: ReasonLeave, Message: ErrAskedToLeave.Error()}
				}
			case i := <-r.interrupts:
				e = &i
			case <-tick.C:
				continue
			}
		}
		return r.drain(ctx, node, *e)
	}
}

// quarantined reports whether node is quarantined.
func quarantined(node Node) bool {
	_, ok := node.Quarantined()
	return ok
}

// drain empties the node for ending e. For its end, the running jobs may
// finish until a margin before the end (a third of the grace, at most
// 30s) or until ctx ends, when those left are evicted and handed back to
// their schedd; for every other reason they are evicted at once, within
// 10 seconds.
func (r *Runtime) drain(ctx context.Context, node Node, e Ending) Ending {
	r.log.Info("glidein draining", "reason", e.Reason, "message", e.Message)
	r.write(func(st *api.GlideinStatus) { st.Phase, st.Reason, st.Message = PhaseDraining, e.Reason, e.Message })
	dctx := context.WithoutCancel(ctx)
	var cancel context.CancelFunc
	evict := true
	if e.Reason == ReasonLifetime || e.Reason == ReasonEndTime {
		evict = false
		dctx, cancel = context.WithDeadline(dctx, r.cfg.End.Add(-min(r.cfg.Grace/3, maxMargin)))
		// Told to stop meanwhile (the batch system cancels the job): the
		// jobs left are evicted at once.
		defer context.AfterFunc(ctx, cancel)()
	} else {
		dctx, cancel = context.WithTimeout(dctx, evictDrain)
	}
	e.Drain, _ = node.Drain(dctx, evict)
	cancel()
	r.log.Info("glidein drained", "reason", e.Reason, "finished", e.Drain.Finished, "evicted", e.Drain.Evicted,
		"took", e.Drain.Took.Round(time.Millisecond))
	r.mu.Lock()
	r.ending = &e
	r.st.Drain = &e.Drain
	r.mu.Unlock()
	return e
}

// Finish records the glidein's end, once the agent has left the sea: the
// phase ended with why Run returned and exit code 0, or, when err is not
// nil, reason error and exit code 1.
func (r *Runtime) Finish(err error) {
	r.mu.Lock()
	e := r.ending
	r.mu.Unlock()
	code := 0
	if err != nil {
		code = 1
		e = &Ending{Reason: ReasonError, Message: err.Error()}
	}
	if e == nil {
		e = &Ending{Reason: ReasonError, Message: "the agent stopped before the glidein ran"}
		code = 1
	}
	r.write(func(st *api.GlideinStatus) {
		st.Phase, st.Reason, st.Message, st.ExitCode = PhaseEnded, e.Reason, e.Message, &code
	})
	r.log.Info("glidein ended", "reason", e.Reason, "message", e.Message, "exit_code", code)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// DrainGrace is how long before its end the glidein drains, which its
// startd takes as POND_END_GRACE, so that it stops taking jobs when the
// glidein drains and not before; zero for a glidein with no end.
func (r *Runtime) DrainGrace() time.Duration {
	st := r.Status()
	if st.EndTime.IsZero() || st.DrainAt.IsZero() || !st.DrainAt.Before(st.EndTime) {
		return 0
	}
	return st.EndTime.Sub(st.DrainAt)
}

// Go runs the runtime (Run) for node in the background while the node
// runs, with watch (nil: none) beside it: ended reports when the runtime
// has drained the node for a reason of its own; stop ends it for a reason
// of the node's (cause ErrAskedToLeave, or any other for a signal or an
// error) and waits until it has drained and watch has returned.
func (r *Runtime) Go(ctx context.Context, node Node, watch func(context.Context)) (ended <-chan Ending, stop func(cause error)) {
	rctx, cancel := context.WithCancelCause(ctx)
	ch := make(chan Ending, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ch <- r.Run(rctx, node)
	}()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if watch != nil {
			watch(rctx)
		}
	}()
	return ch, func(cause error) { cancel(cause); <-done; <-watched }
}
