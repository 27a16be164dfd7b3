package startd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/internal/plainfile"
)

// DefaultSlotUIDs is the default of STARTER_SLOT_UIDS: uids that no
// distribution or systemd hands out (systemd leaves 60578-61183 unused), and
// that a user namespace of 65536 ids still maps.
const DefaultSlotUIDs = "60600-61183"

// slotUsers hands out the users jobs run as when the startd runs as root,
// as HTCondor's slot users: a static slot N whose SLOT<N>_USER names an
// account runs its jobs as that account; any other job runs as a uid of
// STARTER_SLOT_UIDS (group the same number, no passwd entry needed) that no
// other running job holds. A uid is held with a lock file in a root-only
// directory, so that the startds of several agents on one machine never
// hand out the same uid at once. When a job ends, every process left with
// its uid is killed before the uid is free again (see lock for a startd
// that died first).
type slotUsers struct {
	named   map[int]*syscall.Credential // SLOT<N>_USER by static slot id
	uids    []uint32                    // STARTER_SLOT_UIDS but those of accounts
	lockDir string

	// freed are the uids of STARTER_SLOT_UIDS this startd's jobs freed,
	// the last freed last: a job takes one of them first, so that the
	// startds of one machine do not all try the lowest uids, which the
	// others hold, at every start.
	mu    sync.Mutex
	freed []uint32
}

// jobUser is the user one job runs as, held until release.
type jobUser struct {
	cred *syscall.Credential
	lock *os.File
	// anonymous says the uid is one of STARTER_SLOT_UIDS: no account, so
	// no login, no cron or mail, nothing outside the job that starts a
	// process as it.
	anonymous bool
	users     *slotUsers // that handed out an anonymous uid
}

// newSlotUsers reads SLOT<N>_USER for the static slots and
// STARTER_SLOT_UIDS.
func newSlotUsers(cfg *config.Config, slots []*slot) (*slotUsers, error) {
	u := &slotUsers{named: map[int]*syscall.Credential{}}
	for _, sl := range slots {
		knob := fmt.Sprintf("SLOT%d_USER", sl.id)
		name, ok := cfg.Get(knob)
		if !ok || strings.TrimSpace(name) == "" {
			continue
		}
		if sl.partitionable {
			return nil, fmt.Errorf("%s: slot %d is partitionable, and its dynamic slots run at once: they take uids of STARTER_SLOT_UIDS", knob, sl.id)
		}
		a, err := asuser.Lookup(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", knob, err)
		}
		if a.UID == 0 {
			return nil, fmt.Errorf("%s: jobs do not run as root", knob)
		}
		for id, other := range u.named {
			if other.Uid == a.UID {
				return nil, fmt.Errorf("%s: slot %d runs its jobs as uid %d already: each slot needs a user of its own", knob, id, a.UID)
			}
		}
		u.named[sl.id] = &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: a.Groups}
	}
	spec, _ := cfg.Get("STARTER_SLOT_UIDS")
	lo, hi, err := parseUIDRange(firstNonEmpty(strings.TrimSpace(spec), DefaultSlotUIDs))
	if err != nil {
		return nil, fmt.Errorf("STARTER_SLOT_UIDS: %w", err)
	}
	for uid := lo; uid <= hi; uid++ {
		// A uid of an account is that account's, not a slot's.
		if _, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
			continue
		}
		u.uids = append(u.uids, uid)
	}
	if u.lockDir, err = lockDir(); err != nil {
		return nil, err
	}
	return u, nil
}

// parseUIDRange parses "LOW-HIGH".
func parseUIDRange(spec string) (lo, hi uint32, err error) {
	a, b, ok := strings.Cut(spec, "-")
	l, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	h, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("%q is not a range of uids LOW-HIGH", spec)
	case l == 0 || l > h:
		return 0, 0, fmt.Errorf("%q: the range must start above 0 and not end below its start", spec)
	case h >= 1<<31-1:
		return 0, 0, fmt.Errorf("%q: uids from 2147483647 up are not safe to use", spec)
	}
	return uint32(l), uint32(h), nil
}

// lockDir is the machine-wide directory of the slot uids' lock files, made
// private to root: /run/pond/slot-uids, or below the temporary directory
// where there is no /run.
func lockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "pond-slot-uids")
	if fi, err := os.Stat("/run"); err == nil && fi.IsDir() {
		dir = "/run/pond/slot-uids"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the slot users' lock directory: %w", err)
	}
	// Someone else's directory (made in /tmp before us) or one others may
	// write could let two jobs share a uid.
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return "", fmt.Errorf("slot users' lock directory: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
		return "", fmt.Errorf("slot users' lock directory %s must be a directory of root's that no one else may write", dir)
	}
	return dir, nil
}

// acquire returns the user a job of slot sl runs as.
func (u *slotUsers) acquire(sl *slot) (*jobUser, error) {
	if cred := u.named[sl.id]; cred != nil && sl.parent == nil {
		lock, ok, err := u.lock(cred.Uid)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("SLOT%d_USER (uid %d) runs a job of another startd on this machine", sl.id, cred.Uid)
		}
		return &jobUser{cred: cred, lock: lock}, nil
	}
	// A uid a job of this startd freed last, else the lowest free uid:
	// either needs no search for what its last job left.
	for {
		uid, ok := u.takeFreed()
		if !ok {
			break
		}
		lock, ok, err := u.lock(uid)
		if err != nil {
			return nil, err
		}
		if ok {
			return u.anonymous(uid, lock), nil
		}
		// Another startd of the machine took it meanwhile.
	}
	for _, uid := range u.uids {
		lock, ok, err := u.lock(uid)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		return u.anonymous(uid, lock), nil
	}
	return nil, fmt.Errorf("every uid of STARTER_SLOT_UIDS (%d of them) runs a job", len(u.uids))
}

