package startd

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/wire"
)

// preemption is a claim waiting for a claimed slot: the slot's job
// retires (runs on for up to its retirement time) and is then vacated,
// and the slot goes to the new claim once the old one has ended.
type preemption struct {
	id   string // the new claim's id: the slot's preempting claim id
	free chan struct{}
}

// DefaultMachineMaxVacateTime is how long a soft-killed job has to end
// before it is killed, when MachineMaxVacateTime is not set (HTCondor's
// 10 seconds).
const DefaultMachineMaxVacateTime = 10 * time.Second

// preemptingSlotLocked returns the claimed slot whose preempting claim id
// is id, or nil; s.mu must be held.
func (s *Startd) preemptingSlotLocked(id string) *slot {
	if id == "" {
		return nil
	}
	for _, sl := range s.claims {
		if sl.preemptID == id && sl.state == "Claimed" && !sl.partitionable {
			return sl
		}
	}
	return nil
}

// currentRankLocked is the machine's Rank of the job a claimed slot runs
// (or was claimed for); s.mu must be held.
func (s *Startd) currentRankLocked(sl *slot, ad *classad.Ad) float64 {
	job := sl.job
	if job == nil {
		job = sl.claimJob
	}
	if job == nil {
		return 0
	}
	f, ok := classad.EvalWith(s.rank, ad, job).NumberValue()
	if !ok || math.IsNaN(f) {
		return 0
	}
	return f
}

