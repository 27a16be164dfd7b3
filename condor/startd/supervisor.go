package startd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/startd/jobshim"
)

// DefaultMountUnderScratch is the default of MOUNT_UNDER_SCRATCH: the
// shared temporary directories each job gets a private one of.
const DefaultMountUnderScratch = "/tmp,/var/tmp,/dev/shm"

// IsolationAttr is the machine ad's attribute that says how the startd
// confines its jobs: "pid-namespace" when a job's processes die with its
// supervisor whatever they do, "private-tmp" when the job has private
// MOUNT_UNDER_SCRATCH directories, and "subreaper" alone when neither can
// be had (the job's processes are still killed with it, unless one kills
// the supervisor first).
const IsolationAttr = "PondJobIsolation"

// SupervisorAttr is the machine ad's attribute that says how the startd
// supervises its jobs: SupervisorResident when a claim's jobs run one after
// the other under one supervisor that stays for the claim, SupervisorPerJob
// when each job starts a supervisor of its own.
const SupervisorAttr = "PondJobSupervisor"

// KnobJobSupervisor chooses how jobs are supervised: SupervisorResident
// (DefaultJobSupervisor), where the start-up probe finds it can be had, or
// SupervisorPerJob, always. It is read at start.
const KnobJobSupervisor = "POND_JOB_SUPERVISOR"

// The values of KnobJobSupervisor and SupervisorAttr.
const (
	SupervisorResident   = "resident"
	SupervisorPerJob     = "per-job"
	DefaultJobSupervisor = SupervisorResident
)

// jobSupervisor reads KnobJobSupervisor: SupervisorResident or
// SupervisorPerJob, in any case; unset or empty, DefaultJobSupervisor.
func jobSupervisor(cfg *config.Config) (string, error) {
	v, ok := cfg.Get(KnobJobSupervisor)
	v = strings.ToLower(strings.TrimSpace(v))
	if !ok || v == "" {
		return DefaultJobSupervisor, nil
	}
	switch v {
	case SupervisorResident, SupervisorPerJob:
		return v, nil
	}
	return "", fmt.Errorf("%s: %q is not %s or %s", KnobJobSupervisor, v, SupervisorResident, SupervisorPerJob)
}

// isolation is how the startd confines its jobs, worked out at start from
// what the kernel allows.
type isolation struct {
	pidNS  bool // the job's supervisor is the first process of a PID namespace
	userNS bool // ... of a user namespace, the startd not being root
	// resident says that a claim's jobs run under one supervisor that
	// stays for the claim (see resident): with a PID namespace, as root.
	resident bool
	mounts   []string // MOUNT_UNDER_SCRATCH directories that exist, mounted privately
	why      string   // why namespaces cannot be had, if they cannot
}

// String is the value of IsolationAttr.
func (iso isolation) String() string {
	var parts []string
	if iso.pidNS {
		parts = append(parts, "pid-namespace")
	}
	if len(iso.mounts) > 0 {
		parts = append(parts, "private-tmp")
	}
	if iso.userNS {
		parts = append(parts, "user-namespace")
	}
	if len(parts) == 0 {
		return "subreaper"
	}
	return strings.Join(parts, ",")
}

// supervisor is the value of SupervisorAttr.
func (iso isolation) supervisor() string {
	if iso.resident {
		return SupervisorResident
	}
	return SupervisorPerJob
}

// advertise sets IsolationAttr and SupervisorAttr in the machine ad.
func (iso isolation) advertise(ad *classad.Ad) {
	ad.SetString(IsolationAttr, iso.String())
	ad.SetString(SupervisorAttr, iso.supervisor())
}

