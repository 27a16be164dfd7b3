package jobshim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"syscall"
	"time"
)

// ResidentName is the name (argv[0]) of a resident supervisor: one that
// stays for the jobs of a claim, one after the other, rather than one
// started for each job. It is the first process of a PID namespace and of
// a mount namespace of its own, as root. On ConnFD, a unix stream socket,
// it reads one Spec a job, each sent with the job's standard input, output
// and error (SCM_RIGHTS, with the spec's first byte), and writes that
// job's Status lines back; once the startd closes its end, it exits.
//
// Between jobs it keeps every guarantee of the supervisor of one job: when
// a job's main process ends it kills every other process of its PID
// namespace and reaps them before it says how the job ended, so nothing of
// a job outlives it into the next; each job's private directories are
// mounted in a mount namespace of the job's own, which the supervisor
// makes, starts the job in and leaves for its own again; each job joins
// its own cgroups and runs as its own credential.
//
// Each thread of it takes a process id of the host (kernel.pid_max,
// kernel.threads-max), and a machine may have thousands of claims at once:
// it does all its work from its main thread, one system call after the
// other (no goroutine of its own, no signal handling goroutine, no thread
// a job), so that it has the Go runtime's few threads only
// (ResidentThreads) whatever its jobs do.
const ResidentName = Name + "-resident"

// ResidentThreads is the most threads a resident supervisor has, with
// GOMAXPROCS=1 in its environment: its main thread, the runtime's monitor
// (sysmon), the thread the runtime starts threads from (a locked main
// thread's), and one that runs the runtime's goroutines (the collector's)
// while the main thread waits in a system call. Any other thread the
// runtime's start left idle it ends as it starts, and any the runtime
// started while a job ran (a machine starved of CPU) as the job ends
// (shedIdleThreads).
const ResidentThreads = 4

// ConnFD is a resident supervisor's socket to the startd.
const ConnFD = 3

// serve is a resident supervisor's main loop; it returns its exit code.
func serve() int {
	// Everything is done from the main thread, locked to this goroutine
	// (a job's mount namespace is made on it): locked by the program, not
	// only by the runtime's init, so that the runtime never starts a
	// thread from it (it starts them from a thread of its own), and no
	// thread is born in a job's mount namespace.
	runtime.LockOSThread()
	syscall.CloseOnExec(ConnFD)
	fail := func(err error) int {
		_ = writeStatus(errorStatus(err))
		return 1
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fail(fmt.Errorf("job supervisor: becoming a subreaper: %w", e))
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); e != 0 {
		return fail(fmt.Errorf("job supervisor: %w", e))
	}
	if os.Getpid() != 1 {
		return fail(errors.New("job supervisor: a resident supervisor must be the first process of a PID namespace of its own"))
	}
	// The namespace's /proc, and no mount of a job's reaches the host.
	if err := mountPrivate(nil, "/", true); err != nil {
		return fail(fmt.Errorf("job supervisor: %w", err))
	}
	// The mount namespace the main thread returns to once it has started
	// a job in one of the job's own.
	home, err := syscall.Open("/proc/thread-self/ns/mnt", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("job supervisor: its mount namespace: %w", err))
	}
	shedIdleThreads()
	// No handler of SIGTERM, SIGINT or SIGHUP: their default action ends
	// the supervisor, the first process of the namespace, and the kernel
	// then kills every other one.
	var buf []byte
	files := &cgroupFiles{}
	for {
		spec, stdio, err := readSpec(&buf)
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			return fail(fmt.Errorf("job supervisor: reading what to run: %w", err))
		}
		err = serveJob(spec, stdio, home, files)
		files.keepOnly(spec)
		if err != nil {
			// The startd is gone, or the supervisor cannot run
			// another job.
			killTree(true)
			return 1
		}
	}
}

