package state

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// NewLockInfo describes a lock about to be taken by this process for the
// given operation ("apply", "plan", "state mv", ...): a fresh ID, Who as
// user@host, the creation time and this process's id. Backends fill Path.
func NewLockInfo(operation, version string) LockInfo {
	return LockInfo{
		ID:        uuid.NewString(),
		Operation: operation,
		Who:       Who(),
		Version:   version,
		Created:   time.Now().UTC(),
		PID:       os.Getpid(),
	}
}

// Who returns user@host for this process, as recorded in LockInfo.Who.
func Who() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	} else if v := os.Getenv("USER"); v != "" {
		name = v
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return name + "@" + host
}

// Complete fills the fields of info a caller left empty: ID, Who, Created
// and PID, and sets Path.
func (info *LockInfo) Complete(path string) {
	if info.ID == "" {
		info.ID = uuid.NewString()
	}
	if info.Who == "" {
		info.Who = Who()
	}
	if info.Created.IsZero() {
		info.Created = time.Now().UTC()
	}
	if info.PID == 0 {
		info.PID = os.Getpid()
	}
	info.Path = path
}

// HolderGone reports whether the lock was taken by a process on this host
// that is no longer running. It is false whenever that cannot be told: a
// holder on another host, or without a pid.
func (info *LockInfo) HolderGone() bool {
	if info == nil || info.PID <= 0 {
		return false
	}
	at := strings.LastIndexByte(info.Who, '@')
	host, err := os.Hostname()
	if at < 0 || err != nil || info.Who[at+1:] != host {
		return false
	}
	err = syscall.Kill(info.PID, 0)
	return errors.Is(err, syscall.ESRCH)
}

// Backoff bounds for LockWait.
const (
	lockWaitFirst = 50 * time.Millisecond
	lockWaitMax   = 2 * time.Second
)

// LockWait takes the lock on b, retrying with exponential backoff while
// someone else holds it, for at most timeout, as Terraform's -lock-timeout
// does. A zero timeout tries once. Errors other than a *LockError end the
// wait at once. When the time is up, the error wraps the last *LockError,
// so that the holder can be shown.
func LockWait(ctx context.Context, b Backend, info LockInfo, timeout time.Duration) (string, error) {
	id, err := b.Lock(ctx, info)
	var le *LockError
	if err == nil || timeout <= 0 || !errors.As(err, &le) {
		return id, err
	}
	deadline := time.Now().Add(timeout)
	delay := lockWaitFirst
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return "", fmt.Errorf("timed out after %s waiting for the state lock: %w", timeout, err)
		}
		// Up to a quarter of jitter keeps waiters from retrying in step.
		wait := min(delay+rand.N(delay/4+1), remaining)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the state lock: %w (last attempt: %w)", ctx.Err(), err)
		case <-timer.C:
		}
		id, err = b.Lock(ctx, info)
		if err == nil || !errors.As(err, &le) {
			return id, err
		}
		delay = min(delay*2, lockWaitMax)
	}
}
