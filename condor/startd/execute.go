package startd

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DefaultSharedExecute is where a startd running as root keeps the
// execute directories its job users could not reach in its data
// directory, as HTCondor's /var/lib/condor/execute.
const DefaultSharedExecute = "/var/lib/pond/execute"

// makeExecute creates the execute directory, which holds the jobs'
// scratch directories (dir_*, each 0700 and its job's user's).
//
// A startd that is not root runs its jobs as its own user: the execute
// directory is DATADIR/execute, as private as the data directory. A root
// startd runs its jobs as slot users, who must reach their scratch
// directories but nothing else of the agent's: DATADIR/execute when every
// directory above it lets them through, else (a data directory private to
// its owner, as the local provider's under .pond, 0700 so that its keys
// and tokens stay the owner's) SharedExecute/NAME-HASH, HASH that of the
// data directory, so that the agents of one host never share one. Either
// is root's, mode 0711: a job user may enter it to reach its own
// directory, and not list it. Every directory it creates outside the data
// directory is verified to be a real directory owned by root, never one a
// local user made there first.
func (s *Startd) makeExecute(asRoot bool) error {
	s.execute = s.configuredExecuteDir()
	if asRoot && !traversable(filepath.Dir(s.execute), stranger) {
		base := firstNonEmpty(s.opts.SharedExecute, DefaultSharedExecute)
		sum := sha256.Sum256([]byte(s.execute))
		s.execute, s.ownExecute = filepath.Join(base, safeName(s.opts.Name)+"-"+hex.EncodeToString(sum[:6])), true
		// The shared tree: BASE's parent may be made (/var/lib/pond,
		// 0755), BASE and the node's own are 0711.
		if err := ownedDir(filepath.Dir(base), 0o755, false); err != nil {
			return fmt.Errorf("creating execute directory: %w", err)
		}
		for _, dir := range []string{base, s.execute} {
			if err := ownedDir(dir, 0o711, true); err != nil {
				return fmt.Errorf("creating execute directory: %w", err)
			}
		}
		return nil
	}
	if err := os.MkdirAll(s.execute, 0o755); err != nil {
		return fmt.Errorf("creating execute directory: %w", err)
	}
	if asRoot {
		// Whatever the agent's umask, the job users must reach their
		// scratch directories inside (each its own, 0700), and not list
		// them.
		if err := os.Chmod(s.execute, 0o711); err != nil {
			return fmt.Errorf("creating execute directory: %w", err)
		}
	}
	return nil
}

// ownedDir creates dir with mode, or takes the one there if it is a
// directory (not a link) of the startd's own user. strict sets the mode of
// one that was there; otherwise one that was there keeps its own, unless
// other users may write into it (they could swap what it holds), which is
// refused.
func ownedDir(dir string, mode os.FileMode, strict bool) error {
	made := true
	if err := os.Mkdir(dir, mode); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		made = false
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (%v): refusing it", dir, fi.Mode().Type())
	case !ok:
		return fmt.Errorf("%s: no owner to check", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to the startd's user (uid %d): refusing it", dir, st.Uid, os.Geteuid())
	case made || strict:
		return os.Chmod(dir, mode)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s may be written by other users (mode %v): refusing it", dir, fi.Mode().Perm())
	}
	return nil
}