// shedIdleThreads ends the threads the runtime's start (and the binary's
// packages' initialisation) left idle beyond the one the supervisor needs:
// a goroutine that ends locked to its thread ends the thread, and such a
// goroutine runs on an idle thread (the main thread is locked to this
// goroutine).
func shedIdleThreads() {
	count := func() int {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return 0
		}
		return len(tasks)
	}
	for range 4 {
		n := count()
		if n <= ResidentThreads {
			return
		}
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(done)
		}()
		<-done
		// The thread ends once the goroutine has.
		for range 100 {
			if count() < n {
				break
			}
			ts := syscall.NsecToTimespec(int64(time.Millisecond))
			_ = syscall.Nanosleep(&ts, nil)
		}
	}
}

// errorStatus is the Status of a job that could not be started.
func errorStatus(err error) Status {
	st := Status{Error: err.Error(), NotExist: errors.Is(err, fs.ErrNotExist)}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		st.Errno = int(errno)
	}
	return st
}

// writeStatus writes a Status line to the startd.
func writeStatus(st Status) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	for len(b) > 0 {
		n, err := syscall.Write(ConnFD, b)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// readSpec reads the next Spec, a line, and the three standard streams
// sent with it; buf holds what was read beyond the line. It returns io.EOF
// once the startd has closed its end between jobs.
func readSpec(buf *[]byte) (Spec, [3]*os.File, error) {
	var spec Spec
	var stdio [3]*os.File
	var fds []int
	closeFDs := func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}
	p := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	for indexByte(string(*buf), '\n', 0) < 0 {
		if len(*buf) > 64<<20 {
			closeFDs()
			return spec, stdio, errors.New("a spec larger than 64 MB")
		}
		n, oobn, _, _, err := syscall.Recvmsg(ConnFD, p, oob, syscall.MSG_CMSG_CLOEXEC)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			closeFDs()
			return spec, stdio, err
		}
		if oobn > 0 {
			msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				closeFDs()
				return spec, stdio, err
			}
			for _, m := range msgs {
				got, err := syscall.ParseUnixRights(&m)
				if err == nil {
					fds = append(fds, got...)
				}
			}
		}
		if n == 0 {
			closeFDs()
			if len(*buf) == 0 {
				return spec, stdio, io.EOF
			}
			return spec, stdio, io.ErrUnexpectedEOF
		}
		*buf = append(*buf, p[:n]...)
	}
	i := indexByte(string(*buf), '\n', 0)
	line := (*buf)[:i]
	*buf = append([]byte(nil), (*buf)[i+1:]...)
	if len(fds) != 3 {
		closeFDs()
		return spec, stdio, fmt.Errorf("%d descriptors sent with the spec, not the job's 3 standard streams", len(fds))
	}
	for i, fd := range fds {
		stdio[i] = os.NewFile(uintptr(fd), "stdio")
	}
	dec := json.NewDecoder(bytesReader(line))
	// As the supervisor of one job: a field it does not know is refused.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		closeAll(stdio)
		return spec, stdio, err
	}
	return spec, stdio, nil
}

// byteReader reads b, as bytes.Reader would (the package links neither
// bytes' readers nor strings: see Name).
type byteReader struct{ b []byte }

func bytesReader(b []byte) *byteReader { return &byteReader{b} }

