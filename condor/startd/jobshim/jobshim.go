// Package jobshim is the supervisor each job of a startd runs under: the
// agent's own binary, run again under the name Name, between the startd and
// the job's process. It is a child subreaper, so every process the job
// starts stays its descendant however it forks or detaches (setsid, a double
// fork), and when the startd asks it to stop, when the job's main process
// ends, or when the startd dies, it kills every one of them and reports how
// the job ended. Where the kernel lets it (root, or an unprivileged user
// namespace), it is the first process of a PID namespace of its own, so
// that its death, however it comes, kills whatever the job left, and it
// mounts private directories over the shared temporary directories (/tmp,
// /dev/shm) in a mount namespace of its own.
//
// Any program that links this package serves as the shim: its init runs the
// shim, and never returns, when the program is started under Name. Go
// initialises a program's packages in the order of their import paths as
// soon as what they import is: this package imports only standard packages
// that are initialised early (not os/exec, path/filepath or strings), so
// that the shim runs before the program's other packages, some of them
// costly to initialise, are.
package jobshim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/inherit"
)

// Name is the name (argv[0]) the shim is started under.
const Name = "pond-job-shim"

// exitName is the name of a job that exits at once, which the startd runs
// to find out which namespaces it may use.
const exitName = Name + "-exit"

// The shim's file descriptors besides the job's standard streams: the
// startd writes the Spec on SpecFD and reads Status lines from StatusFD.
const (
	SpecFD   = 3
	StatusFD = 4
)

// Mount is a directory mounted over another in the job's mount namespace.
type Mount struct {
	Source string `json:"source"` // the directory mounted
	Target string `json:"target"` // where the job sees it
}

// Protocol is the version of Spec and Status this shim speaks: a shim
// binary of another build (a separate pond-job-shim left from another
// version) refuses a spec of another protocol rather than misread it.
// Change it whenever Spec or Status changes meaning.
const Protocol = 2

// Spec is what the shim runs.
type Spec struct {
	// Protocol is the Protocol of the startd that sends the spec.
	Protocol int      `json:"protocol"`
	Path     string   `json:"path"`
	Args     []string `json:"args"`
	Env      []string `json:"env"`
	Dir      string   `json:"dir"`
	// Credential, when set, is the user the job runs as (the shim runs as
	// root).
	Credential *syscall.Credential `json:"credential,omitempty"`
	// Mounts are bind-mounted, in order, before the job starts; the shim
	// must run in a mount namespace of its own, as it must with
	// PIDNamespace (/proc is the namespace's).
	Mounts []Mount `json:"mounts,omitempty"`
	// PIDNamespace says that the shim is the first process of a PID
	// namespace of its own.
	PIDNamespace bool `json:"pid_namespace,omitempty"`
	// NestUser, when set, is the host uid and gid the job keeps: the shim
	// runs as root of a user namespace that maps its own ids to 0, and runs
	// the job in a nested user namespace that maps them back, so that the
	// job has its own uid and none of the shim's capabilities, and cannot
	// undo the shim's mounts.
	NestUser *[2]uint32 `json:"nest_user,omitempty"`
	// Cgroup are the cgroup.procs files of the job's cgroups: the job's
	// process is started in them, and every process it forks stays there.
	// The shim returns to CgroupHome once it has started the job, so that
	// neither its memory nor its threads count against the job's limits;
	// a resident supervisor moves only the thread the job is forked from,
	// and clones the job into its cgroup v2 cgroup (startInCgroups).
	Cgroup     []string `json:"cgroup,omitempty"`
	CgroupHome []string `json:"cgroup_home,omitempty"`
	// CgroupSerial tells the job's cgroup from others made at the same
	// paths before or since (cgroup.Group.Serial): a supervisor that kept
	// the files of an earlier job's cgroup open uses them only for the
	// same one.
	CgroupSerial uint64 `json:"cgroup_serial,omitempty"`
}

