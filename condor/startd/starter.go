package startd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/internal/plainfile"
	"github.com/pond-htc/pond/condor/startd/cgroup"
	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// ExecutableName is the name a transferred executable gets in the job's
// scratch directory, as HTCondor's starter names it.
const ExecutableName = "condor_exec.exe"

// HoldCodeOutOfResources is HTCondor's HoldReasonCode for a job that used
// more memory than it requested.
const HoldCodeOutOfResources = 34

// run is one job being run by the starter. It is the slot's from the
// moment Activate takes the job, before its supervisor has started it
// (starting): every path that stops a slot's job (a release, a vacate,
// drain, the machine's end, shutdown) stops a starting one too, which
// then never starts, or is killed as soon as its supervisor exists.
type run struct {
	// mu guards sup and killed while the job starts; once started, sup
	// is only read.
	mu     sync.Mutex
	sup    *supervisor // nil while the job starts
	killed bool
	done   chan struct{}
	// stop closes when the job is killed: one waiting for its deferral
	// time stops waiting.
	stop    chan struct{}
	once    sync.Once
	reason  atomic.Value // string: why it was killed
	vacated atomic.Bool
	held    atomic.Bool
	user    *jobUser // the job's user when the startd runs as root
	// restarts counts the job's restarts in its scratch directory after
	// a checkpoint (see checkpointAndRestart).
	restarts atomic.Int32
	// cg is the job's cgroup, nil when the startd has none; set before
	// the job starts.
	cg *cgroup.Group
	// killing is KILLING_TIMEOUT: how long a killed job has to end before
	// the startd kills its processes itself and lets its slot go
	// (abandoned closes then); log says so.
	killing     time.Duration
	log         *slog.Logger
	abandoned   chan struct{}
	abandonOnce sync.Once
}

// exited reports whether the job's process has exited (its output may
// still be on its way to the schedd).
func (r *run) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// kill ends the job; one still starting does not start, or is killed as
// soon as its supervisor has started it (see started).
func (r *run) kill(why string) {
	r.once.Do(func() {
		r.reason.Store(why)
		r.mu.Lock()
		r.killed = true
		sup := r.sup
		r.mu.Unlock()
		if r.stop != nil {
			close(r.stop)
		}
		if sup != nil {
			sup.kill()
			go r.enforceKillingTimeout(sup)
		}
	})
}

// wasKilled reports whether the job was killed while it started.
func (r *run) wasKilled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.killed
}

// started records the supervisor that started the job, and kills it at
// once when the job was killed while it started.
func (r *run) started(sup *supervisor) {
	r.mu.Lock()
	r.sup = sup
	killed := r.killed
	r.mu.Unlock()
	if killed {
		sup.kill()
		go r.enforceKillingTimeout(sup)
	}
}

// errStartStopped is the error of a job that was killed (its claim
// released, vacated, the startd shutting down) before its supervisor
// started it: nothing of it ran.
var errStartStopped = errors.New("the job was stopped before it started")