// preemptClaim grants a preempting claim (the claim id a claimed slot
// advertises for the negotiator to hand out): when the machine ranks the
// job no lower than the one it runs and the job fits the slot, the
// running job retires, is vacated, and the slot is the new claim's once
// the old claim has ended. It answers then, or when ctx ends first.
// handled is false when id is no slot's preempting claim id.
func (s *Startd) preemptClaim(ctx context.Context, req *wire.ClaimRequest, job *classad.Ad) (resp *wire.ClaimResponse, handled bool, err error) {
	s.mu.Lock()
	sl := s.preemptingSlotLocked(req.ClaimID)
	if sl == nil {
		s.mu.Unlock()
		return nil, false, nil
	}
	p, err := s.startPreemptionLocked(sl, req, job)
	s.mu.Unlock()
	if err != nil {
		return nil, true, err
	}
	select {
	case <-p.free:
	case <-ctx.Done():
		s.mu.Lock()
		if sl.preempting == p {
			// The old claim still ends; the slot waits for no one.
			sl.preempting = nil
		}
		s.mu.Unlock()
		return nil, true, fmt.Errorf("%w: slot %s: the preempted job has not ended yet", wire.ErrConflict, sl.name)
	case <-s.stop.Done():
		return nil, true, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.claims[p.id] != sl {
		return nil, true, fmt.Errorf("%w: slot %s was not freed for the claim", wire.ErrConflict, sl.name)
	}
	s.claimSlot(sl, req)
	sl.claimJob = job
	return &wire.ClaimResponse{ClaimID: sl.claimID, Slot: wire.FromClassAd(s.slotAd(sl))}, true, nil
}

// startPreemptionLocked checks a preempting claim and starts the slot's
// retirement; s.mu must be held.
func (s *Startd) startPreemptionLocked(sl *slot, req *wire.ClaimRequest, job *classad.Ad) (*preemption, error) {
	switch {
	case s.closed:
		return nil, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
	case s.drainingLocked():
		return nil, fmt.Errorf("%w: the machine is draining", wire.ErrConflict)
	case req.Epoch < s.epoch:
		return nil, fmt.Errorf("%w: %w: the match is of central-manager epoch %d, the pool is at epoch %d",
			wire.ErrConflict, ErrStaleEpoch, req.Epoch, s.epoch)
	case sl.preempting != nil || sl.retire || sl.evicting != nil:
		return nil, fmt.Errorf("%w: slot %s is already being preempted", wire.ErrConflict, sl.name)
	}
	if err := s.refusalLocked(job); err != nil {
		return nil, err
	}
	ad := s.slotAd(sl)
	if !classad.EvalWith(s.start, ad, job).IsTrue() {
		return nil, fmt.Errorf("%w: slot %s: START rejects the job", wire.ErrConflict, sl.name)
	}
	if !classad.Match(job, ad) {
		return nil, fmt.Errorf("%w: slot %s does not match the job", wire.ErrConflict, sl.name)
	}
	if job.EvalNumber("RequestCpus", ad, 1) > float64(sl.cpus) || job.EvalNumber("RequestMemory", ad, 0) > float64(sl.memory) ||
		job.EvalNumber("RequestDisk", ad, 0) > float64(sl.disk) {
		return nil, fmt.Errorf("%w: slot %s is too small for the job", wire.ErrConflict, sl.name)
	}
	cur := s.currentRankLocked(sl, ad)
	if nr, _ := classad.EvalWith(s.rank, ad, job).NumberValue(); nr < cur {
		return nil, fmt.Errorf("%w: slot %s ranks the job (%g) lower than the one it runs (%g)", wire.ErrConflict, sl.name, nr, cur)
	}
	return s.beginPreemptionLocked(sl, ad, job), nil
}

// beginPreemptionLocked starts preempting the claimed slot sl (whose ad
// is ad) for job: its job retires, then is vacated; s.mu must be held.
func (s *Startd) beginPreemptionLocked(sl *slot, ad, job *classad.Ad) *preemption {
	p := &preemption{id: sl.preemptID, free: make(chan struct{})}
	sl.preempting = p
	owner, _ := job.EvalAttr("User").StringValue()
	s.log.Info("a claim preempts the slot's", "slot", sl.name, "job", sl.jobID, "by", owner)
	s.markDirty()
	if sl.run == nil && !sl.reporting {
		s.freeForPreemptionLocked(sl)
		return p
	}
	s.evictLocked(sl, evictRetire, preemptedByClaim, time.Time{}, false)
	return p
}

// preemptedByClaim is why a job preempted by a better claim was evicted.
const preemptedByClaim = "preempted by a claim the machine's policy prefers"

// evictHow says how a claimed slot's job is evicted.
type evictHow int

const (
	// evictRetire lets the job run out its retirement time, then
	// vacates it (condor_drain -graceful, PREEMPT, a preempting claim).
	evictRetire evictHow = iota
	// evictVacate soft-kills the job at once and gives it its vacate
	// time (condor_drain -quick).
	evictVacate
	// evictKill kills the job at once (condor_drain -fast).
	evictKill
)

// eviction is a claimed slot's job being evicted: why (for the job's
// log), whether a drain started it (a cancelled drain ends its
// retirement: cancel), and hurry, closed to cut its retirement short (a
// drain made quicker).
type eviction struct {
	why    string
	drain  bool
	cancel chan struct{}
	hurry  chan struct{}
	// softKill is when the retirement ends and the job is soft-killed;
	// vacate and quick are its vacate times after a full retirement and
	// after none; sig is its soft-kill signal.
	softKill     time.Time
	vacate       time.Duration
	quick        time.Duration
	sig          syscall.Signal
	hurried      bool
	cancelClosed bool
}

// evictLocked starts evicting the job running on the claimed slot sl, as
// HTCondor's startd: with evictRetire it runs on, Claimed/Retiring, until
// its retirement ends (retireEnd, or when zero its own: the lesser of
// MAXJOBRETIREMENTTIME and its MaxJobRetirementTime from its start), less
// its vacate time (see evictionTimes); then it gets its soft-kill signal
// (KillSig) and its vacate time to end, Preempting/Vacating (none when
// WANT_VACATE is false); then it is killed, Preempting/Killing. evictVacate
// skips the retirement, evictKill the vacate time too. A job already
// being evicted is evicted no later than how says. The job goes back to
// its schedd's queue as an evicted job; why is the reason its log shows.
// s.mu must be held.
func (s *Startd) evictLocked(sl *slot, how evictHow, why string, retireEnd time.Time, drain bool) {
	r := sl.run
	if r == nil {
		return
	}
	if how == evictKill {
		if e := sl.evicting; e != nil {
			why = e.why
		}
		s.killEvictedLocked(sl, r, why)
		return
	}
	if e := sl.evicting; e != nil {
		if how == evictVacate && !e.hurried {
			e.hurried = true
			close(e.hurry)
		}
		return
	}
	ad, job := s.slotAd(sl), sl.job
	left := time.Duration(0)
	if how == evictRetire {
		if retireEnd.IsZero() {
			retireEnd = sl.entered.Add(s.retirementLocked(ad, job))
		}
		left = time.Until(retireEnd)
	}
	machineVacate, jobVacate, hasJob := s.vacateTimes(ad, job)
	wait, vacate := evictionTimes(left, machineVacate, jobVacate, hasJob)
	_, quick := evictionTimes(0, machineVacate, jobVacate, hasJob)
	if !classad.EvalWith(s.wantVacate, ad, job).IsTrue() {
		// WANT_VACATE false: no soft kill, the job is killed when its
		// retirement ends.
		wait, vacate, quick = max(left, 0), 0, 0
	}
	e := &eviction{why: why, drain: drain, cancel: make(chan struct{}), hurry: make(chan struct{}),
		softKill: time.Now().Add(wait), vacate: vacate, quick: quick, sig: killSignal(job)}
	sl.evicting = e
	switch {
	case wait > 0:
		sl.retiring = true
		s.log.Info("the job retires", "slot", sl.name, "job", sl.jobID, "why", why,
			"until", e.softKill.Format(time.RFC3339), "vacate_time", vacate)
	case vacate > 0:
		sl.phase = "Vacating"
	default:
		sl.phase = "Killing"
	}
	s.markDirty()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.retireAndVacate(sl, r, e)
	}()
}