// Status is one line the shim writes: first Started (or Error), then, once
// every process of the job is gone, how the job's main process ended.
type Status struct {
	Started  bool    `json:"started,omitempty"`
	Error    string  `json:"error,omitempty"`
	NotExist bool    `json:"not_exist,omitempty"` // the job's executable (or directory) does not exist
	Errno    int     `json:"errno,omitempty"`     // the system's error number of Error, if it has one
	Exited   bool    `json:"exited,omitempty"`
	ExitCode int     `json:"exit_code,omitempty"`
	Signal   int     `json:"signal,omitempty"` // that killed the job's main process
	UserCPU  float64 `json:"user_cpu,omitempty"`
	SysCPU   float64 `json:"sys_cpu,omitempty"`
	MaxRSSKB int64   `json:"max_rss_kb,omitempty"` // of the largest of the job's processes
}

func init() {
	switch path.Base(os.Args[0]) {
	case Name:
		sealInherited()
		os.Exit(shim())
	case ResidentName:
		sealInherited()
		os.Exit(serve())
	case exitName:
		os.Exit(0)
	}
}

// sealInherited keeps whatever a supervisor was started with besides the
// files its startd hands it (a descriptor its startd's own caller left
// open) from reaching its jobs; it stops the supervisor if it cannot.
func sealInherited() {
	if err := inherit.Seal(); err != nil {
		fmt.Fprintln(os.Stderr, "job supervisor:", err)
		os.Exit(1)
	}
}

// ProbeSpec is a job that exits at once, to run under a shim to find out
// whether the namespaces asked for can be had.
func ProbeSpec() Spec {
	// A binary built with the race detector (tests) would otherwise
	// pause a second at its exit.
	return Spec{Protocol: Protocol, Path: "/proc/self/exe", Args: []string{exitName}, Dir: "/", Env: []string{"GORACE=atexit_sleep_ms=0"}}
}

// prctl's options.
const (
	prSetDumpable       = 4
	prSetChildSubreaper = 36
)

// shim runs the job the startd sends and returns the shim's exit code.
func shim() int {
	// The job is started from this thread, and dies with it
	// (Pdeathsig): it must stay the same thread.
	runtime.LockOSThread()
	syscall.CloseOnExec(SpecFD)
	syscall.CloseOnExec(StatusFD)
	status := os.NewFile(StatusFD, "status")
	enc := json.NewEncoder(status)
	fail := func(err error) int {
		st := Status{Error: err.Error(), NotExist: errors.Is(err, fs.ErrNotExist)}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			st.Errno = int(errno)
		}
		_ = enc.Encode(st)
		return 1
	}
	var spec Spec
	specFile := os.NewFile(SpecFD, "spec")
	dec := json.NewDecoder(specFile)
	// A field this shim does not know (a startd of a later build) is
	// refused, not ignored: it may be a confinement it would skip.
	dec.DisallowUnknownFields()
	err := dec.Decode(&spec)
	specFile.Close()
	if err != nil {
		return fail(fmt.Errorf("job supervisor: reading what to run: %w", err))
	}
	if spec.Protocol != Protocol {
		return fail(fmt.Errorf("job supervisor: the startd speaks protocol %d, this supervisor %d: a supervisor binary of another build", spec.Protocol, Protocol))
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fail(fmt.Errorf("job supervisor: becoming a subreaper: %w", e))
	}
	// A job of the shim's own uid (an agent not root) may not trace it to
	// undo its mounts.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); e != 0 {
		return fail(fmt.Errorf("job supervisor: %w", e))
	}
	// In a PID namespace of its own the shim needs no handler of the
	// startd's signals (their default action ends it, and the kernel then
	// every process of the namespace), nor the threads one costs.
	var stop chan os.Signal
	if !spec.PIDNamespace {
		stop = make(chan os.Signal, 4)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	} else {
		shedIdleThreads()
	}
	if len(spec.Mounts) > 0 || spec.PIDNamespace {
		if err := mountPrivate(spec.Mounts, spec.Dir, spec.PIDNamespace); err != nil {
			return fail(fmt.Errorf("job supervisor: %w", err))
		}
	}
	if err := joinCgroups(spec.Cgroup); err != nil {
		return fail(fmt.Errorf("job supervisor: entering the job's cgroup: %w", err))
	}
	job, err := startJob(spec, [3]*os.File{os.Stdin, os.Stdout, os.Stderr})
	if err != nil {
		return fail(err)
	}
	if err := joinCgroups(spec.CgroupHome); err != nil {
		_ = syscall.Kill(job.Pid, syscall.SIGKILL)
		return fail(fmt.Errorf("job supervisor: leaving the job's cgroup: %w", err))
	}
	if err := enc.Encode(Status{Started: true}); err != nil {
		// The startd is gone.
		killTree(spec.PIDNamespace)
	}
	var st Status
	if spec.PIDNamespace {
		st = reapJob(job.Pid)
	} else {
		st = supervise(job.Pid, false, stop)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		st.UserCPU = time.Duration(ru.Utime.Nano()).Seconds()
		st.SysCPU = time.Duration(ru.Stime.Nano()).Seconds()
		st.MaxRSSKB = max(st.MaxRSSKB, ru.Maxrss)
	}
	_ = enc.Encode(st)
	return 0
}