// Activate starts a job on a claimed slot and returns once its supervisor
// has started it; the starter reports its outcome to the schedd that
// holds the claim. Only taking the job holds the startd's lock: jobs of
// different slots start at once.
func (s *Startd) Activate(ctx context.Context, req *wire.ActivateRequest) (struct{}, error) {
	job, err := wire.ToClassAd(req.Job)
	if err != nil {
		return struct{}{}, fmt.Errorf("%w: job ad: %w", wire.ErrBadRequest, err)
	}
	s.mu.Lock()
	sl := s.claims[req.ClaimID]
	switch {
	case s.closed:
		s.mu.Unlock()
		return struct{}{}, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
	case sl == nil || sl.partitionable:
		s.mu.Unlock()
		return struct{}{}, fmt.Errorf("%w: unknown claim id", wire.ErrNotFound)
	case s.spentLocked():
		err := s.spentError()
		s.mu.Unlock()
		return struct{}{}, err
	case s.drainingLocked() || sl.retire:
		s.mu.Unlock()
		return struct{}{}, fmt.Errorf("%w: the machine is draining", wire.ErrConflict)
	case sl.preempting != nil:
		s.mu.Unlock()
		return struct{}{}, fmt.Errorf("%w: slot %s is preempted by another claim", wire.ErrConflict, sl.name)
	case sl.run != nil:
		s.mu.Unlock()
		return struct{}{}, fmt.Errorf("%w: slot %s already runs job %s", wire.ErrConflict, sl.name, sl.jobID)
	}
	if err := s.refusalLocked(job); err != nil {
		s.mu.Unlock()
		return struct{}{}, err
	}
	var ju *jobUser
	if s.users != nil {
		if ju, err = s.users.acquire(sl); err != nil {
			s.mu.Unlock()
			return struct{}{}, fmt.Errorf("%w: slot %s: %w", wire.ErrConflict, sl.name, err)
		}
	}
	dir, inputs, fresh, err := s.takeStageLocked(sl, req)
	if err != nil {
		s.mu.Unlock()
		if ju != nil {
			ju.release()
		}
		return struct{}{}, err
	}
	// The slot is the job's from here: a second activation is refused,
	// and whatever stops the slot's job stops this one (see run).
	r := &run{done: make(chan struct{}), stop: make(chan struct{}), user: ju, killing: s.killingTimeout(), log: s.log, abandoned: make(chan struct{})}
	b := before{jobID: sl.jobID, job: sl.job, activity: sl.activity, entered: sl.entered}
	sl.run, sl.jobID = r, req.JobID
	// Its ad as the job sees it in .machine.ad: the slot before the job.
	machineAd := s.slotAd(sl)
	s.noteStartLocked()
	slotName := sl.name
	// Shutdown waits for the start, and kills what it started.
	s.wg.Add(1)
	wait, missed := deferralWait(job, time.Now())
	if wait <= 0 {
		defer s.wg.Done()
		s.mu.Unlock()
		return s.startJob(sl, r, b, job, machineAd, slotName, req, ju, dir, inputs, fresh, missed)
	}
	// A job whose deferral time is to come has its slot (Busy) at once
	// and starts at that time: Activate returns now, and what goes wrong
	// then is reported as a start's failure would be. Whatever stops the
	// slot's job meanwhile stops it, and it never starts.
	sl.job = job
	sl.activity, sl.entered = "Busy", time.Now()
	s.markDirty()
	s.mu.Unlock()
	s.log.Info("the job waits for its deferral time", "job", req.JobID, "slot", slotName, "wait", wait.Round(time.Second))
	go func() {
		defer s.wg.Done()
		// The claim stays alive with the schedd meanwhile; a schedd that
		// no longer holds it stops the job.
		stopAlive := s.keepAlive(sl, req, func() { r.kill("claim lost") })
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.stop:
		}
		t.Stop()
		stopAlive()
		if _, err := s.startJob(sl, r, b, job, machineAd, slotName, req, ju, dir, inputs, fresh, nil); err != nil {
			s.log.Info("a job waiting for its deferral time did not start", "job", req.JobID, "slot", slotName, "err", err)
		}
	}()
	return struct{}{}, nil
}

// before is what a slot was before Activate took it for a job: it is again
// when the job does not start.
type before struct {
	jobID    string
	job      *classad.Ad
	activity string
	entered  time.Time
}

// startJob starts job r on slot sl, which r holds, in its scratch directory
// dir (fresh: still to make) and answers its activation; missed, when not
// nil, is the hold of a job too late for its deferral time, which does not
// start. It runs without the startd's lock.
func (s *Startd) startJob(sl *slot, r *run, b before, job, machineAd *classad.Ad, slotName string, req *wire.ActivateRequest, ju *jobUser, dir string, inputs map[string]staged, fresh bool, missed *deferralMissed) (struct{}, error) {
	var err error
	switch {
	case r.wasKilled():
		err = errStartStopped
	case missed != nil:
		err = missed
	case fresh:
		if err = newSandbox(dir); err != nil {
			err = machineFault(err)
		}
	}
	if err == nil {
		err = s.prepare(r, dir, fresh, job, machineAd, slotName, req, ju)
	}

	if err != nil {
		// The slot stays the job's until what it left is gone.
		if dir != "" {
			removeScratch(dir)
		}
		if ju != nil {
			ju.release()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		sl.run, sl.jobID = nil, b.jobID
		if sl.job == job {
			sl.job, sl.activity, sl.entered = b.job, b.activity, b.entered
			s.markDirty()
		}
		close(r.done)
		if errors.Is(err, errStartStopped) {
			return s.startStoppedLocked(sl, r, req)
		}
		report := &wire.JobReport{ClaimID: req.ClaimID, JobID: req.JobID, Kind: wire.ReportHold, Startd: s.Address(),
			SlotName: sl.name, HoldReason: "Error from starter: " + err.Error(), HoldCode: 6, HoldSubCode: 2}
		var dm *deferralMissed
		counted := true // towards the machine's health
		switch {
		case errors.As(err, &dm):
			report.HoldReason, report.HoldCode, report.HoldSubCode = dm.Error(), HoldCodeMissedDeferral, 0
		case isMachineFault(err):
			// Not the job's fault: it goes back to the queue, and counts
			// against the machine's health.
			report.Kind, report.HoldReason, report.HoldCode, report.HoldSubCode = wire.ReportEvicted, "", 0, 0
			report.Reason = "Error from starter on " + sl.name + ": " + err.Error()
			if errors.Is(err, syscall.EAGAIN) {
				// The host's process ids (or the job's user's
				// processes) ran out: a shortage the running jobs
				// make and free as they end, not a machine that eats
				// jobs, and not one to quarantine.
				counted = false
				s.log.Warn("the machine could not start a job: the host has no process id left (kernel.pid_max, kernel.threads-max, the agent's pids cgroup) or the job's user no process (RLIMIT_NPROC); the job goes back to the queue",
					append([]any{"job", req.JobID, "slot", sl.name, "err", err}, pidShortage()...)...)
				break
			}
			s.log.Warn("the machine could not start a job", "job", req.JobID, "slot", sl.name, "err", err)
		case errors.Is(err, os.ErrNotExist):
			report.HoldCode = 13
		}
		if counted && s.noteOutcomeLocked(report, true) {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.quarantineChanged()
			}()
		}
		sl.reported = req.JobID
		schedd := sl.schedd
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.sendReport(sl, schedd, report)
		}()
		return struct{}{}, nil
	}
	sl.job = job
	sl.activity, sl.entered = "Busy", time.Now()
	s.markActivity()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.supervise(sl, r, job, req, dir, inputs)
	}()
	return struct{}{}, nil
}

