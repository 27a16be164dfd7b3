package startd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/pond-htc/pond/condor/internal/plainfile"
	"github.com/pond-htc/pond/condor/startd/jobshim"
)

// maxSpareDirs bounds the emptied sets of private temporary directories a
// startd keeps for its next jobs.
const maxSpareDirs = 64

// spareDirs are sets of a job's private temporary directories (see
// scratchMounts) that a job which left nothing running has finished with,
// emptied, kept under a name of their own in the execute directory
// ("dir_spare_N.tmp", which a restarted startd sweeps) for a next job to
// take rather than make: making a directory and removing it costs a new
// inode each, most of a trivial job's file-system work.
type spareDirs struct {
	mu     sync.Mutex
	dirs   []string
	n      int  // names given so far
	closed bool // the startd is shutting down: none kept
}

// privateDirs makes the private temporary directories of the job whose
// scratch directory is dir, as scratchMounts does, from a spare set when
// there is one.
func (s *Startd) privateDirs(dir string) ([]jobshim.Mount, error) {
	if len(s.iso.mounts) == 0 {
		return nil, nil
	}
	if m, ok := s.takeSpare(dir); ok {
		return m, nil
	}
	return scratchMounts(dir, s.iso.mounts)
}

// takeSpare renames a spare set to the private directories of dir and
// checks that it is as scratchMounts makes it: each directory there, not
// a link, 01777. A set found otherwise is removed.
func (s *Startd) takeSpare(dir string) ([]jobshim.Mount, bool) {
	sp := &s.spares
	sp.mu.Lock()
	if len(sp.dirs) == 0 {
		sp.mu.Unlock()
		return nil, false
	}
	spare := sp.dirs[len(sp.dirs)-1]
	sp.dirs = sp.dirs[:len(sp.dirs)-1]
	sp.mu.Unlock()
	base := nsDir(dir)
	if err := os.Rename(spare, base); err != nil {
		_ = os.RemoveAll(spare)
		return nil, false
	}
	mounts := make([]jobshim.Mount, 0, len(s.iso.mounts))
	for _, t := range s.iso.mounts {
		src := privateDir(base, t)
		fi, err := os.Lstat(src)
		if err != nil || !fi.IsDir() || fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSymlink) != 0o777|os.ModeSticky {
			_ = os.RemoveAll(base)
			return nil, false
		}
		mounts = append(mounts, jobshim.Mount{Source: src, Target: t})
	}
	return mounts, true
}

// recycleScratch removes the scratch directory dir of a job that left
// nothing running (none of its processes can write to its private
// directories any more) and keeps its private temporary directories,
// emptied, as a spare set; when they cannot be emptied, or enough are
// kept, they are removed.
func (s *Startd) recycleScratch(dir string) {
	_ = os.RemoveAll(dir)
	base := nsDir(dir)
	if len(s.iso.mounts) == 0 || s.keepSpare(base) != nil {
		_ = os.RemoveAll(base)
	}
}

// keepSpare empties the private directories under base and renames base
// to a spare set's name.
func (s *Startd) keepSpare(base string) error {
	sp := &s.spares
	sp.mu.Lock()
	full := len(sp.dirs) >= maxSpareDirs || sp.closed
	sp.n++
	name := filepath.Join(filepath.Dir(base), "dir_spare_"+strconv.Itoa(sp.n)+".tmp")
	sp.mu.Unlock()
	if full {
		return errors.New("enough spare private directories")
	}
	ents, err := readNames(base)
	if err != nil {
		return err
	}
	if len(ents) != len(s.iso.mounts) {
		return fmt.Errorf("%s holds %d entries, not %d", base, len(ents), len(s.iso.mounts))
	}
	for _, t := range s.iso.mounts {
		if err := emptyDir(privateDir(base, t)); err != nil {
			return err
		}
	}
	if err := os.Rename(base, name); err != nil {
		return err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		_ = os.RemoveAll(name)
		return nil
	}
	sp.dirs = append(sp.dirs, name)
	return nil
}

// dropSpares removes the spare sets, and keeps none from now on.
func (s *Startd) dropSpares() {
	sp := &s.spares
	sp.mu.Lock()
	dirs := sp.dirs
	sp.dirs, sp.closed = nil, true
	sp.mu.Unlock()
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// privateDir is the private directory under base mounted on target.
func privateDir(base, target string) string {
	return filepath.Join(base, strings.ReplaceAll(strings.TrimPrefix(target, "/"), "/", "_"))
}

// emptyDir removes what the directory dir holds, not following a link;
// dir itself must be a directory.
func emptyDir(dir string) error {
	names, err := readNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	if len(names) == 0 {
		return nil
	}
	if names, err = readNames(dir); err == nil && len(names) > 0 {
		err = fmt.Errorf("%s is not empty", dir)
	}
	return err
}

// readNames is the names of dir's entries, dir opened without following
// a link.
func readNames(dir string) ([]string, error) {
	f, err := plainfile.Open(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err == io.EOF {
		err = nil
	}
	return names, err
}
