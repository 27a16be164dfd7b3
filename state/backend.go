package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Backend stores one state document and its lock. Implementations must be
// safe for use by several processes at once: Lock is the only coordination
// between them.
type Backend interface {
	// Read returns the stored state, or (nil, nil) when none exists yet. A
	// document that cannot be decoded, or whose format_version is newer than
	// FormatVersion, is an error and is left untouched.
	Read(ctx context.Context) (*State, error)
	// Write stores s atomically, keeping the previous document as a backup.
	// It applies the serial rule of PrepareWrite against the stored
	// document: nothing is written when the content is unchanged, and
	// s.Serial is updated to the serial that is (or remains) stored. A stored
	// document that cannot be decoded is never overwritten.
	Write(ctx context.Context, s *State) error
	// Lock takes the lock once, without waiting. When another holder has it,
	// the error is a *LockError describing the holder.
	Lock(ctx context.Context, info LockInfo) (string, error)
	// Unlock releases the lock taken with the given id.
	Unlock(ctx context.Context, id string) error
	// ForceUnlock removes the lock whatever its holder, if its id matches.
	ForceUnlock(ctx context.Context, id string) error
}

// LockError reports that the state is locked by someone else.
type LockError struct {
	// Info describes the holder; nil when the lock exists but its
	// description cannot be read.
	Info *LockInfo
	// HolderGone is true when the holder is a process on this host that is
	// no longer running, so the lock is most likely stale.
	HolderGone bool
	// Where names the lock: "lock file PATH", "lock object s3://...".
	Where string
	// Err wraps ErrLocked.
	Err error
}

// Error says where the lock is, describes the holder and says how to
// release a lock its holder left.
func (e *LockError) Error() string {
	if e.Info == nil {
		return fmt.Sprintf("state is locked: %v", e.Err)
	}
	where := ""
	if e.Where != "" {
		where = " in " + e.Where
	}
	host := e.Info.Who
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	msg := fmt.Sprintf("state is locked by %s (operation %s, pid %d, since %s, lock ID %s)%s",
		e.Info.Who, e.Info.Operation, e.Info.PID, e.Info.Created.Format("2006-01-02 15:04:05 MST"), e.Info.ID, where)
	this, _ := os.Hostname()
	switch {
	case e.HolderGone:
		msg += fmt.Sprintf("; process %d is no longer running on this host: if no other pondctl is using this state, release the lock with `pondctl force-unlock %s`",
			e.Info.PID, e.Info.ID)
	case e.Info.PID <= 0 || host == "":
		msg += fmt.Sprintf("; its holder's process is not recorded: wait for it (-lock-timeout), or, once you are sure no pondctl is using this state, release the lock with `pondctl force-unlock %s`", e.Info.ID)
	case host != this:
		msg += fmt.Sprintf("; the holder runs on another host, %s, where only its process %d can be seen: wait for it (-lock-timeout), or, once you are sure it is no longer running there, release the lock with `pondctl force-unlock %s`",
			host, e.Info.PID, e.Info.ID)
	default:
		msg += fmt.Sprintf("; process %d still runs on this host: wait for it to finish (-lock-timeout)", e.Info.PID)
	}
	return msg
}

// Unwrap returns Err, so that errors.Is(err, ErrLocked) holds.
func (e *LockError) Unwrap() error { return e.Err }

// ErrLocked is wrapped by every LockError.
var ErrLocked = errors.New("state locked")

// UnreadableLockError returns a *LockError for a lock that is held but whose
// description cannot be read; reason says why and what to do.
func UnreadableLockError(reason string) *LockError {
	return &LockError{Err: lockReason(reason)}
}

// lockReason is an explanation that counts as ErrLocked.
type lockReason string

func (r lockReason) Error() string        { return string(r) }
func (r lockReason) Is(target error) bool { return target == ErrLocked }