// startStoppedLocked answers the activation of a job stopped before it
// started: a vacated one (by its schedd, a drain, the machine's end) goes
// back to its schedd's queue as a job evicted at once would; otherwise
// (the claim released, the startd shutting down) the schedd is told
// nothing ran. s.mu must be held.
func (s *Startd) startStoppedLocked(sl *slot, r *run, req *wire.ActivateRequest) (struct{}, error) {
	why, _ := r.reason.Load().(string)
	if !r.vacated.Load() {
		return struct{}{}, fmt.Errorf("%w: slot %s: %w (%s)", wire.ErrConflict, sl.name, errStartStopped, why)
	}
	report := &wire.JobReport{ClaimID: req.ClaimID, JobID: req.JobID, Kind: wire.ReportEvicted, Startd: s.Address(),
		SlotName: sl.name, Reason: why}
	sl.reporting, sl.reported = true, req.JobID
	schedd := sl.schedd
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			sl.reporting = false
			if sl.retire && s.claims[sl.claimID] == sl {
				s.releaseLocked(sl)
			}
			s.mu.Unlock()
		}()
		s.sendReport(sl, schedd, report)
	}()
	return struct{}{}, nil
}

// prepare starts the job's process in its scratch directory dir, which
// holds its input files, as ju when the startd runs as root, under a
// supervisor (see jobshim) that kills every process of the job when the
// job ends, when the startd kills it and when the startd dies; the
// supervisor is r's. machineAd is the job's slot's ad, slotName its name;
// fresh says that dir was made empty for this start (newSandbox) and holds
// nothing of the job's yet. It runs without the startd's lock: r, the
// slot's, keeps the slot.
func (s *Startd) prepare(r *run, dir string, fresh bool, job, machineAd *classad.Ad, slotName string, req *wire.ActivateRequest, ju *jobUser) (err error) {
	cmd, err := jobCommand(dir, job, req)
	if err != nil {
		return err
	}
	if cmd.Env, err = condorEnv(cmd.Env, dir, fresh, job, machineAd, slotName); err != nil {
		return machineFault(err)
	}
	// A job restarted after a checkpoint, or resuming from one, goes on
	// writing its standard streams where it left them.
	keep := func(name string) bool { return r.restarts.Load() > 0 || req.HasInput(name) }
	closeStdio, err := openStdio(cmd, dir, job, req, keep)
	if err != nil {
		return machineFault(err)
	}
	defer closeStdio()
	if cmd.Err != nil {
		return fmt.Errorf("starting %s: %w", cmd.Path, cmd.Err)
	}
	spec := jobshim.Spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir}
	if spec.Mounts, err = s.privateDirs(dir); err != nil {
		return machineFault(err)
	}
	if ju != nil {
		// A restarted job's files are its user's already: what the job
		// left in its directory (links included) is not chowned.
		if r.restarts.Load() == 0 {
			if err := chownTree(dir, int(ju.cred.Uid), int(ju.cred.Gid)); err != nil {
				return machineFault(fmt.Errorf("handing scratch directory to the job's user: %w", err))
			}
		}
		spec.Credential = ju.cred
	}
	stdio := [3]*os.File{}
	for i, f := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		stdio[i] = f.(*os.File)
	}
	if s.onStart != nil {
		s.onStart(false)
	}
	if r.wasKilled() {
		return errStartStopped
	}
	if r.cg, err = s.cont.jobCgroup(slotName, job); err != nil {
		return err
	}
	if r.cg != nil {
		spec.Cgroup, spec.CgroupHome, spec.CgroupSerial = r.cg.Procs(), s.cont.mgr.Home(), r.cg.Serial()
		defer func() {
			if err != nil {
				if rerr := r.cg.Remove(); rerr != nil {
					s.log.Warn("removing the cgroup of a job that did not start", "job", req.JobID, "err", rerr)
				}
				r.cg = nil
			}
		}()
	}
	var sup *supervisor
	if s.iso.resident {
		sup, err = s.startOnResident(slotName, req.ClaimID, spec, stdio)
	} else {
		sup, err = startSupervisor(s.iso, spec, stdio[0], stdio[1], stdio[2])
	}
	if err != nil {
		return execFault(err, req.HasInput(ExecutableName))
	}
	if s.onStart != nil {
		s.onStart(true)
	}
	r.started(sup)
	return nil
}

