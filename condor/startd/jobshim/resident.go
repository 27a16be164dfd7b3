package jobshim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
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
// mounted in a mount namespace of the job's own, made by the thread that
// starts the job, which goes with the job; each job joins its own cgroups
// and runs as its own credential.
const ResidentName = Name + "-resident"

// ConnFD is a resident supervisor's socket to the startd.
const ConnFD = 3

// serve is a resident supervisor's main loop; it returns its exit code.
func serve() int {
	// The main thread is this goroutine's alone: a job's thread, which
	// ends with its job, must be another.
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
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-stop
		// The first process of the namespace ends: the kernel kills
		// every other one.
		killTree(true)
		os.Exit(1)
	}()
	var buf []byte
	for {
		spec, stdio, err := readSpec(&buf)
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			return fail(fmt.Errorf("job supervisor: reading what to run: %w", err))
		}
		if err := serveJob(spec, stdio); err != nil {
			// The startd is gone.
			killTree(true)
			return 1
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
// startd's end of the socket gone.
func serveJob(spec Spec, stdio [3]*os.File) error {
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
	type result struct {
		job *os.Process
		err error
	}
	started := make(chan result, 1)
	done := make(chan struct{})
	go func() {
		// Never unlocked: the thread ends with this goroutine, and with
		// it the job's mount namespace once the job's processes are
		// gone. The job dies with the thread (Pdeathsig), which lives
		// until every process of the job is reaped.
		runtime.LockOSThread()
		job, err := startIsolated(spec, stdio)
		started <- result{job, err}
		if err == nil {
			<-done
		}
	}()
	res := <-started
	closeAll(stdio)
	if res.err != nil {
		err := writeStatus(errorStatus(res.err))
		if errors.Is(res.err, errInJobCgroup) {
			// Its memory and threads would count against the next
			// jobs' limits: it ends, and the claim's next job starts
			// another.
			return res.err
		}
		return err
	}
	if err := writeStatus(Status{Started: true}); err != nil {
		close(done)
		return err
	}
	st := supervise(res.job.Pid, true, nil)
	_ = res.job.Release()
	close(done)
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

// startIsolated starts the job from the calling thread, locked to it: in a
// mount namespace of the thread's own with the spec's private directories
// mounted, in the job's cgroups, which the supervisor then leaves.
func startIsolated(spec Spec, stdio [3]*os.File) (*os.Process, error) {
	if len(spec.Mounts) > 0 {
		if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
			return nil, fmt.Errorf("job supervisor: a mount namespace for the job: %w", err)
		}
		if err := mountPrivate(spec.Mounts, spec.Dir, false); err != nil {
			return nil, fmt.Errorf("job supervisor: %w", err)
		}
	}
	if err := joinCgroups(spec.Cgroup); err != nil {
		// The supervisor stays for the claim's next jobs: none of this
		// job's cgroups is kept.
		if herr := joinCgroups(spec.CgroupHome); herr != nil {
			return nil, fmt.Errorf("job supervisor: entering the job's cgroup: %w; %w: %w", err, errInJobCgroup, herr)
		}
		return nil, fmt.Errorf("job supervisor: entering the job's cgroup: %w", err)
	}
	job, err := startJob(spec, stdio)
	if err != nil {
		if herr := joinCgroups(spec.CgroupHome); herr != nil {
			return nil, fmt.Errorf("job supervisor: %w; %w: %w", err, errInJobCgroup, herr)
		}
		return nil, err
	}
	if err := joinCgroups(spec.CgroupHome); err != nil {
		_ = syscall.Kill(job.Pid, syscall.SIGKILL)
		// Whatever it forked meanwhile goes with it.
		supervise(job.Pid, true, nil)
		_ = job.Release()
		return nil, fmt.Errorf("job supervisor: %w: %w", errInJobCgroup, err)
	}
	return job, nil
}
