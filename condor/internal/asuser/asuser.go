// Package asuser lets a daemon that runs as root open, read and write files
// with the rights of another local account, such as a job's owner, so that
// the kernel itself decides what that account may reach: a symbolic link, a
// file swapped after a check or a directory the account cannot search gives
// it nothing the account could not have had on its own.
//
// [Do] runs a function on an operating-system thread of its own whose
// file-system user and groups (setfsuid, setfsgid, setgroups) are the
// account's and which holds no capabilities. Only that thread changes: the
// daemon's other threads keep their rights, and the thread is never given
// back to the Go scheduler (its goroutine ends while locked to it, so the
// runtime ends the thread). Its real and effective user stay root, so the
// account cannot signal or trace it while it works.
package asuser

import (
	"errors"
	"fmt"
	"os/user"
	"runtime"
	"strconv"
)

// Account is a local user whose rights file operations are performed with.
type Account struct {
	Name   string
	UID    uint32
	GID    uint32   // primary group
	Groups []uint32 // supplementary groups
}

// ErrNoAccount is the error for an owner with no account on this machine.
var ErrNoAccount = errors.New("has no account on this machine")

// Lookup returns the local account name with its groups. An unknown name
// gives an error that wraps [ErrNoAccount] and names it.
func Lookup(name string) (*Account, error) {
	if name == "" {
		return nil, fmt.Errorf("an empty user name %w", ErrNoAccount)
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return nil, fmt.Errorf("user %q %w", name, ErrNoAccount)
		}
		return nil, fmt.Errorf("looking up user %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %q: %w", name, err)
	}
	a := &Account{Name: name, UID: uint32(uid), GID: uint32(gid)}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("groups of user %q: %w", name, err)
	}
	for _, g := range gids {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("groups of user %q: %w", name, err)
		}
		a.Groups = append(a.Groups, uint32(n))
	}
	return a, nil
}

// String returns the account's name and ids, for messages.
func (a *Account) String() string {
	return fmt.Sprintf("%s (uid %d)", a.Name, a.UID)
}

// Do runs f with the file-system rights of a and returns its error. With a
// nil a, or an account of uid 0, f runs with the process's own rights.
// Only the goroutine that runs f has a's rights: f must do its file
// operations itself, not in goroutines it starts.
func Do(a *Account, f func() error) error {
	if a == nil || a.UID == 0 {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		if err := lockAs(a); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}

// lockAs locks the calling goroutine to its thread for good and gives the
// thread a's rights. The goroutine must end once it no longer acts as a:
// the runtime then ends the thread, and the changed credentials with it.
func lockAs(a *Account) error {
	runtime.LockOSThread()
	if err := become(a); err != nil {
		return fmt.Errorf("acting as %s: %w", a, err)
	}
	return nil
}