// joinCgroups moves the shim (every thread of it) into the cgroups whose
// cgroup.procs files are procs.
func joinCgroups(procs []string) error {
	files := &cgroupFiles{}
	defer files.keepOnly()
	return files.join(procs, 0)
}

// cgroupFiles are the files of the cgroups a supervisor starts jobs in, and
// of its own, kept open: a resident supervisor enters and leaves the same
// cgroups for each job of its claim (the startd keeps a slot's cgroup for
// its next job), and opening a file of a cgroup file system costs more
// than the write. They are kept by the cgroup's serial
// (Spec.CgroupSerial, 0 for the supervisor's own cgroups), its
// cgroup.procs path as the spec names it, and what is open: a file of a
// cgroup removed, or renamed aside, is never taken for the file of one
// made since at its path.
type cgroupFiles struct {
	open map[cgroupFile]*os.File
	// wholeProcess says that the kernel did not clone a job into its
	// cgroup v2 cgroup (CLONE_INTO_CGROUP, Linux 5.7): the supervisor
	// then moves itself whole into the job's cgroups to start each job.
	wholeProcess bool
}

// cgroupFile is a file of the cgroup of a serial whose cgroup.procs file
// is path.
type cgroupFile struct {
	serial uint64
	path   string
	use    cgroupUse
}

// cgroupUse is which file of a cgroup a supervisor keeps open.
type cgroupUse uint8

const (
	// procsFile is its cgroup.procs file, which moves a whole process.
	procsFile cgroupUse = iota
	// tasksFile is a cgroup v1 cgroup's tasks file, which moves the
	// thread that writes 0 to it, alone.
	tasksFile
	// cgroupDir is a cgroup v2 cgroup's directory, opened O_PATH, which
	// a process is cloned into.
	cgroupDir
)

// cgroup2Magic is the file system type of a cgroup v2 hierarchy
// (CGROUP2_SUPER_MAGIC).
const cgroup2Magic = 0x63677270

// join moves the supervisor (every thread of it) into the cgroups of
// serial whose cgroup.procs files are procs. A kept file whose write fails
// is opened again once.
func (c *cgroupFiles) join(procs []string, serial uint64) error {
	for _, p := range procs {
		if err := c.write(cgroupFile{serial, p, procsFile}); err != nil {
			return err
		}
	}
	return nil
}

// write writes 0 (the writer) to the file key names, kept open; a kept
// file whose write fails is opened again once.
func (c *cgroupFiles) write(key cgroupFile) error {
	if c.open == nil {
		c.open = map[cgroupFile]*os.File{}
	}
	if f := c.open[key]; f != nil {
		if _, err := f.WriteAt([]byte("0"), 0); err == nil {
			return nil
		}
		f.Close()
		delete(c.open, key)
	}
	name := key.path
	if key.use == tasksFile {
		name = path.Join(path.Dir(key.path), "tasks")
	}
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte("0"), 0); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	c.open[key] = f
	return nil
}

