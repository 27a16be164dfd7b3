package startd

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/pond-htc/pond/condor/startd/jobshim"
)

// resident is a job supervisor that stays for the jobs of one claim, one
// after the other (see jobshim.ResidentName), rather than one started for
// each job: a claim reused for its submitter's next jobs starts the agent's
// binary again only when its supervisor is gone. It is the first process
// of a PID namespace of its own and dies with the startd (its parent death
// signal) as the supervisor of one job does; closing it (the claim's end)
// ends it once its job, if any, has ended. Its standard error goes to the
// startd, which keeps the last stderrTail bytes of it and logs them should
// the supervisor die unasked.
type resident struct {
	claim   string
	log     *slog.Logger
	cmd     *exec.Cmd
	conn    *net.UnixConn
	lines   *bufio.Scanner
	stderr  *tail
	exited  chan struct{} // closed once the process has ended
	waitErr error
	once    sync.Once
	killed  atomic.Bool // it is gone, or being killed
	asked   atomic.Bool // the startd killed it
	closing atomic.Bool // the startd told it to exit
}

// stderrTail is how much of a resident supervisor's standard error the
// startd keeps: its last bytes, enough for a panic's message and its
// goroutines' stacks (the whole of what SIGQUIT makes it print, about 6
// KiB: its one goroutine's stack and the runtime's). Nothing is kept
// until it writes.
const stderrTail = 8 << 10

// tail is a writer that keeps the last stderrTail bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
	cut bool // bytes before buf were dropped
}

// Write keeps the end of p.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > stderrTail {
		p, t.cut = p[len(p)-stderrTail:], true
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTail; over > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
		t.cut = true
	}
	return n, nil
}

// String is what was kept, after "..." when the beginning was dropped.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut {
		return "..." + string(t.buf)
	}
	return string(t.buf)
}

// claimRef names the claim claim in the log without giving the claim away:
// a claim's ID is what a schedd proves it holds the claim with.
func claimRef(claim string) string {
	if claim == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(claim))
	return hex.EncodeToString(sum[:4])
}

// startResident starts a resident supervisor for the claim claim, which
// logs to log.
func startResident(log *slog.Logger, claim string) (*resident, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, machineFault(fmt.Errorf("starting the claim's job supervisor: %w", err))
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "supervisor"), os.NewFile(uintptr(fds[1]), "supervisor")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, machineFault(fmt.Errorf("starting the claim's job supervisor: %w", err))
	}
	res := &resident{claim: claim, log: log, conn: c.(*net.UnixConn), stderr: &tail{}, exited: make(chan struct{})}
	res.lines = bufio.NewScanner(res.conn)
	res.lines.Buffer(make([]byte, 4096), 1<<20)
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{jobshim.ResidentName}
	cmd.Dir = "/"
	// As the supervisor of one job (see startSupervisorWith).
	cmd.Env = []string{"GORACE=atexit_sleep_ms=0", "GOMAXPROCS=1"}
	cmd.ExtraFiles = []*os.File{theirs} // jobshim.ConnFD
	// A pipe the startd reads to the end; the supervisor's jobs get
	// streams of their own.
	cmd.Stderr = res.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	res.cmd = cmd
	started := make(chan error, 1)
	go func() {
		// Its parent death signal follows the thread that forked it:
		// that thread stays until it has ended.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		res.waitErr = cmd.Wait()
		if !res.asked.Load() && (!res.closing.Load() || res.waitErr != nil) {
			res.log.Error("the claim's job supervisor died", "pid", cmd.Process.Pid, "err", res.waitErr, "stderr", res.stderr.String())
		}
		close(res.exited)
	}()
	if err := <-started; err != nil {
		res.conn.Close()
		return nil, machineFault(fmt.Errorf("starting the claim's job supervisor: %w", err))
	}
	return res, nil
}

// alive reports whether the supervisor process has not ended.
func (res *resident) alive() bool {
	if res.killed.Load() {
		return false
	}
	select {
	case <-res.exited:
		return false
	default:
		return true
	}
}

// close tells the supervisor to exit once its job, if any, has ended.
func (res *resident) close() {
	res.closing.Store(true)
	res.hangUp()
}

// hangUp closes the startd's end of the supervisor's socket.
func (res *resident) hangUp() { res.once.Do(func() { res.conn.Close() }) }

// kill ends the supervisor and, with it, every process of its namespace.
func (res *resident) kill() {
	res.asked.Store(true)
	res.reap()
}