// killEvictedLocked kills the job r of the slot sl at once, as evicted
// (Preempting/Killing); s.mu must be held.
func (s *Startd) killEvictedLocked(sl *slot, r *run, why string) {
	if sl.run == r {
		sl.retiring, sl.phase = false, "Killing"
	}
	s.markDirty()
	r.vacated.Store(true)
	r.reason.CompareAndSwap(nil, why)
	r.kill(why)
}

// cancelEvictionLocked ends the retirement of a job a drain was evicting,
// which runs on as before (Claimed/Busy); a job already soft-killed is
// not called back. It reports whether it did. s.mu must be held.
func (s *Startd) cancelEvictionLocked(sl *slot) bool {
	e := sl.evicting
	if e == nil || !e.drain || sl.phase != "" || e.hurried || e.cancelClosed {
		return false
	}
	e.cancelClosed = true
	close(e.cancel)
	sl.evicting, sl.retiring, sl.retire = nil, false, false
	s.markDirty()
	return true
}

// evictionTimes works out, as HTCondor's startd does, how long a preempted
// job with left of its retirement time left keeps running (wait) before
// it is soft-killed, and how long it then has to end before it is
// hard-killed (vacate). machine is the machine's MachineMaxVacateTime and
// job the job's JobMaxVacateTime when it sets one (hasJob). A job may ask
// for less vacate time than the machine's, which it gets; or for more,
// which it gets out of its retirement time left: up to its whole
// JobMaxVacateTime when that much retirement is left, else all the
// retirement left (but never less than the machine's). The soft kill
// comes the vacate time before the end of the retirement, so that a job
// that uses all of its vacate time ends when its retirement does.
func evictionTimes(left, machine, job time.Duration, hasJob bool) (wait, vacate time.Duration) {
	left, machine = max(left, 0), max(machine, 0)
	if !hasJob {
		job = machine
	}
	job = max(job, 0)
	switch {
	case job <= machine:
		vacate = job
	case left >= job:
		vacate = job
	default:
		vacate = max(machine, left)
	}
	return max(left-vacate, 0), vacate
}

// retirementLocked is how long a preempted job may run from its start
// before it is vacated: the machine's MAXJOBRETIREMENTTIME, or the job's
// MaxJobRetirementTime when that is shorter (a job may shorten its
// retirement, not lengthen it), as HTCondor; s.mu must be held.
func (s *Startd) retirementLocked(ad, job *classad.Ad) time.Duration {
	if job == nil {
		return 0
	}
	secs := 0.0
	if v, ok := s.opts.Config.Get("MAXJOBRETIREMENTTIME"); ok && strings.TrimSpace(v) != "" {
		if e, err := classad.ParseExpr(v); err == nil {
			if f, ok := classad.EvalWith(e, ad, job).NumberValue(); ok && f > 0 {
				secs = f
			}
		} else {
			s.log.Warn("MAXJOBRETIREMENTTIME does not parse: no retirement", "value", v, "err", err)
		}
	}
	if _, ok := job.Lookup("MaxJobRetirementTime"); ok {
		if f := job.EvalNumber("MaxJobRetirementTime", ad, secs); f >= 0 && f < secs {
			secs = f
		}
	}
	return time.Duration(secs * float64(time.Second))
}