// kind tells whether the cgroup whose cgroup.procs file is key.path is of
// the v2 hierarchy, from a file kept open or the cgroup's file system.
func (c *cgroupFiles) kind(serial uint64, procs string) (v2 bool, err error) {
	switch {
	case c.open[cgroupFile{serial, procs, tasksFile}] != nil:
		return false, nil
	case c.open[cgroupFile{serial, procs, cgroupDir}] != nil:
		return true, nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(path.Dir(procs), &st); err != nil {
		return false, fmt.Errorf("%s: %w", path.Dir(procs), err)
	}
	return st.Type == cgroup2Magic, nil
}

// dir returns the descriptor of the directory of the cgroup v2 cgroup of
// serial whose cgroup.procs file is procs, kept open.
func (c *cgroupFiles) dir(serial uint64, procs string) (int, error) {
	if c.open == nil {
		c.open = map[cgroupFile]*os.File{}
	}
	key := cgroupFile{serial, procs, cgroupDir}
	if f := c.open[key]; f != nil {
		return int(f.Fd()), nil
	}
	fd, err := syscall.Open(path.Dir(procs), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", path.Dir(procs), err)
	}
	f := os.NewFile(uintptr(fd), path.Dir(procs))
	c.open[key] = f
	return int(f.Fd()), nil
}

// enterThread moves the calling thread alone into the cgroup v1 cgroups of
// serial among procs (cgroup.procs files), and returns the descriptor of
// the directory of its cgroup v2 cgroup, which the job is to be cloned
// into; -1 when it has none. A process forked from the thread is born in
// the thread's v1 cgroups; the supervisor's other threads stay in its own.
func (c *cgroupFiles) enterThread(procs []string, serial uint64) (cgroupFD int, err error) {
	cgroupFD = -1
	for _, p := range procs {
		v2, err := c.kind(serial, p)
		if err != nil {
			return -1, err
		}
		if !v2 {
			if err := c.write(cgroupFile{serial, p, tasksFile}); err != nil {
				return -1, err
			}
			continue
		}
		if cgroupFD >= 0 {
			return -1, fmt.Errorf("%s: a second cgroup v2 cgroup for the job", p)
		}
		if cgroupFD, err = c.dir(serial, p); err != nil {
			return -1, err
		}
	}
	return cgroupFD, nil
}

// leaveThread moves the calling thread back into the supervisor's own
// cgroup v1 cgroups, whose cgroup.procs files are among home (it never
// left its cgroup v2 cgroup: enterThread).
func (c *cgroupFiles) leaveThread(home []string) error {
	for _, p := range home {
		v2, err := c.kind(0, p)
		if err != nil {
			return err
		}
		if v2 {
			if _, err := c.dir(0, p); err != nil {
				return err
			}
			continue
		}
		if err := c.write(cgroupFile{0, p, tasksFile}); err != nil {
			return err
		}
	}
	return nil
}

// keepOnly closes the files but those of the cgroups spec names (none
// without a spec).
func (c *cgroupFiles) keepOnly(spec ...Spec) {
	for key, f := range c.open {
		kept := false
		for _, sp := range spec {
			for _, p := range sp.Cgroup {
				kept = kept || key.serial == sp.CgroupSerial && key.path == p
			}
			for _, p := range sp.CgroupHome {
				kept = kept || key.serial == 0 && key.path == p
			}
		}
		if !kept {
			f.Close()
			delete(c.open, key)
		}
	}
}

// mountPrivate makes the mount namespace's mounts private, so that nothing
// mounted here reaches the host, and bind-mounts each of mounts. The job's
// directory dir, should one of the mounts hide it (a scratch directory in
// /tmp), is mounted again where it was. With proc, /proc is the PID
// namespace's: the job sees its own processes only (and the user
// namespace's id maps of a nested job are written where they belong).
func mountPrivate(mounts []Mount, dir string, proc bool) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the job's mounts private: %w", err)
	}
	if proc {
		if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting the job's /proc: %w", err)
		}
	}
	// A source may lie below another mount's target (the scratch
	// directory in /tmp): each is opened before anything is mounted.
	fds := make([]int, len(mounts))
	for i, m := range mounts {
		fd, err := syscall.Open(m.Source, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", m.Source, err)
		}
		defer syscall.Close(fd)
		fds[i] = fd
	}
	dirFD, err := syscall.Open(dir, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the job's directory: %w", err)
	}
	defer syscall.Close(dirFD)
	var before syscall.Stat_t
	if err := syscall.Fstat(dirFD, &before); err != nil {
		return fmt.Errorf("the job's directory: %w", err)
	}
	for i, m := range mounts {
		if err := syscall.Mount("/proc/self/fd/"+strconv.Itoa(fds[i]), m.Target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("mounting %s on %s: %w", m.Source, m.Target, err)
		}
	}
	var after syscall.Stat_t
	if err := syscall.Stat(dir, &after); err == nil && after.Dev == before.Dev && after.Ino == before.Ino {
		return nil
	}
	if err := pathUnder(dir, mounts); err != nil {
		return fmt.Errorf("the job's directory under a private one: %w", err)
	}
	if err := syscall.Mount("/proc/self/fd/"+strconv.Itoa(dirFD), dir, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting the job's directory under a private one: %w", err)
	}
	return nil
}