// anonymous is the user of a job that runs as uid of STARTER_SLOT_UIDS,
// whose lock it holds.
func (u *slotUsers) anonymous(uid uint32, lock *os.File) *jobUser {
	return &jobUser{cred: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}, lock: lock, anonymous: true, users: u}
}

// takeFreed returns the uid a job of this startd freed last, and forgets
// it.
func (u *slotUsers) takeFreed() (uint32, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := len(u.freed)
	if n == 0 {
		return 0, false
	}
	uid := u.freed[n-1]
	u.freed = u.freed[:n-1]
	return uid, true
}

// noteFreed remembers that a job of this startd freed uid; at most as
// many uids as STARTER_SLOT_UIDS has are remembered.
func (u *slotUsers) noteFreed(uid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.freed = slices.DeleteFunc(u.freed, func(x uint32) bool { return x == uid })
	if len(u.freed) >= len(u.uids) {
		u.freed = u.freed[1:]
	}
	u.freed = append(u.freed, uid)
}

// lock takes the lock of uid; ok is false when another job holds it. The
// lock file says "released" when the last job of the uid ended with its
// processes killed; otherwise (its startd died) the processes left with
// the uid are killed first, so that they do not meet the next job.
func (u *slotUsers) lock(uid uint32) (*os.File, bool, error) {
	p := filepath.Join(u.lockDir, strconv.FormatUint(uint64(uid), 10))
	f, err := plainfile.Open(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("slot user lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("slot user lock %s: %w", p, err)
	}
	var mark [len(released)]byte
	if n, _ := f.ReadAt(mark[:], 0); n != len(mark) || string(mark[:]) != released {
		killUID(uid)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("slot user lock %s: %w", p, err)
	}
	return f, true, nil
}

// released is what the lock file of a uid says while no job holds it.
const released = "released"

// account is the job's user as asuser acts as it; nil for a nil j (the
// startd's own rights).
func (j *jobUser) account() *asuser.Account {
	if j == nil {
		return nil
	}
	return &asuser.Account{Name: fmt.Sprintf("the job's user, uid %d", j.cred.Uid), UID: j.cred.Uid, GID: j.cred.Gid, Groups: j.cred.Groups}
}

// stop kills what the job left running as its user.
func (j *jobUser) stop() { killUID(j.cred.Uid) }

// free frees the user of a job whose processes were stopped.
func (j *jobUser) free() {
	_, _ = j.lock.WriteAt([]byte(released), 0)
	j.lock.Close() // and the lock with it
	if j.users != nil {
		j.users.noteFreed(j.cred.Uid)
	}
}

// release stops the job's processes and frees its user.
func (j *jobUser) release() {
	j.stop()
	j.free()
}

// leftNothing reports whether a job of this user whose supervisor has
// ended, isolated with a PID namespace or not (pidNS), can have left a
// process running as it. A job of an anonymous uid under a supervisor that
// was the first process of a PID namespace cannot: every process it could
// start was in that namespace, and the kernel kills them all, and reaps
// them, before the supervisor's end is seen. Its uid is then freed at once,
// without a search of every process on the machine (which grows with
// them). A named account (SLOT<N>_USER) may have processes a job started
// outside its namespace, through a login or a crontab of its own: for it,
// as without a PID namespace, stop searches.
func (j *jobUser) leftNothing(pidNS bool) bool { return pidNS && j.anonymous }

// killUID kills every process that runs as uid (real, effective or saved)
// until none is left, for a while at most. Each process is signalled
// through a pidfd taken before its uid is checked again, so that a pid
// reused meanwhile is not killed.
func killUID(uid uint32) {
	for range 50 {
		pids := uidProcesses(uid)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
			if e != 0 {
				continue
			}
			if procUID(pid, uid) {
				_, _, _ = syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
			}
			syscall.Close(int(fd))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The pidfd system calls have the same numbers on every architecture.
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)

// uidProcesses lists the live processes that run as uid.
func uidProcesses(uid uint32) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil
	}
	var pids []int
	buf := make([]byte, 1024)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if statusUID(buf, pid, uid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procUID reports whether process pid is alive (not a zombie) and runs as
// uid.
func procUID(pid int, uid uint32) bool {
	return statusUID(make([]byte, 1024), pid, uid)
}

// statusUID reports, from the head of /proc/PID/status read into buf (the
// state and the uids come before the first kilobyte ends), whether process
// pid is alive and runs as uid (real, effective or saved). This is the
// startd's per-job search for what a job left, so it reads with as few
// system calls as it can.
func statusUID(buf []byte, pid int, uid uint32) bool {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/status", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return false
	}
	var want [10]byte
	w := strconv.AppendUint(want[:0], uint64(uid), 10)
	for line := range bytes.Lines(buf[:n]) {
		switch {
		case bytes.HasPrefix(line, []byte("State:")):
			if f := bytes.Fields(line[len("State:"):]); len(f) > 0 && string(f[0]) == "Z" {
				return false
			}
		case bytes.HasPrefix(line, []byte("Uid:")):
			f := bytes.Fields(line[len("Uid:"):])
			return len(f) >= 3 && (bytes.Equal(f[0], w) || bytes.Equal(f[1], w) || bytes.Equal(f[2], w))
		}
	}
	return false
}
