// Package local stores pond's state in one JSON file on the local file
// system, with the previous document kept beside it as a backup and an
// exclusive lock file taken for the duration of an operation.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pond-htc/pond/state"
)

// DefaultPath is the state file used when none is configured, relative to
// the working directory.
const DefaultPath = "pond.state"

// Suffixes of the files kept beside the state file.
const (
	BackupSuffix = ".backup"
	LockSuffix   = ".lock.info"
)

// Backend stores the state in a file. Writes are atomic: a reader sees
// either the previous document or the new one, even when the writer is
// killed. Backend is safe for concurrent use; the lock coordinates separate
// processes.
type Backend struct {
	path string
}

var _ state.Backend = (*Backend)(nil)

// New returns a backend storing the state at path (DefaultPath when empty).
func New(path string) *Backend {
	if path == "" {
		path = DefaultPath
	}
	return &Backend{path: path}
}

// Path is the state file.
func (b *Backend) Path() string { return b.path }

// BackupPath is the file holding the previous document.
func (b *Backend) BackupPath() string { return b.path + BackupSuffix }

// LockPath is the lock file.
func (b *Backend) LockPath() string { return b.path + LockSuffix }

// Read returns the stored state, or (nil, nil) when the file does not exist.
// A file that cannot be decoded, or is in a newer format, is an error.
func (b *Backend) Read(ctx context.Context) (*state.State, error) {
	s, _, err := b.read()
	return s, err
}

func (b *Backend) read() (*state.State, []byte, error) {
	data, err := os.ReadFile(b.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read state: %w", err)
	}
	s, err := state.Decode(data, b.path)
	if err != nil {
		return nil, nil, fmt.Errorf("read state: %w", err)
	}
	return s, data, nil
}

// Write stores s, unless its content equals the stored document's (see
// state.PrepareWrite, which also sets s.Serial). The previous document is
// first kept as BackupPath. A stored file that cannot be decoded is never
// overwritten.
func (b *Backend) Write(ctx context.Context, s *state.State) error {
	if s == nil {
		return errors.New("write state: nil state")
	}
	stored, old, err := b.read()
	if err != nil {
		return fmt.Errorf("refusing to overwrite %s: %w", b.path, err)
	}
	next := s.DeepCopy()
	if !state.PrepareWrite(stored, next) {
		s.Serial = next.Serial
		return nil
	}
	data, err := state.Encode(next)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if old != nil {
		if err := writeAtomic(b.BackupPath(), old); err != nil {
			return fmt.Errorf("write state backup: %w", err)
		}
	}
	if err := writeAtomic(b.path, data); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	removeStaleTemps(b.path)
	s.Serial = next.Serial
	s.FormatVersion = next.FormatVersion
	return nil
}

// writeAtomic replaces path with data: a temporary file in the same
// directory is written, synced and renamed over path, and the directory is
// synced so that the rename survives a crash.
func writeAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// StaleTempAge is how old a temporary file left by an interrupted write must
// be before a later write removes it. Writes take milliseconds, so a file
// this old belongs to a writer that died.
const StaleTempAge = 10 * time.Minute

// removeStaleTemps deletes temporary files of path's writes (and of its
// backup's) older than StaleTempAge, left behind by killed writers. It is
// best effort.
func removeStaleTemps(path string) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	for _, pattern := range []string{"." + base + ".tmp-*", "." + base + BackupSuffix + ".tmp-*"} {
		matches, _ := filepath.Glob(filepath.Join(dir, globEscape(pattern)))
		for _, m := range matches {
			if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > StaleTempAge {
				os.Remove(m)
			}
		}
	}
}

