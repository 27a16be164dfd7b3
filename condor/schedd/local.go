package schedd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/internal/confine"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// Jobs of the scheduler (7) and local (12) universes are never matched to
// a startd: the schedd runs them itself, on the submit host, as their
// owner, under the same supervisor (jobshim) as the startd's jobs, which
// kills every process of the job when the job ends or is removed. Unlike a
// startd's job, such a job outlives its schedd: the supervisor writes how
// the job started and ended to a status file in SPOOL/local, and the
// queue records the supervisor's pid and start time (PondLocalPid,
// PondLocalStartTime), so that a schedd started again adopts a job whose
// process still runs, completes one that ended meanwhile, and runs again
// one whose process is gone without an end (as HTCondor's schedd reruns a
// scheduler-universe job: a DAG manager then recovers its DAG).

// The attributes of a running local job's supervisor.
const (
	attrLocalPid   = "PondLocalPid"
	attrLocalStart = "PondLocalStartTime"
)

// localStopGrace is how long a supervisor told to stop has to end its job
// before it and the job's processes are killed.
const localStopGrace = 5 * time.Second

// localJobs are the schedd's running local jobs.
type localJobs struct {
	mu      sync.Mutex
	runs    map[jobqueue.JobID]*localRun
	started bool             // Run started: jobs may start
	pending []jobqueue.JobID // idle jobs to start when Run starts
	adopt   []jobqueue.Job   // running jobs of an earlier run, to look at when Run starts
}

// localRun is a local job's supervisor.
type localRun struct {
	pid   int
	start uint64 // the process's start time (clock ticks after boot)
	// gone is closed when the supervisor has ended.
	gone chan struct{}
	// stopped says the job was removed or held: its end is not the job's.
	stopped atomic.Bool
	// killSig ends the job as the schedd stops, removeSig when removed.
	killSig, removeSig syscall.Signal
}

// isLocal reports whether a job runs on the submit host (scheduler or
// local universe) rather than on a startd.
func isLocal(ad *classad.Ad) bool {
	u, _ := ad.EvalAttr("JobUniverse").IntValue()
	return u == submit.UniverseScheduler || u == submit.UniverseLocal
}

// isLocalAd is isLocal of a queue ad.
func isLocalAd(a jobqueue.Ad) bool {
	u := strings.TrimSpace(a["JobUniverse"])
	return u == strconv.Itoa(submit.UniverseScheduler) || u == strconv.Itoa(submit.UniverseLocal)
}

// startLocal starts an idle local job, now if the schedd runs, else when
// it starts running.
func (s *Schedd) startLocal(id jobqueue.JobID) {
	s.local.mu.Lock()
	defer s.local.mu.Unlock()
	if !s.local.started {
		s.local.pending = append(s.local.pending, id)
		return
	}
	if s.local.runs == nil {
		s.local.runs = map[jobqueue.JobID]*localRun{}
	}
	if _, ok := s.local.runs[id]; ok {
		return
	}
	r := &localRun{gone: make(chan struct{})}
	s.local.runs[id] = r
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runLocal(s.done, id, r)
	}()
}

// recoverLocal notes a running local job of an earlier run, for
// runLocalJobs to adopt, complete or start again.
func (s *Schedd) recoverLocal(j jobqueue.Job) {
	s.local.mu.Lock()
	s.local.adopt = append(s.local.adopt, j)
	s.local.mu.Unlock()
}

// runLocalJobs, as Run starts, adopts the local jobs of an earlier run
// and starts the idle ones.
func (s *Schedd) runLocalJobs(ctx context.Context) {
	s.local.mu.Lock()
	s.local.started = true
	pending, adopt := s.local.pending, s.local.adopt
	s.local.pending, s.local.adopt = nil, nil
	if s.local.runs == nil {
		s.local.runs = map[jobqueue.JobID]*localRun{}
	}
	s.local.mu.Unlock()
	for _, j := range adopt {
		s.adoptLocal(ctx, j)
	}
	for _, id := range pending {
		s.startLocal(id)
	}
}