// mountUnderScratch reads MOUNT_UNDER_SCRATCH: the existing directories of
// its list. An empty value mounts nothing.
func mountUnderScratch(cfg *config.Config) ([]string, error) {
	v, ok := cfg.Get("MOUNT_UNDER_SCRATCH")
	if !ok {
		v = DefaultMountUnderScratch
	}
	var dirs []string
	for _, d := range config.SplitList(v) {
		if !filepath.IsAbs(d) || filepath.Clean(d) == "/" {
			return nil, fmt.Errorf("MOUNT_UNDER_SCRATCH: %q is not an absolute path below /", d)
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs, nil
}

// jobIsolation works out how jobs can be confined here by running the
// supervisor with what it asks for, and says so in the log once: as root,
// a PID and a mount namespace; otherwise the same inside a user namespace,
// where the kernel lets unprivileged users make one. When the private
// directories cannot be mounted, a PID namespace alone is tried. As root, a
// claim's jobs share a resident supervisor unless KnobJobSupervisor says
// per-job.
func (s *Startd) jobIsolation(cfg *config.Config) (isolation, error) {
	mounts, err := mountUnderScratch(cfg)
	if err != nil {
		return isolation{}, err
	}
	mode, err := jobSupervisor(cfg)
	if err != nil {
		return isolation{}, err
	}
	userNS := os.Geteuid() != 0
	if mode == SupervisorPerJob && !userNS {
		s.log.Info("each job starts a supervisor of its own, as "+KnobJobSupervisor+" says", KnobJobSupervisor, mode)
	}
	var why []string
	for _, want := range []isolation{{pidNS: true, userNS: userNS, mounts: mounts}, {pidNS: true, userNS: userNS}} {
		if len(want.mounts) == 0 && len(mounts) > 0 {
			s.log.Warn("jobs cannot have private MOUNT_UNDER_SCRATCH directories here: jobs share them", "dirs", mounts, "err", why[0])
		}
		if want.pidNS && !want.userNS && mode == SupervisorResident {
			// As root, a resident supervisor's jobs (see resident): one
			// start of the binary, as the probe of a supervisor of one
			// job.
			err := s.probeResident(want)
			if err == nil {
				want.resident = true
				s.log.Info("jobs run in namespaces of their own, a claim's under one supervisor", IsolationAttr, want.String())
				return want, nil
			}
			s.log.Warn("a claim's jobs cannot share a supervisor here: each job starts one", "err", err)
		}
		err := s.probe(want)
		if err == nil {
			s.log.Info("jobs run in namespaces of their own", IsolationAttr, want.String())
			return want, nil
		}
		why = append(why, err.Error())
		if len(mounts) == 0 {
			break
		}
	}
	got := isolation{why: why[0]}
	s.log.Warn("jobs cannot have namespaces of their own here: a job that kills its supervisor may leave processes behind, and jobs share /tmp and /dev/shm",
		IsolationAttr, got.String(), "err", got.why)
	return got, nil
}

// probe runs a job that exits at once under a supervisor isolated as iso.
func (s *Startd) probe(iso isolation) error {
	dir, err := os.MkdirTemp(s.execute, "dir_probe")
	if err != nil {
		return fmt.Errorf("probing job isolation: %w", err)
	}
	defer removeScratch(dir)
	spec := jobshim.ProbeSpec()
	if spec.Mounts, err = scratchMounts(dir, iso.mounts); err != nil {
		return fmt.Errorf("probing job isolation: %w", err)
	}
	return runProbe(iso, spec)
}

// probeResident runs two jobs that exit at once, one after the other,
// under a resident supervisor isolated as iso.
func (s *Startd) probeResident(iso isolation) error {
	res, err := startResident(s.log.With("probe", true), "")
	if err != nil {
		return err
	}
	defer func() {
		res.close()
		<-res.exited
	}()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	for range 2 {
		dir, err := os.MkdirTemp(s.execute, "dir_probe")
		if err != nil {
			return fmt.Errorf("probing job isolation: %w", err)
		}
		spec := jobshim.ProbeSpec()
		spec.Mounts, err = scratchMounts(dir, iso.mounts)
		if err == nil {
			ended := make(chan bool, 1)
			var p *supervisor
			if p, err = res.run(spec, null, null, null, func(ok bool) { ended <- ok }); err == nil {
				p.wait()
				if !<-ended || p.final.ExitCode != 0 {
					err = fmt.Errorf("the resident job supervisor did not run its job: %v", p.waitErr)
				}
			}
		}
		removeScratch(dir)
		if err != nil {
			return err
		}
	}
	return nil
}

// runProbe runs the probe spec under a supervisor isolated as iso.
func runProbe(iso isolation, spec jobshim.Spec) error {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	p, err := startSupervisor(iso, spec, null, null, null)
	if err != nil {
		return err
	}
	p.wait()
	if p.final == nil || !p.final.Exited || p.final.ExitCode != 0 {
		return fmt.Errorf("the job supervisor did not run its job: %v", p.waitErr)
	}
	return nil
}

// scratchMounts makes, next to the scratch directory dir, the private
// directories the job sees as targets (root's, or the startd user's, 0700;
// inside, each 01777 as /tmp is), and returns the mounts.
func scratchMounts(dir string, targets []string) ([]jobshim.Mount, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	base := nsDir(dir)
	if err := os.Mkdir(base, 0o700); err != nil {
		return nil, fmt.Errorf("creating the job's private temporary directories: %w", err)
	}
	var mounts []jobshim.Mount
	for _, t := range targets {
		src := privateDir(base, t)
		if err := os.Mkdir(src, 0o700); err != nil {
			return nil, fmt.Errorf("creating the job's private %s: %w", t, err)
		}
		if err := os.Chmod(src, 0o777|os.ModeSticky); err != nil {
			return nil, fmt.Errorf("creating the job's private %s: %w", t, err)
		}
		mounts = append(mounts, jobshim.Mount{Source: src, Target: t})
	}
	return mounts, nil
}

// nsDir is the directory of the private temporary directories of the job
// whose scratch directory is dir.
func nsDir(dir string) string { return dir + ".tmp" }

// removeScratch removes a job's scratch directory and its private
// temporary directories.
func removeScratch(dir string) {
	_ = os.RemoveAll(dir)
	_ = os.RemoveAll(nsDir(dir))
}

// sweepExecute removes what jobs of an earlier run of the startd left in
// the execute directory (their supervisors died with that startd, and
// their jobs with them), and records where the execute directory is.
func (s *Startd) sweepExecute() error {
	if err := s.recordExecute(); err != nil {
		return err
	}
	ents, err := os.ReadDir(s.execute)
	if err != nil {
		return fmt.Errorf("execute directory: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "dir_") {
			s.log.Info("removing the scratch directory of a job of an earlier run", "dir", e.Name())
			if err := os.RemoveAll(filepath.Join(s.execute, e.Name())); err != nil {
				return fmt.Errorf("removing the scratch directory of a job of an earlier run: %w", err)
			}
		}
	}
	return nil
}

// ExecuteRecord is the file of a startd's data directory that names its
// execute directory when that lies elsewhere (see RemoveExecute).
const ExecuteRecord = "execute.path"

// recordExecute writes ExecuteRecord when the execute directory lies
// outside the data directory.
func (s *Startd) recordExecute() error {
	if s.opts.DataDir == "" {
		return nil
	}
	p := filepath.Join(s.opts.DataDir, ExecuteRecord)
	if rel, err := filepath.Rel(s.opts.DataDir, s.execute); err == nil && filepath.IsLocal(rel) {
		_ = os.Remove(p)
		return nil
	}
	// The data directory may not exist yet: nothing else of the startd's
	// lies in it when the execute directory lies elsewhere.
	if err := os.MkdirAll(s.opts.DataDir, 0o700); err != nil {
		return fmt.Errorf("recording the execute directory: %w", err)
	}
	if err := os.WriteFile(p, []byte(s.execute+"\n"), 0o600); err != nil {
		return fmt.Errorf("recording the execute directory: %w", err)
	}
	return nil
}

// RemoveExecute removes the scratch directories of the jobs of the startds
// that are gone whose data directories lie in dir (it holds an
// ExecuteRecord) and whose execute directories lie elsewhere: the caller is
// about to remove dir, and with it what lies inside. Each execute directory
// itself goes if nothing else is left in it.
func RemoveExecute(dir string) error {
	var errs []error
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != ExecuteRecord || !d.Type().IsRegular() {
			return nil
		}
		if err := removeRecorded(p); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// removeRecorded removes the scratch directories of the execute directory
// an ExecuteRecord names.
func removeRecorded(record string) error {
	b, err := os.ReadFile(record)
	if err != nil {
		return fmt.Errorf("reading the startd's execute directory: %w", err)
	}
	dir := strings.TrimSpace(string(b))
	if !filepath.IsAbs(dir) || filepath.Clean(dir) == "/" {
		return fmt.Errorf("%s: %q is not an execute directory", record, dir)
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing the jobs' scratch directories: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "dir_") {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("removing a job's scratch directory: %w", err))
			}
		}
	}
	_ = os.Remove(dir)
	return errors.Join(errs...)
}

// supervisor is a job's supervisor process (see jobshim): one started for
// the job, or a resident one of the job's claim (res), whose waited closes
// when the job has ended rather than the process.
type supervisor struct {
	cmd     *exec.Cmd
	pidNS   bool
	status  *os.File
	lines   *bufio.Scanner
	waited  chan struct{}
	waitErr error
	final   *jobshim.Status // how the job ended; nil if the supervisor said nothing
	once    sync.Once
	res     *resident
}

// startSupervisor starts the supervisor of spec, isolated as iso, with the
// job's standard streams, and waits until it has started the job. The
// supervisor dies with the startd: it is started, and waited for, by a
// thread of its own (its parent death signal follows the thread that
// forked it).
func startSupervisor(iso isolation, spec jobshim.Spec, stdin, stdout, stderr *os.File) (*supervisor, error) {
	return startSupervisorWith(iso, spec, func(w io.Writer, spec jobshim.Spec) error { return json.NewEncoder(w).Encode(spec) }, stdin, stdout, stderr)
}

// startSupervisorWith is startSupervisor, the spec written to the
// supervisor by send.
func startSupervisorWith(iso isolation, spec jobshim.Spec, send func(io.Writer, jobshim.Spec) error, stdin, stdout, stderr *os.File) (*supervisor, error) {
	spec.Protocol = jobshim.Protocol
	spec.PIDNamespace = iso.pidNS
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if !iso.pidNS {
		// Without a PID namespace the supervisor must live to kill the
		// job's processes.
		attr.Pdeathsig = syscall.SIGTERM
	}
	if iso.pidNS {
		attr.Cloneflags |= syscall.CLONE_NEWPID
	}
	if len(spec.Mounts) > 0 || iso.pidNS {
		attr.Cloneflags |= syscall.CLONE_NEWNS
	}
	if iso.userNS {
		uid, gid := os.Getuid(), os.Getgid()
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		spec.NestUser = &[2]uint32{uint32(uid), uint32(gid)}
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, machineFault(fmt.Errorf("starting the job's supervisor: %w", err))
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, machineFault(fmt.Errorf("starting the job's supervisor: %w", err))
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{jobshim.Name}
	cmd.Dir = "/"
	// The job's environment is in the spec. A binary built with the race
	// detector (tests) would otherwise pause a second at each exit. One
	// processor is all the supervisor needs, and it starts fewer threads
	// (about 0.3 ms less CPU a job); the job does not inherit it.
	cmd.Env = []string{"GORACE=atexit_sleep_ms=0", "GOMAXPROCS=1"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.ExtraFiles = []*os.File{specR, statusW} // jobshim.SpecFD, jobshim.StatusFD
	cmd.SysProcAttr = attr
	p := &supervisor{cmd: cmd, pidNS: iso.pidNS, status: statusR, lines: bufio.NewScanner(statusR), waited: make(chan struct{})}
	p.lines.Buffer(make([]byte, 4096), 1<<20)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.waited)
	}()
	err = <-started
	specR.Close()
	statusW.Close()
	if err != nil {
		specW.Close()
		statusR.Close()
		return nil, machineFault(fmt.Errorf("starting the job's supervisor: %w", err))
	}
	err = send(specW, spec)
	specW.Close()
	if err != nil {
		p.kill()
		p.wait()
		return nil, machineFault(fmt.Errorf("starting the job's supervisor: %w", err))
	}
	first, ok := p.next()
	switch {
	case !ok:
		p.wait()
		return nil, machineFault(fmt.Errorf("the job's supervisor ended before starting the job: %v", p.waitErr))
	case first.Error != "":
		p.wait()
		return nil, startError(first)
	}
	return p, nil
}

// startError is the error of a job its supervisor could not start.
func startError(first jobshim.Status) error {
	err := errors.New(first.Error)
	if first.NotExist {
		err = fmt.Errorf("%w: %w", err, os.ErrNotExist)
	}
	if first.Errno != 0 {
		// Whose fault it is (execFault) depends on the number.
		err = fmt.Errorf("%w (%w)", err, syscall.Errno(first.Errno))
	}
	if strings.HasPrefix(first.Error, "job supervisor:") {
		err = machineFault(err)
	}
	return err
}

// next reads the supervisor's next status line.
func (p *supervisor) next() (jobshim.Status, bool) {
	var st jobshim.Status
	if !p.lines.Scan() {
		return st, false
	}
	return st, json.Unmarshal(p.lines.Bytes(), &st) == nil
}

// pid is the supervisor's process id: its descendants are the job's
// processes.
func (p *supervisor) pid() int { return p.cmd.Process.Pid }

// wait waits until the supervisor has ended, having reaped every process of
// the job, and reads how the job ended.
func (p *supervisor) wait() {
	if p.res != nil {
		<-p.waited
		return
	}
	p.once.Do(func() {
		if st, ok := p.next(); ok && st.Exited {
			p.final = &st
		}
		<-p.waited
		p.status.Close()
	})
}

// kill ends the job: every process of it dies. A resident supervisor is
// killed with its job, and not once its job has ended. In a PID namespace the
// supervisor's death kills them all; otherwise the supervisor kills them
// when told to stop, and, should it not end soon, it and the processes it
// would have killed are killed.
func (p *supervisor) kill() {
	if p.res != nil {
		select {
		case <-p.waited:
			// The job has ended: the supervisor may be the claim's
			// next job's.
		default:
			p.res.kill()
		}
		return
	}
	if p.pidNS {
		_ = syscall.Kill(p.pid(), syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(p.pid(), syscall.SIGTERM)
	go func() {
		select {
		case <-p.waited:
		case <-time.After(5 * time.Second):
			left := jobshim.Descendants(p.pid())
			_ = syscall.Kill(p.pid(), syscall.SIGKILL)
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}()
}