// startJob starts the job's process in a process group of its own. The
// executable was just written to the scratch directory; a fork elsewhere in
// the startd (another job starting) may still hold the descriptor it was
// written through, and exec then fails with ETXTBSY until that child has
// exec'd in turn: startJob retries briefly.
func startJob(spec Spec, stdio [3]*os.File) (*os.Process, error) {
	return startJobIn(spec, stdio, -1)
}

// startJobIn is startJob, the job cloned into the cgroup v2 cgroup whose
// directory cgroupFD is open (CLONE_INTO_CGROUP); -1: the supervisor's.
func startJobIn(spec Spec, stdio [3]*os.File, cgroupFD int) (*os.Process, error) {
	if spec.Path == "" {
		return nil, errors.New("exec: no command")
	}
	args := spec.Args
	if len(args) == 0 {
		args = []string{spec.Path}
	}
	env, err := dedupEnv(spec.Env)
	if env == nil {
		// Not the shim's own environment (what os.StartProcess gives
		// for nil): the job has the spec's only.
		env = []string{}
	}
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.Path, err)
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: spec.Credential}
	if ids := spec.NestUser; ids != nil {
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(ids[0]), HostID: 0, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(ids[1]), HostID: 0, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	if cgroupFD >= 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, cgroupFD
	}
	for attempt := 1; ; attempt++ {
		// The startd found the executable: no search of a PATH here.
		p, err := os.StartProcess(spec.Path, args, &os.ProcAttr{Dir: spec.Dir, Env: env,
			Files: stdio[:], Sys: attr})
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, syscall.ETXTBSY) || attempt == 50 {
			return nil, fmt.Errorf("starting %s: %w", spec.Path, err)
		}
		time.Sleep(time.Duration(attempt) * 2 * time.Millisecond)
	}
}