// Read reads from b.
func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// closeAll closes the files that are open.
func closeAll(files [3]*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// serveJob runs one job and writes its Status lines; an error is the
// startd's end of the socket gone, or the supervisor unfit for another job
// (errInJobCgroup, errNotHome). home is the supervisor's mount namespace.
func serveJob(spec Spec, stdio [3]*os.File, home int, files *cgroupFiles) error {
	switch {
	case spec.Protocol != Protocol:
		closeAll(stdio)
		return writeStatus(errorStatus(fmt.Errorf("job supervisor: the startd speaks protocol %d, this supervisor %d: a supervisor binary of another build", spec.Protocol, Protocol)))
	case !spec.PIDNamespace || spec.NestUser != nil:
		closeAll(stdio)
		return writeStatus(errorStatus(errors.New("job supervisor: a resident supervisor runs jobs of a PID namespace of its own, not in a user namespace")))
	}
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
	job, err := startIsolated(spec, stdio, home, files)
	closeAll(stdio)
	if err != nil {
		werr := writeStatus(errorStatus(err))
		if errors.Is(err, errInJobCgroup) || errors.Is(err, errNotHome) {
			// Its memory and threads would count against the next
			// jobs' limits, or its mounts be theirs: it ends, and the
			// claim's next job starts another.
			return err
		}
		return werr
	}
	if err := writeStatus(Status{Started: true}); err != nil {
		_ = job.Release()
		return err
	}
	st := reapJob(job.Pid)
	_ = job.Release()
	// A starved machine may have had the runtime start another thread
	// while the job ran (its goroutines' work handed on while the main
	// thread waited): it ends before the next job.
	shedIdleThreads()
	var ru1 syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru1) == nil {
		st.UserCPU = time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano()).Seconds()
		st.SysCPU = time.Duration(ru1.Stime.Nano() - ru0.Stime.Nano()).Seconds()
	}
	return writeStatus(st)
}

// errInJobCgroup is the error of a supervisor that could not leave a job's
// cgroup.
var errInJobCgroup = errors.New("leaving the job's cgroup")

// errNotHome is the error of a supervisor that could not return to its own
// mount namespace from a job's.
var errNotHome = errors.New("returning to the supervisor's mount namespace")

// startIsolated starts the job: in a mount namespace of its own with the
// spec's private directories mounted, made on the calling (main, locked)
// thread, which returns to the supervisor's mount namespace home once the
// job has started; in the job's cgroups, which the supervisor then leaves.
// The job's mount namespace lives as long as a process of the job does.
func startIsolated(spec Spec, stdio [3]*os.File, home int, files *cgroupFiles) (*os.Process, error) {
	if len(spec.Mounts) == 0 {
		return startInCgroups(spec, stdio, files)
	}
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return nil, fmt.Errorf("job supervisor: a mount namespace for the job: %w", err)
	}
	job, err := func() (*os.Process, error) {
		if err := mountPrivate(spec.Mounts, spec.Dir, false); err != nil {
			return nil, fmt.Errorf("job supervisor: %w", err)
		}
		return startInCgroups(spec, stdio, files)
	}()
	if _, _, e := syscall.RawSyscall(sysSetns, uintptr(home), syscall.CLONE_NEWNS, 0); e != 0 {
		if job != nil {
			_ = syscall.Kill(job.Pid, syscall.SIGKILL)
			reapJob(job.Pid)
			_ = job.Release()
		}
		if err != nil {
			return nil, fmt.Errorf("job supervisor: %w; %w: %w", err, errNotHome, e)
		}
		return nil, fmt.Errorf("job supervisor: %w: %w", errNotHome, e)
	}
	return job, err
}

// startInCgroups starts the job in its cgroups, from the main thread
// (locked: serve). The job is forked from the main thread once that thread
// alone has entered the job's cgroup v1 cgroups, and cloned into its
// cgroup v2 cgroup; the thread then returns to the supervisor's own. The
// supervisor's other threads never leave them: moving one thread, not
// every thread of the supervisor, into the job's cgroups and back is what
// a job's start costs the kernel's cgroup locks. Where the kernel does not
// clone into a cgroup, the supervisor moves itself whole
// (startInCgroupsWhole), from then on.
func startInCgroups(spec Spec, stdio [3]*os.File, files *cgroupFiles) (*os.Process, error) {
	if files.wholeProcess {
		return startInCgroupsWhole(spec, stdio, files)
	}
	cgroupFD, err := files.enterThread(spec.Cgroup, spec.CgroupSerial)
	if err != nil {
		if herr := files.leaveThread(spec.CgroupHome); herr != nil {
			return nil, fmt.Errorf("job supervisor: entering the job's cgroup: %w; %w: %w", err, errInJobCgroup, herr)
		}
		return nil, fmt.Errorf("job supervisor: entering the job's cgroup: %w", err)
	}
	job, err := startJobIn(spec, stdio, cgroupFD)
	if herr := files.leaveThread(spec.CgroupHome); herr != nil {
		if job != nil {
			_ = syscall.Kill(job.Pid, syscall.SIGKILL)
			// Whatever it forked meanwhile goes with it.
			reapJob(job.Pid)
			_ = job.Release()
		}
		return nil, fmt.Errorf("job supervisor: %w: %w", errInJobCgroup, herr)
	}
	if err != nil && cgroupFD >= 0 {
		// The clone into the cgroup, or the job's exec, failed: started
		// as before clones into a cgroup, the job tells which.
		job, werr := startInCgroupsWhole(spec, stdio, files)
		if werr == nil || errors.Is(werr, errInJobCgroup) {
			files.wholeProcess = werr == nil
			return job, werr
		}
	}
	return job, err
}