// adoptLocal takes over a local job that was running when the schedd
// stopped: its supervisor, if it still runs; its end, if the status file
// has it; else the job runs again.
func (s *Schedd) adoptLocal(ctx context.Context, j jobqueue.Job) {
	pid, _ := strconv.Atoi(strings.TrimSpace(j.Ad[attrLocalPid]))
	start, _ := strconv.ParseUint(strings.TrimSpace(j.Ad[attrLocalStart]), 10, 64)
	if pid > 0 && processStart(pid) == start && start != 0 && ownLocalSupervisor(pid, s.localStatusPath(j.ID)) {
		r := &localRun{pid: pid, start: start, gone: make(chan struct{})}
		r.killSig = signalNamed(j.Ad, "KillSig", syscall.SIGTERM)
		r.removeSig = signalNamed(j.Ad, "RemoveKillSig", r.killSig)
		s.local.mu.Lock()
		s.local.runs[j.ID] = r
		s.local.mu.Unlock()
		s.log.Info("adopting a local job whose process still runs", "job", j.ID, "pid", pid)
		s.wg.Add(2)
		go func() {
			defer s.wg.Done()
			defer close(r.gone)
			for processStart(pid) == start {
				select {
				case <-s.done.Done():
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		go func() {
			defer s.wg.Done()
			s.watchLocal(s.done, j.ID, r)
		}()
		return
	}
	if st, ok := readLocalStatus(s.localStatusPath(j.ID)); ok && st.final != nil && pid > 0 {
		s.log.Info("a local job ended while the schedd was down", "job", j.ID)
		s.localEnded(ctx, j.ID, st.final)
		return
	}
	s.log.Info("the process of a running local job is gone; running it again", "job", j.ID)
	if err := s.logged(ctx, nil, joblog.Event{Type: joblog.Evicted, Message: "The schedd restarted and the job's process was gone"}, func(ctx context.Context) error {
		return s.q.Transition(ctx, j.ID, jobqueue.Idle, nil)
	}); err != nil {
		s.log.Warn("requeueing a local job", "job", j.ID, "err", err)
		return
	}
	s.startLocal(j.ID)
}

// forgetLocal drops local job id's ended run, so that it may start again.
func (s *Schedd) forgetLocal(id jobqueue.JobID) {
	s.local.mu.Lock()
	delete(s.local.runs, id)
	s.local.mu.Unlock()
}

// stopLocal has a local job's supervisor end the job (condor_rm,
// condor_hold): it kills every process of the job.
func (s *Schedd) stopLocal(id jobqueue.JobID) {
	s.local.mu.Lock()
	r := s.local.runs[id]
	started := r != nil && r.pid != 0
	if r != nil {
		r.stopped.Store(true)
	}
	s.local.mu.Unlock()
	if !started {
		return // runLocal kills it once started
	}
	r.kill(r.removeSig)
}

// kill sends sig to the job's main process (its KillSig, or its
// RemoveKillSig when removed: a DAG manager then removes its nodes' jobs
// and writes a rescue DAG); should the job not end within
// localStopGrace, its supervisor is told to stop, which kills every
// process of the job, and should that not end it either, the supervisor
// and what is left of the job are killed.
func (r *localRun) kill(sig syscall.Signal) {
	if processStart(r.pid) != r.start {
		return
	}
	for _, c := range children(r.pid) {
		_ = syscall.Kill(c, sig)
	}
	go func() {
		for _, next := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			select {
			case <-r.gone:
				return
			case <-time.After(localStopGrace):
			}
			if processStart(r.pid) != r.start {
				return
			}
			if next == syscall.SIGTERM {
				_ = syscall.Kill(r.pid, next)
				continue
			}
			left := jobshim.Descendants(r.pid)
			_ = syscall.Kill(r.pid, syscall.SIGKILL)
			for _, p := range left {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	}()
}

// children lists the processes whose parent is pid (any of its threads).
func children(pid int) []int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// signalNamed is the signal a job's KillSig or RemoveKillSig names (a
// name, with or without SIG, or a number), def when it names none.
func signalNamed(ad jobqueue.Ad, attr string, def syscall.Signal) syscall.Signal {
	v, err := classad.UnquoteString(strings.TrimSpace(ad[attr]))
	if err != nil {
		v = strings.TrimSpace(ad[attr])
	}
	v = strings.ToUpper(strings.TrimPrefix(strings.ToUpper(v), "SIG"))
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n)
	}
	if sig, ok := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP,
		"QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2}[v]; ok {
		return sig
	}
	return def
}

// stopLocalJobs ends the local jobs as the schedd stops; they stay
// running in the queue, and run again when it starts.
func (s *Schedd) stopLocalJobs() {
	s.local.mu.Lock()
	defer s.local.mu.Unlock()
	for _, r := range s.local.runs {
		if r.pid != 0 {
			r.kill(r.killSig)
		}
	}
}

// localStatusPath is the file the supervisor of local job id writes its
// status lines to.
func (s *Schedd) localStatusPath(id jobqueue.JobID) string {
	return filepath.Join(spoolDir(s.opts), "local", fmt.Sprintf("%d.%d.status", id.Cluster, id.Proc))
}

// runLocal runs local job id: it marks it running, starts its
// supervisor as its owner, records it, and completes the job when it ends;
// a job that cannot start is held.
func (s *Schedd) runLocal(ctx context.Context, id jobqueue.JobID, r *localRun) {
	defer func() {
		s.local.mu.Lock()
		if s.local.runs[id] == r {
			delete(s.local.runs, id)
		}
		s.local.mu.Unlock()
	}()
	j, err := s.q.Get(ctx, id)
	if err != nil || j.Status != jobqueue.Idle {
		return
	}
	ad, err := wire.ToClassAd(j.Ad)
	if err != nil {
		s.hold(ctx, id, nil, "Error from schedd: the job's ad: "+err.Error(), 6, 0)
		return
	}
	r.killSig = signalNamed(j.Ad, "KillSig", syscall.SIGTERM)
	r.removeSig = signalNamed(j.Ad, "RemoveKillSig", r.killSig)
	now := s.now().Unix()
	starts, _ := ad.EvalAttr("NumJobStarts").IntValue()
	attrs := jobqueue.Ad{"JobCurrentStartDate": strconv.FormatInt(now, 10), "NumJobStarts": strconv.FormatInt(starts+1, 10),
		attrLocalPid: "0", attrLocalStart: "0"}
	if _, ok := ad.Lookup("JobStartDate"); !ok {
		attrs["JobStartDate"] = strconv.FormatInt(now, 10)
	}
	if err := s.q.Transition(ctx, id, jobqueue.Running, attrs); err != nil {
		if !gone(err) {
			s.log.Warn("starting a local job", "job", id, "err", err)
		}
		return
	}
	s.markDirty()
	s.metrics.started()
	pid, start, code, sub, err := s.spawnLocal(id, ad, r)
	if err != nil {
		s.hold(ctx, id, ad, fmt.Sprintf("Error from starter on %s: %v", s.opts.Name, err), code, sub)
		return
	}
	if err := s.q.SetAttrs(ctx, id, jobqueue.Ad{attrLocalPid: strconv.Itoa(pid), attrLocalStart: strconv.FormatUint(start, 10)}); err != nil {
		s.log.Warn("recording a local job's process", "job", id, "err", err)
	}
	s.writeEvent(ctx, id, ad, joblog.Event{Type: joblog.Execute, Host: "<" + s.opts.Address + ">"})
	if r.stopped.Load() {
		// Removed while it started.
		r.kill(r.removeSig)
	}
	s.watchLocal(ctx, id, r)
}

// watchLocal waits for local job id's supervisor to end and completes
// the job, unless it was removed or held, or the schedd stops.
func (s *Schedd) watchLocal(ctx context.Context, id jobqueue.JobID, r *localRun) {
	defer func() {
		s.local.mu.Lock()
		if s.local.runs[id] == r {
			delete(s.local.runs, id)
		}
		s.local.mu.Unlock()
	}()
	select {
	case <-r.gone:
	case <-ctx.Done():
		return
	}
	if r.stopped.Load() || ctx.Err() != nil {
		return
	}
	st, _ := readLocalStatus(s.localStatusPath(id))
	if st.final == nil {
		// The supervisor was killed before it could say how the job
		// ended: the job runs again.
		s.log.Warn("a local job's supervisor ended without the job's status; running it again", "job", id)
		if err := s.logged(ctx, nil, joblog.Event{Type: joblog.Evicted, Message: "The job's supervisor was killed"}, func(ctx context.Context) error {
			return s.q.Transition(ctx, id, jobqueue.Idle, nil)
		}); err != nil {
			return
		}
		s.forgetLocal(id)
		s.startLocal(id)
		return
	}
	s.localEnded(ctx, id, st.final)
}

// localEnded completes a local job that ended as st says, or holds it
// (OnExitHold), or queues it again (OnExitRemove false).
func (s *Schedd) localEnded(ctx context.Context, id jobqueue.JobID, st *jobshim.Status) {
	j, err := s.q.Get(ctx, id)
	if err != nil || j.Status != jobqueue.Running {
		return
	}
	ad, err := wire.ToClassAd(j.Ad)
	if err != nil {
		return
	}
	attrs := jobqueue.Ad{"ExitBySignal": strconv.FormatBool(st.Signal != 0), "ExitStatus": strconv.Itoa(st.ExitCode),
		"RemoteUserCpu": strconv.FormatFloat(st.UserCPU, 'f', -1, 64), "RemoteSysCpu": strconv.FormatFloat(st.SysCPU, 'f', -1, 64),
		"CompletionDate": strconv.FormatInt(s.now().Unix(), 10)}
	if st.Signal != 0 {
		attrs["ExitSignal"] = strconv.Itoa(st.Signal)
	} else {
		attrs["ExitCode"] = strconv.Itoa(st.ExitCode)
	}
	usage := joblog.Usage{User: secs(st.UserCPU), Sys: secs(st.SysCPU)}
	completions, _ := ad.EvalAttr("NumJobCompletions").IntValue()
	attrs["NumJobCompletions"] = strconv.FormatInt(completions+1, 10)
	if reason, sub, ok := onExitHold(ad, attrs); ok {
		// Held with how it exited, which periodic_release may read; it
		// did not complete.
		delete(attrs, "CompletionDate")
		s.holdWith(ctx, id, ad, reason, HoldCodeJobPolicy, sub, attrs)
		return
	}
	if _, ok := ad.Lookup("OnExitRemove"); ok && !holdExpr(ad, "OnExitRemove", attrs) {
		ev := requeuedEvent(ad, st.ExitCode, st.Signal)
		ev.RunLocal, ev.TotalLocal = usage, usage
		if err := s.logged(ctx, ad, ev, func(ctx context.Context) error {
			return s.q.Transition(ctx, id, jobqueue.Idle, attrs)
		}); err != nil {
			return
		}
		s.forgetLocal(id)
		s.startLocal(id)
		return
	}
	// The termination event reaches the job's logs before the job leaves
	// the queue (complete, leave.go).
	if err := s.complete(ctx, id, ad, attrs, joblog.Event{Type: joblog.Terminated, TerminatedNormally: st.Signal == 0, ReturnValue: st.ExitCode,
		Signal: st.Signal, RunLocal: usage, TotalLocal: usage}); err != nil {
		if !gone(err) {
			s.log.Warn("completing a local job", "job", id, "err", err)
		}
		return
	}
	_ = os.Remove(s.localStatusPath(id))
	s.markDirty()
}

// spawnLocal starts local job id's supervisor, detached from the schedd
// (a session of its own, no parent death signal), with the job's
// standard streams opened with its owner's rights, and waits until it
// has started the job. An error comes with the hold code and subcode the
// job is held with.
func (s *Schedd) spawnLocal(id jobqueue.JobID, ad *classad.Ad, r *localRun) (pid int, start uint64, code, sub int, err error) {
	acct, err := s.jobAccount(ad)
	if err != nil {
		return 0, 0, 6, 0, err
	}
	iwd, _ := ad.EvalAttr("Iwd").StringValue()
	if iwd == "" || !filepath.IsAbs(iwd) {
		return 0, 0, 14, 0, fmt.Errorf("the job's initial directory %q is not an absolute path", iwd)
	}
	spec, err := localSpec(iwd, ad, acct)
	if err != nil {
		return 0, 0, 6, 0, err
	}
	var stdio [3]*os.File
	defer func() {
		for _, f := range stdio {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i, attr := range []string{"In", "Out", "Err"} {
		p, _ := ad.EvalAttr(attr).StringValue()
		if p == "" {
			p = os.DevNull
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(iwd, p)
		}
		err := s.asUser.Do(acct, func() error {
			var err error
			if i == 0 {
				stdio[i], err = os.Open(p)
			} else {
				// Not through a link, as a vanilla job's output is
				// not written through one.
				stdio[i], err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
				if err != nil {
					if cerr := confine.CheckPathNoFollow(p); errors.Is(cerr, confine.ErrSymlink) {
						err = cerr // said as a vanilla job's output says it
					}
				}
			}
			return err
		})
		if err != nil {
			c := 7 // UnableToOpenOutput
			if i == 0 {
				c = 8 // UnableToOpenInput
			}
			return 0, 0, c, errnoNumber(err), fmt.Errorf("opening the job's %s %s%s: %w", strings.ToLower(attr), p, as(acct), err)
		}
	}
	statusPath := s.localStatusPath(id)
	if err := os.MkdirAll(filepath.Dir(statusPath), 0o700); err != nil {
		return 0, 0, 6, 0, fmt.Errorf("the schedd's local job directory: %w", err)
	}
	status, err := os.OpenFile(statusPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return 0, 0, 6, 0, fmt.Errorf("the job's status file: %w", err)
	}
	defer status.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return 0, 0, 6, 0, err
	}
	cmd := exec.Command("/proc/self/exe")
	// The status file's path names the job's supervisor, for a schedd
	// started again to know it (ownLocalSupervisor).
	cmd.Args = []string{jobshim.Name, statusPath}
	cmd.Dir = "/"
	cmd.Env = []string{"GORACE=atexit_sleep_ms=0"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio[0], stdio[1], stdio[2]
	cmd.ExtraFiles = []*os.File{specR, status} // jobshim.SpecFD, jobshim.StatusFD
	// A session of its own and no parent death signal: the job outlives
	// the schedd, which adopts it when it starts again.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	specR.Close()
	if err != nil {
		specW.Close()
		return 0, 0, 6, 0, fmt.Errorf("starting the job's supervisor: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		close(r.gone)
	}()
	err = json.NewEncoder(specW).Encode(spec)
	specW.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		return 0, 0, 6, 0, fmt.Errorf("starting the job's supervisor: %w", err)
	}
	// The supervisor's first line says whether the job started.
	for {
		st, _ := readLocalStatus(statusPath)
		if st.first != nil {
			if st.first.Error != "" {
				<-r.gone
				return 0, 0, 6, st.first.Errno, errors.New(strings.TrimPrefix(st.first.Error, "job supervisor: "))
			}
			break
		}
		select {
		case <-r.gone:
			if st, _ := readLocalStatus(statusPath); st.first != nil {
				continue
			}
			return 0, 0, 6, 0, errors.New("the job's supervisor ended before starting the job")
		case <-time.After(5 * time.Millisecond):
		}
	}
	pid, start = cmd.Process.Pid, processStart(cmd.Process.Pid)
	s.local.mu.Lock()
	r.pid, r.start = pid, start
	s.local.mu.Unlock()
	return pid, start, 0, 0, nil
}

// localSpec is what the supervisor runs for a local job: its executable
// (Cmd, relative to Iwd), arguments and environment, in Iwd, as its
// owner (acct; nil runs it as the schedd's user).
func localSpec(iwd string, ad *classad.Ad, acct *asuser.Account) (jobshim.Spec, error) {
	cmdPath, _ := ad.EvalAttr("Cmd").StringValue()
	if cmdPath == "" {
		return jobshim.Spec{}, errors.New("the job has no Cmd")
	}
	if !filepath.IsAbs(cmdPath) {
		cmdPath = filepath.Join(iwd, cmdPath)
	}
	cmdAttrs := submit.CommandAttrs(ad)
	args, err := submit.Argv(cmdAttrs)
	if err != nil {
		return jobshim.Spec{}, fmt.Errorf("the job's arguments: %w", err)
	}
	env, err := submit.Environ(cmdAttrs)
	if err != nil {
		return jobshim.Spec{}, fmt.Errorf("the job's environment: %w", err)
	}
	if !hasEnvVar(env, "PATH") {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	if !hasEnvVar(env, "HOME") {
		env = append(env, "HOME="+iwd)
	}
	cl, _ := ad.EvalAttr("ClusterId").IntValue()
	proc, _ := ad.EvalAttr("ProcId").IntValue()
	env = append(env, "PWD="+iwd, fmt.Sprintf("CONDOR_ID=%d.%d", cl, proc))
	spec := jobshim.Spec{Protocol: jobshim.Protocol, Path: cmdPath, Args: append([]string{cmdPath}, args...), Env: env, Dir: iwd}
	if acct != nil && acct.UID != 0 {
		spec.Credential = &syscall.Credential{Uid: acct.UID, Gid: acct.GID, Groups: acct.Groups}
	}
	return spec, nil
}

func hasEnvVar(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

// errnoNumber is the system error number of err, 0 if it has none.
func errnoNumber(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return 0
}

// localStatus is what a local job's status file says: the supervisor's
// first line (started, or why not) and its last, how the job ended.
type localStatus struct {
	first, final *jobshim.Status
}

// readLocalStatus reads a supervisor's status file.
func readLocalStatus(path string) (localStatus, bool) {
	var out localStatus
	b, err := os.ReadFile(path)
	if err != nil {
		return out, false
	}
	// Only whole lines: the last may be being written.
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var st jobshim.Status
		if json.Unmarshal(line, &st) != nil {
			continue
		}
		if out.first == nil {
			out.first = &st
		} else if st.Exited {
			out.final = &st
		}
	}
	return out, true
}

// ownLocalSupervisor reports whether process pid is the supervisor this
// schedd started for the local job whose status file is statusPath: a
// process of the schedd's own user, started as the supervisor with that
// path as its argument (as runLocal starts it), or, one an earlier build
// started with no argument, holding that file open as its status. The pid
// a job's ad records is not trusted alone: the schedd signals that process
// and its children with its own rights.
func ownLocalSupervisor(pid int, statusPath string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		return false
	}
	euid := strconv.Itoa(os.Geteuid())
	sameUser := false
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest) // real, effective, saved, file system
			sameUser = len(f) == 4 && f[0] == euid && f[1] == euid && f[2] == euid
			break
		}
	}
	if !sameUser {
		return false
	}
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	switch {
	case len(args) == 2 && args[0] == jobshim.Name:
		return args[1] == statusPath
	case len(args) == 1 && args[0] == jobshim.Name:
		link, err := os.Readlink(proc + "/fd/" + strconv.Itoa(jobshim.StatusFD))
		return err == nil && link == statusPath
	}
	return false
}

// processStart is the start time of process pid (clock ticks after boot,
// /proc/PID/stat's 22nd field), 0 if there is no such process or it is a
// zombie; with the pid it names one process across pid reuse.
func processStart(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || string(f[0]) == "Z" {
		return 0
	}
	v, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return v
}