// vacateTimes returns the machine's MachineMaxVacateTime (default 10
// seconds; MY the slot, TARGET the job) and the job's JobMaxVacateTime,
// if it sets one (hasJob; one that does not evaluate to a number is 0, as
// HTCondor's).
func (s *Startd) vacateTimes(ad, job *classad.Ad) (machine, jobTime time.Duration, hasJob bool) {
	secs := DefaultMachineMaxVacateTime.Seconds()
	if v, ok := s.opts.Config.Get("MachineMaxVacateTime"); ok && strings.TrimSpace(v) != "" {
		if e, err := classad.ParseExpr(v); err == nil {
			if f, ok := classad.EvalWith(e, ad, job).NumberValue(); ok && f >= 0 {
				secs = f
			}
		}
	}
	machine = time.Duration(secs * float64(time.Second))
	if job == nil {
		return machine, 0, false
	}
	if e, ok := job.Lookup("JobMaxVacateTime"); ok {
		f, ok := classad.EvalWith(e, job, ad).NumberValue()
		if !ok || f < 0 {
			f = 0
		}
		return machine, time.Duration(f * float64(time.Second)), true
	}
	return machine, 0, false
}

// killSignal is the job's soft-kill signal, its KillSig (a name such as
// "SIGUSR1" or a number), SIGTERM by default.
func killSignal(job *classad.Ad) syscall.Signal {
	if job == nil {
		return syscall.SIGTERM
	}
	v := job.EvalAttr("KillSig")
	if n, ok := v.IntValue(); ok && n > 0 && n < 65 {
		return syscall.Signal(n)
	}
	name, _ := v.StringValue()
	name = strings.ToUpper(strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG"))
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n)
	}
	if sig, ok := signalNames[name]; ok {
		return sig
	}
	return syscall.SIGTERM
}

var signalNames = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM, "ALRM": syscall.SIGALRM,
	"CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP, "TSTP": syscall.SIGTSTP, "XCPU": syscall.SIGXCPU,
	"XFSZ": syscall.SIGXFSZ, "VTALRM": syscall.SIGVTALRM, "PROF": syscall.SIGPROF, "PWR": syscall.SIGPWR,
}

// retireAndVacate carries out the eviction e of the job r of slot sl: it
// lets the job run until e.softKill (the end of its retirement, less its
// vacate time: see evictionTimes), then sends its main process e.sig and,
// if it has not ended after its vacate time, kills it. A cancelled
// eviction leaves the job running; a hurried one soft-kills it at once.
func (s *Startd) retireAndVacate(sl *slot, r *run, e *eviction) {
	vacate := e.vacate
	if d := time.Until(e.softKill); d > 0 {
		select {
		case <-r.done:
			return
		case <-s.stop.Done():
			return
		case <-e.cancel:
			s.log.Info("the job no longer retires: the drain was cancelled", "slot", sl.name)
			return
		case <-e.hurry:
			vacate = e.quick
		case <-time.After(d):
		}
	}
	s.mu.Lock()
	if sl.run != r || sl.evicting != e {
		s.mu.Unlock()
		return
	}
	sl.retiring = false
	r.vacated.Store(true)
	r.reason.CompareAndSwap(nil, e.why)
	r.mu.Lock()
	sup := r.sup
	r.mu.Unlock()
	soft := sup != nil && vacate > 0
	if soft {
		sl.phase = "Vacating"
	}
	s.mu.Unlock()
	s.markDirty()
	if soft {
		// The job's main process is the supervisor's child (in a PID
		// namespace too, where the host sees it by its host pid); it
		// gets the soft-kill signal, as HTCondor's starter sends it.
		s.log.Info("vacating the job", "slot", sl.name, "why", e.why, "signal", e.sig, "vacate_time", vacate)
		for _, pid := range childrenOf(sup.pid()) {
			_ = syscall.Kill(pid, e.sig)
		}
		select {
		case <-r.done:
			return
		case <-s.stop.Done():
		case <-time.After(vacate):
		}
	}
	s.mu.Lock()
	s.killEvictedLocked(sl, r, e.why)
	s.mu.Unlock()
}