// globEscape quotes the glob metacharacters of a file name, leaving the
// final "*" of the pattern.
func globEscape(pattern string) string {
	name := strings.TrimSuffix(pattern, "*")
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Lock creates LockPath exclusively, holding info as JSON. Fields of info
// left empty are filled (see state.LockInfo.Complete). When the lock is
// held, the error is a *state.LockError describing the holder, and says so
// when the holder is a process of this host that has died.
func (b *Backend) Lock(ctx context.Context, info state.LockInfo) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("lock state: %w", err)
	}
	info.Complete(b.path)
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return "", fmt.Errorf("lock state: %w", err)
	}
	f, err := os.OpenFile(b.LockPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) && b.reclaimBroken() {
		f, err = os.OpenFile(b.LockPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if errors.Is(err, fs.ErrExist) {
		return "", b.lockError()
	}
	if err != nil {
		return "", fmt.Errorf("lock state: %w", err)
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(b.LockPath())
		return "", fmt.Errorf("lock state: write %s: %w", b.LockPath(), err)
	}
	return info.ID, nil
}

// BrokenLockGrace is how long a lock file may stay empty or unreadable
// before Lock takes it over. Lock creates the file and writes its content at
// once, so a file in that state for longer was left by a pondctl killed in
// between; a younger one may belong to a writer about to write.
const BrokenLockGrace = 10 * time.Second

// reclaimBroken removes the lock file when it is empty or unreadable and was
// last written more than BrokenLockGrace ago, and reports whether it did.
// The file is first renamed aside, so that of several processes reclaiming
// it at once only one removes it; should what was renamed not be the broken
// file (another process took it over and locked again meanwhile), it is put
// back.
func (b *Backend) reclaimBroken() bool {
	lock := b.LockPath()
	fi, err := os.Lstat(lock)
	if err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) <= BrokenLockGrace {
		return false
	}
	if _, err := b.holder(); err == nil || errors.Is(err, fs.ErrNotExist) {
		return false
	}
	aside := fmt.Sprintf("%s.broken-%d-%d", lock, os.Getpid(), time.Now().UnixNano())
	if err := os.Rename(lock, aside); err != nil {
		return false
	}
	moved, err := os.Lstat(aside)
	if err != nil || !os.SameFile(fi, moved) || !moved.ModTime().Equal(fi.ModTime()) || moved.Size() != fi.Size() {
		// Not the file judged broken: restore it unless a new lock exists.
		if os.Link(aside, lock) == nil {
			os.Remove(aside)
		}
		return false
	}
	os.Remove(aside)
	return true
}

// holder reads the lock file.
func (b *Backend) holder() (*state.LockInfo, error) {
	data, err := os.ReadFile(b.LockPath())
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("lock file %s is empty: it is being created, or its creator died, in which case it is taken over once it is %s old", b.LockPath(), BrokenLockGrace)
	}
	var info state.LockInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("lock file %s is unreadable (%v): it is being written, or its writer died, in which case it is taken over once it is %s old", b.LockPath(), err, BrokenLockGrace)
	}
	return &info, nil
}

func (b *Backend) lockError() error {
	info, err := b.holder()
	if errors.Is(err, fs.ErrNotExist) {
		// Released between our attempt and now: still report it as held so
		// that a waiting caller retries.
		return state.UnreadableLockError(fmt.Sprintf("lock file %s was released while being read", b.LockPath()))
	}
	if err != nil {
		return state.UnreadableLockError(err.Error())
	}
	return &state.LockError{Info: info, HolderGone: info.HolderGone(), Where: "lock file " + b.LockPath(), Err: state.ErrLocked}
}

// Unlock removes the lock if id is the holder's.
func (b *Backend) Unlock(ctx context.Context, id string) error {
	return b.unlock(id, "unlock")
}

// ForceUnlock removes the lock whatever process holds it, if id is the
// lock's ID (as printed in the lock error).
func (b *Backend) ForceUnlock(ctx context.Context, id string) error {
	return b.unlock(id, "force-unlock")
}

func (b *Backend) unlock(id, op string) error {
	info, err := b.holder()
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: state %s is not locked", op, b.path)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if info.ID != id {
		return fmt.Errorf("%s: lock ID %q does not match the lock held by %s (operation %s, lock ID %s)", op, id, info.Who, info.Operation, info.ID)
	}
	if err := os.Remove(b.LockPath()); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