// dedupEnv is env as os/exec passes it to a process (the shim links
// neither os/exec nor strings, so that it starts before the binary's other
// packages are initialised: see Name): the last value of each name, in
// the order of the last ones, without empty entries; an entry with a NUL
// is an error. A nil env is the shim's own environment.
func dedupEnv(env []string) ([]string, error) {
	if env == nil {
		return nil, nil
	}
	var err error
	out := make([]string, 0, len(env))
	saw := make(map[string]bool, len(env))
	for n := len(env); n > 0; n-- {
		kv := env[n-1]
		if indexByte(kv, 0, 0) >= 0 {
			err = errors.New("exec: environment variable contains NUL")
			continue
		}
		i := indexByte(kv, '=', 0)
		if i == 0 {
			i = indexByte(kv, '=', 1)
		}
		if i < 0 {
			if kv != "" {
				out = append(out, kv)
			}
			continue
		}
		if k := kv[:i]; !saw[k] {
			saw[k] = true
			out = append(out, kv)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}

// indexByte is the index of the first c in s at or after from, or -1.
func indexByte(s string, c byte, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// supervise reaps every process of the job until none is left: once the
// job's main process (pid) has ended, or a stop signal came, it kills
// whatever remains, again and again until nothing does. It returns how the
// main process ended, and the largest resident set of any process of the
// job. A nil stop never comes.
func supervise(pid int, pidNS bool, stop <-chan os.Signal) Status {
	type reaped struct {
		pid int
		ws  syscall.WaitStatus
		ru  syscall.Rusage
	}
	reaps := make(chan reaped)
	go func() {
		defer close(reaps)
		for {
			var r reaped
			p, err := syscall.Wait4(-1, &r.ws, 0, &r.ru)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return // ECHILD: every process of the job is gone
			}
			r.pid = p
			reaps <- r
		}
	}()
	st := Status{Exited: true}
	sweep := time.NewTicker(50 * time.Millisecond)
	defer sweep.Stop()
	ending := false
	for {
		select {
		case r, ok := <-reaps:
			if !ok {
				return st
			}
			st.MaxRSSKB = max(st.MaxRSSKB, r.ru.Maxrss)
			if r.pid == pid {
				if r.ws.Signaled() {
					st.Signal = int(r.ws.Signal())
				} else {
					st.ExitCode = r.ws.ExitStatus()
				}
				ending = true
				killTree(pidNS)
			}
		case <-stop:
			ending = true
			killTree(pidNS)
		case <-sweep.C:
			if ending {
				// What forked since the last sweep.
				killTree(pidNS)
			}
		}
	}
}

// killTree kills every descendant of the shim: in a PID namespace of its
// own, every other process of the namespace; otherwise every process whose
// chain of parents leads to the shim (which, a subreaper, is the parent of
// whatever they orphaned).
func killTree(pidNS bool) {
	if pidNS {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		return
	}
	for _, pid := range Descendants(os.Getpid()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Descendants lists the live processes whose chain of parents leads to
// root, from /proc.
func Descendants(root int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	children := map[int][]int{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if ppid, ok := parent(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parent returns the parent of pid from /proc/PID/stat.
func parent(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses: state,
	// ppid, ...
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// pathUnder makes the path to dir, which the private directory mounted on
// one of mounts' targets hid, inside that directory: its first level there
// on disk and, when the path goes deeper, the rest in a small tmpfs
// mounted on that first level, so that a scratch directory deep below
// /tmp costs one directory made on disk a job rather than one a level.
// Where no tmpfs can be mounted, every level is made on disk.
func pathUnder(dir string, mounts []Mount) error {
	target := ""
	for _, m := range mounts {
		t := path.Clean(m.Target)
		if len(t) > len(target) && len(dir) > len(t)+1 && dir[:len(t)] == t && (t == "/" || dir[len(t)] == '/') {
			target = t
		}
	}
	if target == "" || target == "/" {
		return mkdirTraversable(dir)
	}
	rel := dir[len(target)+1:]
	i := indexByte(rel, '/', 0)
	if i < 0 {
		return mkdirTraversable(dir)
	}
	top := target + "/" + rel[:i]
	if err := mkdirTraversable(top); err != nil {
		return err
	}
	// Directories only: a few inodes, no data; the job's files go to its
	// scratch directory, mounted on the end of the path.
	_ = syscall.Mount("tmpfs", top, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "mode=0711,size=64k,nr_inodes=1024")
	return mkdirTraversable(dir)
}

// oPath is open's O_PATH, the same on every Linux architecture.
const oPath = 0x200000

// mkdirTraversable makes dir and its missing parents, each searchable by
// anyone (0711) whatever the umask, so that the job's user reaches dir.
func mkdirTraversable(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := mkdirTraversable(path.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Chmod(dir, 0o711)
}