// jobCommand is the job's process, for its supervisor to run in dir in its
// own process group: its executable (the transferred one, else Cmd),
// arguments and environment, with the scratch directory as TMPDIR and a
// PATH and HOME when the job sets none.
func jobCommand(dir string, job *classad.Ad, req *wire.ActivateRequest) (*exec.Cmd, error) {
	cmdPath, _ := job.EvalAttr("Cmd").StringValue()
	if req.HasInput(ExecutableName) {
		cmdPath = filepath.Join(dir, ExecutableName)
	}
	if cmdPath == "" {
		return nil, errors.New("job has no Cmd")
	}
	cmdAttrs := submit.CommandAttrs(job)
	args, err := submit.Argv(cmdAttrs)
	if err != nil {
		return nil, fmt.Errorf("job arguments: %w", err)
	}
	env, err := submit.Environ(cmdAttrs)
	if err != nil {
		return nil, fmt.Errorf("job environment: %w", err)
	}
	env = append(env, "_CONDOR_SCRATCH_DIR="+dir, "TMPDIR="+dir)
	if !hasEnv(env, "PATH") {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	if !hasEnv(env, "HOME") {
		env = append(env, "HOME="+dir)
	}
	cmd := exec.Command(cmdPath, args...)
	cmd.Args[0] = cmdPath
	cmd.Dir = dir
	cmd.Env = env
	return cmd, nil
}

// openStdio opens the job's standard input (its transferred In file, else
// /dev/null) and creates the files its output and error go to, those of
// the streams it sends back (Out and Err set, and not /dev/null): the
// others go to /dev/null, as HTCondor's do, which saves creating and
// removing two files a job when nothing reads them. The function it
// returns closes them once the process has started.
func openStdio(cmd *exec.Cmd, dir string, job *classad.Ad, req *wire.ActivateRequest, keep func(name string) bool) (func(), error) {
	stdin := ""
	if in, _ := job.EvalAttr("In").StringValue(); in != "" && in != "/dev/null" {
		if req.HasInput(filepath.Base(in)) {
			stdin = filepath.Join(dir, filepath.Base(in))
		}
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	var null *os.File
	devNull := func() (*os.File, error) {
		if null != nil {
			return null, nil
		}
		f, err := plainfile.Open(os.DevNull, os.O_RDWR, 0)
		if err == nil {
			null = f
			files = append(files, f)
		}
		return f, err
	}
	create := func(attr, name string) func() (*os.File, error) {
		return func() (*os.File, error) {
			if p, _ := job.EvalAttr(attr).StringValue(); p == "" || p == "/dev/null" {
				return devNull()
			}
			open := os.Create
			if keep(name) {
				open = openAppend
			}
			f, err := open(filepath.Join(dir, name))
			if err == nil {
				files = append(files, f)
			}
			return f, err
		}
	}
	var stdio [3]*os.File
	for i, open := range []func() (*os.File, error){
		func() (*os.File, error) {
			if stdin == "" {
				return devNull()
			}
			f, err := os.Open(stdin)
			if err == nil {
				files = append(files, f)
			}
			return f, err
		},
		create("Out", "_condor_stdout"),
		create("Err", "_condor_stderr"),
	} {
		f, err := open()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("job standard streams: %w", err)
		}
		stdio[i] = f
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio[0], stdio[1], stdio[2]
	return closeAll, nil
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// supervise waits for the job, polling its memory use and the PREEMPT
// policy, then reports the outcome and cleans the scratch directory.
func (s *Startd) supervise(sl *slot, r *run, job *classad.Ad, req *wire.ActivateRequest, dir string, inputs map[string]staged) {
	report := &wire.JobReport{ClaimID: req.ClaimID, JobID: req.JobID, Startd: s.Address(), SlotName: sl.name}
	w := &watch{started: time.Now(), reqMem: int64(job.EvalNumber("RequestMemory", nil, 128)), lastUpdate: time.Now()}
	w.updateEvery, _ = s.opts.Config.Duration("STARTER_UPDATE_INTERVAL", 300*time.Second)
	w.usageEvery = w.updateEvery
	// Every update renews the claim's lease: one at least each ALIVE_INTERVAL.
	w.updateEvery = min(max(w.updateEvery, 0), s.alive)
	if w.updateEvery <= 0 {
		w.updateEvery = s.alive
	}
	w.renewed.Store(w.started.UnixNano())
	w.jobLease = JobLease(s.opts.Config, job, s.claimLease)
	exited := waitExit(r.sup)
	stopStream := s.streamOutputs(sl, req, job, dir)
	t := time.NewTicker(s.poll)
	defer t.Stop()
loop:
	for {
		select {
		case <-exited:
			if s.checkpointAndRestart(sl, r, job, req, dir, inputs, w, report) {
				exited = waitExit(r.sup)
				continue
			}
			break loop
		case <-r.abandoned:
			// Killed, and still not ended after KILLING_TIMEOUT: the
			// slot goes on without it (see enforceKillingTimeout).
			break loop
		case <-t.C:
			s.check(sl, r, job, req, w, report)
		}
	}
	abandoned := r.wasAbandoned()
	killedSuffix := ".killed-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if abandoned {
		// The job's scratch directory goes once its processes are gone:
		// meanwhile it is out of the way of the next job of the same
		// slot and id.
		if err := os.Rename(dir, dir+killedSuffix); err == nil {
			_ = os.Rename(nsDir(dir), nsDir(dir+killedSuffix))
			dir += killedSuffix
		} else {
			s.log.Warn("moving the scratch directory of a job that outlived KILLING_TIMEOUT", "slot", sl.name, "job", req.JobID, "err", err)
		}
	}
	if r.cg != nil {
		// The job's use, final, and whatever it left running, killed.
		w.cg.read(r.cg)
		if abandoned {
			// Its processes go when the kernel lets them, the cgroup
			// with them; meanwhile it is out of the way of the next
			// job of the same slot.
			if err := r.cg.Rename(killedSuffix); err != nil {
				s.log.Warn("moving the cgroup of a job that outlived KILLING_TIMEOUT", "slot", sl.name, "job", req.JobID, "err", err)
			}
			go func() {
				_ = r.cg.Kill()
				<-exited
				if err := r.cg.Remove(); err != nil {
					s.log.Warn("removing the cgroup of a job that outlived KILLING_TIMEOUT", "slot", sl.name, "job", req.JobID, "err", err)
				}
			}()
		} else if err := r.cg.Release(); err != nil {
			s.log.Warn("ending the job's cgroup", "slot", sl.name, "job", req.JobID, "err", err)
		}
	}
	stopStream()
	close(r.done)
	finishReport(r, w, report)
	// The claim stays alive with the schedd until it has the final
	// report, however long the output takes to send.
	ctx, lost := context.WithCancel(s.stop)
	defer lost()
	stopAlive := s.keepAlive(sl, req, lost)
	defer stopAlive()
	if report.Kind == wire.ReportEvicted && r.vacated.Load() {
		s.checkpointOnEvict(ctx, sl, r, job, req, dir, inputs, w)
	}
	var resend func() bool
	if report.Kind == wire.ReportExited {
		send := func() {
			report.Outputs = nil
			err := s.sendOutputs(ctx, sl, r, dir, job, req, inputs, report)
			switch {
			case errors.Is(err, errClaimLost):
				s.log.Warn("not reporting a job whose claim its schedd no longer holds", "slot", sl.name, "job", req.JobID, "err", err)
				report = nil
			case err != nil:
				report.Kind = wire.ReportHold
				report.HoldReason = "Error from " + sl.name + ": " + err.Error()
				report.HoldCode, report.HoldSubCode = 12, 2
				report.Outputs = nil
			}
		}
		send()
		// A schedd restarted since it received the outputs asks for
		// them again.
		resend = func() bool {
			if report == nil || report.Kind != wire.ReportExited {
				return false
			}
			send()
			return report != nil
		}
	}
	s.jobDone(sl, r, req.JobID, func() *wire.JobReport { return report }, resend)
	if abandoned {
		// Nothing of the job may meet the next job of its uid, nor its
		// directory be reused, before its processes are gone.
		go func() {
			<-exited
			removeScratch(dir)
			if r.user != nil {
				r.user.release()
			}
		}()
		return
	}
	if r.user != nil && r.user.leftNothing(r.sup.pidNS) {
		// Nothing of the job runs: its private temporary directories,
		// emptied, can serve a next job.
		s.recycleScratch(dir)
		r.user.free()
		return
	}
	removeScratch(dir)
	if r.user != nil {
		// Nothing the job left running may meet the next job of its uid:
		// the uid is freed once they are killed and what they wrote since
		// is removed.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			r.user.stop()
			removeScratch(dir)
			r.user.free()
		}()
	}
}

// watch is what supervise keeps while a job runs.
type watch struct {
	started     time.Time
	reqMem      int64 // RequestMemory, MiB
	peakRSS     int64 // KiB
	cg          cgroupUse
	updateEvery time.Duration
	lastUpdate  time.Time
	// usageEvery is STARTER_UPDATE_INTERVAL: how often an update carries
	// the job's usage for its schedd to record (the others only renew the
	// claim); usageAt when one last did.
	usageEvery time.Duration
	usageAt    time.Time
	// renewed is when the last update the schedd accepted was sent
	// (UnixNano): the claim's lease runs from then. pending counts the
	// updates on their way.
	renewed atomic.Int64
	pending atomic.Int32
	// checkpoints is the number of the job's last checkpoint (0: none
	// yet known); priorUser and priorSys the CPU time of its runs before
	// its restarts after a checkpoint.
	checkpoints         int64
	priorUser, priorSys float64
	// jobLease is the job's lease (joblease.go); cutOff is set while the
	// claim's lease has run out, and lastErr is the last renewal's error.
	jobLease time.Duration
	cutOff   bool
	lastErr  atomic.Pointer[string]
}

// renewalErr is the error of the last renewal, if it failed.
func (w *watch) renewalErr() string {
	if p := w.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// renew moves the lease's start to sent, unless a later renewal already
// moved it further: renewals on their way at once end in any order.
func (w *watch) renew(sent time.Time) {
	for {
		old := w.renewed.Load()
		if old >= sent.UnixNano() || w.renewed.CompareAndSwap(old, sent.UnixNano()) {
			return
		}
	}
}

// maxPendingRenewals bounds the updates of one job on their way at once:
// one per interval of the lease, and one more. An update stuck on a
// connection that went dead (a partition that healed while TCP waits out
// its retransmission backoff) does not hold up the next, which goes out an
// interval later on a connection of its own; each gives up after the
// lease.
func (s *Startd) maxPendingRenewals() int32 { return int32(s.claimLease/s.alive) + 1 }

// check is one poll of a running job: it holds a job over its memory
// request, sends the schedd an update every STARTER_UPDATE_INTERVAL, and
// vacates the job when the PREEMPT policy says so.
func (s *Startd) check(sl *slot, r *run, job *classad.Ad, req *wire.ActivateRequest, w *watch, report *wire.JobReport) {
	var rss int64
	var cgSt cgroup.Stats
	if r.cg != nil {
		// The kernel holds the job to its memory (see finishReport).
		cgSt, _ = w.cg.read(r.cg)
		rss = cgSt.RSSBytes >> 10
	} else {
		rss = treeRSSKB(r.sup.pid())
	}
	w.peakRSS = max(w.peakRSS, rss)
	if r.cg == nil && w.reqMem > 0 && rss > w.reqMem*1024 {
		r.held.Store(true)
		report.HoldReason = fmt.Sprintf("Error from %s: Job has gone over memory limit of %d megabytes. Peak usage: %d megabytes.",
			sl.name, w.reqMem, (w.peakRSS+1023)/1024)
		report.HoldCode, report.HoldSubCode = HoldCodeOutOfResources, 0
		r.kill("over memory request")
		return
	}
	s.mu.Lock()
	ad := s.slotAd(sl)
	schedd := sl.schedd
	s.mu.Unlock()
	switch since := time.Since(time.Unix(0, w.renewed.Load())); {
	case since > w.jobLease:
		// The schedd has not heard of the job for its job lease: it runs
		// the job elsewhere now, or has, or will when it is back; this
		// copy must stop.
		s.log.Warn("killing a job whose job lease ran out", "slot", sl.name, "job", req.JobID, "schedd", schedd,
			"since", since.Round(time.Millisecond), "job_lease", w.jobLease, "err", w.renewalErr())
		r.vacated.Store(true)
		r.kill("job lease expired")
		return
	case since > s.claimLease:
		if !w.cutOff {
			w.cutOff = true
			s.log.Warn("cannot renew a running job's claim with its schedd; the job goes on until its job lease", "slot", sl.name,
				"job", req.JobID, "schedd", schedd, "since", since.Round(time.Millisecond), "job_lease", w.jobLease, "err", w.renewalErr())
		}
	case w.cutOff:
		w.cutOff = false
		s.log.Info("renewed a running job's claim with its schedd again", "slot", sl.name, "job", req.JobID, "schedd", schedd)
	}
	if time.Since(w.lastUpdate) >= w.updateEvery && w.pending.Load() < s.maxPendingRenewals() {
		w.pending.Add(1)
		// Renew the claim's lease and report resource usage.
		w.lastUpdate = time.Now()
		u := &wire.JobReport{ClaimID: req.ClaimID, JobID: req.JobID, Kind: wire.ReportUpdate, Startd: s.Address(),
			SlotName: sl.name, ImageSizeKB: w.peakRSS, ResidentKB: rss, WallClock: time.Since(w.started).Seconds()}
		switch {
		case !w.usageAt.IsZero() && time.Since(w.usageAt) < w.usageEvery:
			u.ImageSizeKB, u.ResidentKB = 0, 0
		case r.cg != nil:
			w.usageAt = time.Now()
			u.ImageSizeKB = max(u.ImageSizeKB, w.cg.peak>>10)
			u.MemoryUsageMB = mib(w.cg.peak)
			u.UserCPU, u.SysCPU = cgSt.UserCPU.Seconds(), cgSt.SysCPU.Seconds()
			// CpusUsage: the CPUs the job used since the last update.
			cpu, now := cgSt.UserCPU+cgSt.SysCPU, time.Now()
			if w.cg.at.IsZero() {
				w.cg.at = w.started
			}
			if d := now.Sub(w.cg.at); d > 0 {
				u.CpusUsage = max(cpu-w.cg.cpu, 0).Seconds() / d.Seconds()
			}
			w.cg.cpu, w.cg.at = cpu, now
		default:
			w.usageAt = time.Now()
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer w.pending.Add(-1)
			sent := time.Now()
			ctx, cancel := context.WithTimeout(s.stop, s.claimLease)
			defer cancel()
			err := s.peer(schedd).Schedd().JobReport(ctx, u)
			var we *wire.Error
			switch {
			case err == nil:
				w.renew(sent)
				w.lastErr.Store(nil)
			case errors.As(err, &we) && we.Status == http.StatusNotFound:
				// The schedd no longer holds the claim (it requeued the
				// job): this copy must stop.
				s.log.Warn("killing a job its schedd no longer runs here", "slot", sl.name, "job", req.JobID)
				r.vacated.Store(true)
				r.kill("claim lost")
			default:
				msg := err.Error()
				if w.lastErr.Swap(&msg) == nil {
					s.log.Info("renewing a running job's claim failed", "slot", sl.name, "job", req.JobID, "schedd", schedd, "err", err)
				}
			}
		}()
	}
	if classad.EvalWith(s.preempt, ad, job).IsTrue() {
		s.mu.Lock()
		if sl.run == r && sl.evicting == nil {
			// As HTCondor's startd: the job retires, is vacated, and
			// its claim ends with it.
			s.log.Info("PREEMPT is true: evicting the job", "slot", sl.name, "job", req.JobID)
			sl.retire = true
			s.evictLocked(sl, evictRetire, preemptPolicy, time.Time{}, false)
		}
		s.mu.Unlock()
	}
}

// preemptPolicy is why a job the PREEMPT policy evicted was evicted.
const preemptPolicy = "the machine's PREEMPT policy evicted the job"

// finishReport fills in the report of a job that ended: its usage, and
// whether it was held, vacated or exited (with its code or signal).
func finishReport(r *run, w *watch, report *wire.JobReport) {
	report.WallClock = time.Since(w.started).Seconds()
	report.ImageSizeKB, report.ResidentKB = w.peakRSS, w.peakRSS
	var st *jobshim.Status
	if !r.wasAbandoned() {
		// An abandoned job's supervisor has not said how it ended.
		st = r.sup.final
	}
	if st != nil {
		report.UserCPU, report.SysCPU = w.priorUser+st.UserCPU, w.priorSys+st.SysCPU
		report.ImageSizeKB = max(report.ImageSizeKB, st.MaxRSSKB)
		report.ResidentKB = max(report.ResidentKB, st.MaxRSSKB)
	}
	oom := false
	if r.cg != nil {
		c := w.cg.last
		report.ImageSizeKB = max(report.ImageSizeKB, w.cg.peak>>10)
		report.MemoryUsageMB = mib(w.cg.peak)
		report.UserCPU = max(report.UserCPU, c.UserCPU.Seconds())
		report.SysCPU = max(report.SysCPU, c.SysCPU.Seconds())
		if report.WallClock > 0 {
			report.CpusUsage = (report.UserCPU + report.SysCPU) / report.WallClock
		}
		oom = c.OOMKills > 0 && r.cg.MemoryLimit() > 0
	}
	switch {
	case r.held.Load():
		report.Kind = wire.ReportHold
	case oom:
		// The kernel killed a process of the job over its memory
		// request: the job is held, as HTCondor holds it, not run again.
		report.Kind = wire.ReportHold
		report.HoldReason = oomHoldReason(report.SlotName, r.cg.MemoryLimit(), max(w.cg.peak, r.cg.MemoryLimit()))
		report.HoldCode, report.HoldSubCode = HoldCodeOutOfResources, HoldSubCodeCgroupOOM
	case r.vacated.Load():
		report.Kind = wire.ReportEvicted
		report.Reason, _ = r.reason.Load().(string)
	case st == nil:
		// The supervisor died before it could say how the job ended.
		report.Kind = wire.ReportEvicted
		report.Reason = fmt.Sprintf("the job's supervisor died: %v", r.sup.waitErr)
	default:
		report.Kind = wire.ReportExited
		report.Signal, report.ExitCode = st.Signal, st.ExitCode
	}
}

// jobDone frees the slot of job jobID, which ended, and sends its report
// to the claim's schedd; a slot retiring is released once the report is sent.
// A schedd that asks for the job's outputs again (it was restarted since
// they arrived) gets them from resend, when not nil, and the report
// again, a few times at most.
func (s *Startd) jobDone(sl *slot, r *run, jobID string, current func() *wire.JobReport, resend func() bool) {
	report := current()
	s.mu.Lock()
	sl.run = nil
	sl.reporting, sl.reported = true, jobID
	sl.activity, sl.entered = "Idle", time.Now()
	sl.evicting, sl.phase = nil, ""
	schedd := sl.schedd
	if report != nil && (sl.preempting != nil || sl.retire) {
		// The claim ends with this job: the schedd runs no other on it.
		report.ClaimClosed = true
	}
	// A report whose claim the schedd no longer holds (nil) says nothing
	// of the machine.
	quarantined := report != nil && s.noteOutcomeLocked(report, false)
	s.mu.Unlock()
	// Claimed still, Busy to Idle: the next job of the claim mostly
	// follows before the slots are advertised again. A claim that ends
	// with the job (released below) is advertised soon.
	s.markActivity()
	if quarantined {
		s.quarantineChanged()
	}
	defer func() {
		s.mu.Lock()
		sl.reporting = false
		sl.answered = time.Now()
		if sl.retire && s.claims[sl.claimID] == sl {
			s.releaseLocked(sl)
		}
		s.preemptionDoneLocked(sl)
		s.mu.Unlock()
	}()
	switch {
	case report == nil:
		// The schedd no longer holds the claim: nothing to report, and
		// the slot is free.
		s.releaseForReportLocking(sl, sl.claimID, jobID)
		return
	case report.Kind == wire.ReportEvicted && !r.vacated.Load():
		return // killed by shutdown: the schedd's lease expires the job
	}
	claimID := report.ClaimID
	for range 3 {
		if !s.sendReport(sl, schedd, report) || resend == nil || !resend() {
			return
		}
		if report = current(); report == nil {
			s.releaseForReportLocking(sl, claimID, jobID)
			return
		}
	}
}

// stageJob is the job whose input files st holds, "" for none.
func stageJob(st *stage) string {
	if st == nil {
		return ""
	}
	return st.jobID
}

// releaseForReportLocking releases the claim claimID of slot sl, which
// its schedd no longer holds for job jobID, unless the slot has gone on
// to another job since jobID ended: a schedd that answers a report late
// (a retry of a report it applied) has given the claim that job, which
// the answer says nothing of. It takes s.mu.
func (s *Startd) releaseForReportLocking(sl *slot, claimID, jobID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims[claimID] != sl || sl.partitionable {
		return
	}
	// The claim runs a later job, or receives its input files.
	later := stageJob(sl.stage)
	if sl.run != nil {
		later = sl.jobID
	}
	if later != "" && later != jobID || sl.reported != jobID {
		s.log.Warn("not releasing a claim for an earlier job's refused report: the claim has a later job", "slot", sl.name,
			"job", jobID, "later", firstNonEmpty(later, sl.reported))
		return
	}
	s.releaseLocked(sl)
}

// sendReport delivers a report to the schedd, retrying while the schedd is
// unreachable (it may be restarting) for up to REPORT_RETRY_TIME (default
// 10 minutes) unless the startd shuts down. It reports whether the schedd
// asked for the job's outputs again (HTTP 412: it does not hold them). A
// refused report lets the claim of slot sl go, unless the slot has gone on
// to a later job (releaseForReportLocking).
func (s *Startd) sendReport(sl *slot, schedd string, report *wire.JobReport) (resend bool) {
	limit, _ := s.opts.Config.Duration("REPORT_RETRY_TIME", 10*time.Minute)
	// Each attempt waits STARTER_REPORT_TIMEOUT for the schedd's answer;
	// the schedd answers a repeated final report as it answered the
	// first, so an attempt given up on is simply made again.
	timeout, _ := s.opts.Config.Duration("STARTER_REPORT_TIMEOUT", 30*time.Second)
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(limit)
	backoff := 50 * time.Millisecond
	for {
		// A schedd restarted at another address tells us where it is now
		// when it reconnects to the claim (ClaimInfo), so each attempt goes
		// to the claim's current schedd.
		s.mu.Lock()
		if sl := s.claims[report.ClaimID]; sl != nil && sl.schedd != "" {
			schedd = sl.schedd
		}
		s.mu.Unlock()
		// The report names the startd's address now: one that changed
		// while the job ran (SetAddress) is where the schedd finds it.
		sent := *report
		sent.Startd = s.Address()
		ctx, cancel := context.WithTimeout(s.stop, timeout)
		err := s.peer(schedd).Schedd().JobReport(ctx, &sent)
		cancel()
		var we *wire.Error
		if errors.As(err, &we) && we.Status == http.StatusPreconditionFailed {
			s.log.Warn("the schedd asks for the job's outputs again", "job", report.JobID, "err", err)
			return true
		}
		if err == nil || errors.As(err, &we) && we.Status < 500 {
			if err != nil {
				s.log.Warn("schedd refused job report", "job", report.JobID, "err", err)
				s.releaseForReportLocking(sl, report.ClaimID, report.JobID)
			}
			return
		}
		if time.Now().After(deadline) || s.stop.Err() != nil {
			s.log.Warn("giving up reporting job", "job", report.JobID, "err", err)
			return
		}
		select {
		case <-s.stop.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// treeRSSKB sums the resident set size, in KB, of the descendants of the
// job's supervisor sup: every process of the job, wherever it forked.
func treeRSSKB(sup int) int64 {
	page := int64(os.Getpagesize() / 1024)
	var total int64
	for _, pid := range jobshim.Descendants(sup) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		// f[0] state, f[1] ppid, f[2] pgrp, ... f[21] rss (pages)
		if len(f) < 22 {
			continue
		}
		rss, _ := strconv.ParseInt(f[21], 10, 64)
		total += rss * page
	}
	return total
}