// childrenOf lists the processes whose parent is pid, the children of
// each of its threads (a resident supervisor starts each job from a thread
// of the job's own).
func childrenOf(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// preemptionDoneLocked hands a preempted slot to the waiting claim once
// its old claim's job has ended and been reported; s.mu must be held.
func (s *Startd) preemptionDoneLocked(sl *slot) {
	if sl.preempting == nil || sl.run != nil || sl.reporting {
		return
	}
	s.freeForPreemptionLocked(sl)
}

// freeForPreemptionLocked ends a preempted slot's old claim and makes the
// preempting claim id the slot's; s.mu must be held.
func (s *Startd) freeForPreemptionLocked(sl *slot) {
	p := sl.preempting
	sl.preempting, sl.retiring = nil, false
	sl.evicting, sl.phase = nil, ""
	s.dropStageLocked(sl)
	s.closeResidentsLocked(sl.claimID)
	delete(s.claims, sl.claimID)
	sl.claimID, sl.preemptID = p.id, ""
	s.claims[sl.claimID] = sl
	sl.job, sl.jobID, sl.claimJob = nil, "", nil
	sl.state, sl.activity, sl.entered = "Claimed", "Idle", time.Now()
	s.markDirty()
	close(p.free)
}

// DefaultKillingTimeout is how long a killed job has to end before the
// startd kills its processes itself, when KILLING_TIMEOUT is not set
// (HTCondor's 30 seconds).
const DefaultKillingTimeout = 30 * time.Second

// killingTimeout reads KILLING_TIMEOUT, in seconds: how long a job that
// was killed (after its vacate time, or at once) has to end before the
// startd kills every process of it directly and frees its slot.
func (s *Startd) killingTimeout() time.Duration {
	d, err := s.opts.Config.Duration("KILLING_TIMEOUT", DefaultKillingTimeout)
	if err != nil || d < 0 {
		s.log.Warn("KILLING_TIMEOUT is not a number of seconds of 0 or more: using the default", "err", err,
			"default", DefaultKillingTimeout)
		return DefaultKillingTimeout
	}
	return d
}

// enforceKillingTimeout waits KILLING_TIMEOUT for a killed job to end, as
// HTCondor's startd waits for a starter it asked to hard-kill its job;
// then it kills the job's supervisor and every process below it itself, and abandons the run: the slot no longer waits for it (a
// process stuck in the kernel, which no signal ends, holds no slot). It
// goes on killing what is left every KILLING_TIMEOUT until the
// supervisor has ended.
func (r *run) enforceKillingTimeout(sup *supervisor) {
	d := max(r.killing, time.Second)
	if r.killing == 0 {
		d = 0
	}
	first, done := true, r.done
	for {
		select {
		case <-done:
			return
		case <-sup.waited:
			return
		case <-time.After(d):
		}
		select {
		case <-sup.waited:
			return
		default:
		}
		if first && r.log != nil {
			why, _ := r.reason.Load().(string)
			r.log.Warn("the job has not ended KILLING_TIMEOUT after it was killed: the startd kills its processes itself and frees its slot",
				"killing_timeout", r.killing, "why_killed", why, "supervisor_pid", sup.pid())
		}
		first = false
		r.killFamily(sup)
		r.abandon()
		// The run ends now; the supervisor, when the kernel lets it.
		done, d = nil, max(d, time.Second)
	}
}

// killFamily kills the job's supervisor and every process below it (the
// processes in its cgroup are killed once the run is abandoned: see
// supervise).
func (r *run) killFamily(sup *supervisor) {
	for _, pid := range jobshim.Descendants(sup.pid()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(sup.pid(), syscall.SIGKILL)
}

// abandon lets the slot go on without the run (see enforceKillingTimeout).
func (r *run) abandon() { r.abandonOnce.Do(func() { close(r.abandoned) }) }

// wasAbandoned reports whether the run was abandoned.
func (r *run) wasAbandoned() bool {
	if r.abandoned == nil {
		return false
	}
	select {
	case <-r.abandoned:
		return true
	default:
		return false
	}
}

// unsupportedPolicy returns a warning for each of HTCondor's startd policy
// expressions pond does not carry out that cfg sets to anything but its
// default (SUSPEND, WANT_SUSPEND and KILL False, CONTINUE True), naming
// it: pond never suspends a job, and kills a vacating job only when its
// vacate time is over.
func unsupportedPolicy(cfg *config.Config) []string {
	var out []string
	for _, k := range []struct {
		name string
		def  bool
		why  string
	}{
		{"SUSPEND", false, "pond never suspends a job"},
		{"WANT_SUSPEND", false, "pond never suspends a job: a job is preempted or runs on"},
		{"CONTINUE", true, "pond never suspends a job, so none is continued"},
		{"KILL", false, "a vacating job is killed when its vacate time is over (MachineMaxVacateTime), not by KILL"},
	} {
		v, ok := cfg.Get(k.name)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		if e, err := classad.ParseExpr(v); err == nil {
			if b, isBool := classad.EvalWith(e, nil, nil).BoolValue(); isBool && b == k.def && constant(e) {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%s = %s is not supported and is ignored: %s", k.name, v, k.why))
	}
	return out
}

// constant reports whether e reads no attribute.
func constant(e classad.Expr) bool {
	names, opaque := classad.AttrNames(e)
	return len(names) == 0 && !opaque
}