// reap ends what is left of a supervisor that stopped answering (it died,
// or is about to): unlike kill, its death is not the startd's doing, and
// is logged.
func (res *resident) reap() {
	res.killed.Store(true)
	res.hangUp()
	_ = syscall.Kill(res.cmd.Process.Pid, syscall.SIGKILL)
}

// next reads the supervisor's next status line.
func (res *resident) next() (jobshim.Status, bool) {
	var st jobshim.Status
	if !res.lines.Scan() {
		return st, false
	}
	return st, json.Unmarshal(res.lines.Bytes(), &st) == nil
}

// run has the supervisor start spec's job with its standard streams and
// waits until it has. The supervisor of the returned job is res; once the
// job has ended, done is called with whether res can run the claim's next
// job (it said how the job ended, and lives).
func (res *resident) run(spec jobshim.Spec, stdin, stdout, stderr *os.File, done func(reusable bool)) (*supervisor, error) {
	spec.Protocol = jobshim.Protocol
	spec.PIDNamespace = true
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, machineFault(fmt.Errorf("sending the job to its supervisor: %w", err))
	}
	b = append(b, '\n')
	// The streams go with the spec's first byte, the rest after it.
	rights := syscall.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	_, _, err = res.conn.WriteMsgUnix(b[:1], rights, nil)
	if err == nil {
		_, err = res.conn.Write(b[1:])
	}
	runtime.KeepAlive(stdin)
	runtime.KeepAlive(stdout)
	runtime.KeepAlive(stderr)
	if err != nil {
		res.reap()
		return nil, machineFault(fmt.Errorf("sending the job to its supervisor: %w", err))
	}
	first, ok := res.next()
	switch {
	case !ok:
		res.reap()
		<-res.exited
		return nil, machineFault(fmt.Errorf("the job's supervisor ended before starting the job: %v", res.waitErr))
	case first.Error != "":
		done(res.alive())
		return nil, startError(first)
	case !first.Started:
		res.kill()
		return nil, machineFault(errors.New("the job's supervisor said something other than that it started the job"))
	}
	p := &supervisor{cmd: res.cmd, pidNS: true, res: res, waited: make(chan struct{})}
	go func() {
		st, ok := res.next()
		if ok && st.Exited {
			p.final = &st
		} else {
			// Killed, or died: the job's processes went with it.
			res.reap()
			<-res.exited
			p.waitErr = res.waitErr
		}
		// Kept for the claim's next job before the job's end is seen:
		// that job, which comes once this one's end is reported, finds
		// it.
		done(p.final != nil && res.alive())
		close(p.waited)
	}()
	return p, nil
}

// startOnResident starts the job of spec under the resident supervisor of
// the claim claim, starting one if the claim has none (its first job, or
// the last one's supervisor died or was killed with its job). A resident
// supervisor that fails to take the job is replaced once. The supervisor
// logs as the slot slotName's.
func (s *Startd) startOnResident(slotName, claim string, spec jobshim.Spec, stdio [3]*os.File) (*supervisor, error) {
	done := func(res *resident) func(bool) {
		return func(reusable bool) { s.keepResident(res, reusable) }
	}
	s.mu.Lock()
	res := s.residents[claim]
	delete(s.residents, claim)
	s.mu.Unlock()
	if res != nil {
		sup, err := res.run(spec, stdio[0], stdio[1], stdio[2], done(res))
		if err == nil || res.alive() {
			// Started, or the job's own error (it could not be started).
			return sup, err
		}
		s.log.Info("the claim's job supervisor is gone: starting another", "err", err)
	}
	res, err := startResident(s.log.With("slot", slotName, "claim", claimRef(claim)), claim)
	if err != nil {
		return nil, err
	}
	return res.run(spec, stdio[0], stdio[1], stdio[2], done(res))
}

// keepResident keeps res for its claim's next job once its job has ended,
// when it can run one (reusable) and the claim lives; otherwise res is
// told to exit.
func (s *Startd) keepResident(res *resident, reusable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, live := s.claims[res.claim]
	if !reusable || !live || s.closed || sl.state != "Claimed" || s.residents[res.claim] != nil {
		res.close()
		return
	}
	s.residents[res.claim] = res
}

// closeResidentsLocked tells the resident supervisor of the claim claim,
// or of every claim when claim is empty, to exit: the claim has ended;
// s.mu must be held.
func (s *Startd) closeResidentsLocked(claim string) {
	for id, res := range s.residents {
		if claim == "" || id == claim {
			res.close()
			delete(s.residents, id)
		}
	}
}