// startInCgroupsWhole starts the job in its cgroups, the supervisor (every
// thread of it) moved into them, then back into its own.
func startInCgroupsWhole(spec Spec, stdio [3]*os.File, files *cgroupFiles) (*os.Process, error) {
	if err := files.join(spec.Cgroup, spec.CgroupSerial); err != nil {
		// The supervisor stays for the claim's next jobs: none of this
		// job's cgroups is kept.
		if herr := files.join(spec.CgroupHome, 0); herr != nil {
			return nil, fmt.Errorf("job supervisor: entering the job's cgroup: %w; %w: %w", err, errInJobCgroup, herr)
		}
		return nil, fmt.Errorf("job supervisor: entering the job's cgroup: %w", err)
	}
	job, err := startJob(spec, stdio)
	if err != nil {
		if herr := files.join(spec.CgroupHome, 0); herr != nil {
			return nil, fmt.Errorf("job supervisor: %w; %w: %w", err, errInJobCgroup, herr)
		}
		return nil, err
	}
	if err := files.join(spec.CgroupHome, 0); err != nil {
		_ = syscall.Kill(job.Pid, syscall.SIGKILL)
		// Whatever it forked meanwhile goes with it.
		reapJob(job.Pid)
		_ = job.Release()
		return nil, fmt.Errorf("job supervisor: %w: %w", errInJobCgroup, err)
	}
	return job, nil
}

// reapSweep is how often, once a job's main process has ended, the
// supervisor kills again whatever of the job is left (what forked as the
// last kill went by).
const reapSweep = 50 * time.Millisecond

// reapJob reaps every process of the namespace until none is left, from
// the calling thread: it waits for any child until the job's main process
// (pid) has ended, then kills every other process of the namespace and
// reaps them, killing again every reapSweep until nothing is left. It
// returns how the main process ended and the largest resident set of any
// process of the job.
func reapJob(pid int) Status {
	st := Status{Exited: true}
	ending := false
	var killed time.Time
	pause := time.Millisecond
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		flags := 0
		if ending {
			flags = syscall.WNOHANG
		}
		p, err := syscall.Wait4(-1, &ws, flags, &ru)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return st // ECHILD: every process of the job is gone
		case p == 0:
			// Killed, not yet dead.
			if time.Since(killed) >= reapSweep {
				killTree(true)
				killed = time.Now()
			}
			// On this thread: the runtime's timers would wake
			// another to hand this goroutine back.
			ts := syscall.NsecToTimespec(int64(pause))
			_ = syscall.Nanosleep(&ts, nil)
			pause = min(2*pause, reapSweep)
			continue
		}
		st.MaxRSSKB = max(st.MaxRSSKB, ru.Maxrss)
		if p == pid {
			if ws.Signaled() {
				st.Signal = int(ws.Signal())
			} else {
				st.ExitCode = ws.ExitStatus()
			}
			ending = true
			killTree(true)
			killed = time.Now()
		}
	}
}
