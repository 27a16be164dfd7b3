// Package confine reads and writes files on behalf of jobs without leaving
// the directory they belong to: the daemons use it for files a job or its
// owner controls (a job's scratch directory, its initial directory), where
// a symbolic link, a ".." or a special file must not make a daemon read or
// write something else. Files are opened through an [os.Root], one path
// component at a time, so swapping a file for a link after a check does
// not help either.
package confine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrEscapes is the error for a name, or a symbolic link on its way, that
// leads out of the directory.
var ErrEscapes = errors.New("leads out of the directory")

// ErrSymlink is the error for a symbolic link where none is followed.
var ErrSymlink = errors.New("is a symbolic link")

// ErrDirectory is the error for a directory where a file is expected.
var ErrDirectory = errors.New("is a directory")

// ErrSpecial is the error for a device, fifo or socket.
var ErrSpecial = errors.New("is a special file (device, fifo or socket)")

// Local returns name as a path below dir: name itself when it is relative,
// its path relative to dir when it is absolute. A name that leads out of
// dir by its text ("..", or an absolute path elsewhere) is refused with
// [ErrEscapes], and so is dir itself.
func Local(dir, name string) (string, error) {
	rel := name
	if filepath.IsAbs(name) {
		r, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(name))
		if err != nil {
			return "", fmt.Errorf("%s %w %s", name, ErrEscapes, dir)
		}
		rel = r
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s %w %s", name, ErrEscapes, dir)
	}
	if rel = filepath.Clean(rel); rel == "." {
		return "", fmt.Errorf("%s names the directory %s itself", name, dir)
	}
	return rel, nil
}

// ReadFile reads the regular file name inside root. Symbolic links are
// followed only while they stay inside root.
func ReadFile(root *os.Root, name string) ([]byte, error) {
	// O_NONBLOCK: opening a fifo must not wait for a writer.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, explain(root, name, err)
	}
	return readRegular(f, name)
}

// Open opens the regular file name inside root for reading, as ReadFile
// does, and leaves reading it to the caller.
func Open(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, explain(root, name, err)
	}
	if err := regular(f, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenPath opens the regular file at path for reading, as ReadPath does,
// and leaves reading it to the caller.
func OpenPath(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, explainErrno(path, err)
	}
	if err := regular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadPath reads the regular file at path, following links, refusing
// directories and special files.
func ReadPath(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, explainErrno(path, err)
	}
	return readRegular(f, path)
}

func readRegular(f *os.File, name string) ([]byte, error) {
	defer f.Close()
	if err := regular(f, name); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// WriteFile writes data to the file name inside root, creating it with
// perm or truncating it. Symbolic links are followed only while they stay
// inside root; an existing directory or special file is left alone.
func WriteFile(root *os.Root, name string, data []byte, perm os.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, perm)
	if err != nil {
		return explain(root, name, err)
	}
	return writeRegular(f, name, data)
}

// Check says whether a file may be written at name inside root by
// replacing it (a rename over it): nil when nothing is there or a regular
// file, reached through symbolic links that stay inside root; an error
// that says why for a directory, a special file, or a name that leads
// out of root.
func Check(root *os.Root, name string) error {
	fi, err := root.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return explain(root, name, err)
	case fi.IsDir():
		return fmt.Errorf("%s %w", name, ErrDirectory)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %w", name, ErrSpecial)
	}
	return nil
}

// CheckPathNoFollow says whether a file may be written at path by
// replacing it: nil when nothing is there or a regular file; an error for
// a symbolic link, a directory or a special file.
func CheckPathNoFollow(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s %w, not written through", path, ErrSymlink)
	case fi.IsDir():
		return fmt.Errorf("%s %w", path, ErrDirectory)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %w", path, ErrSpecial)
	}
	return nil
}

// WritePathNoFollow writes data to the file at path, creating it with perm
// or truncating it, but not through a symbolic link as its last component
// (O_NOFOLLOW) and not to a directory or special file.
func WritePathNoFollow(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return fmt.Errorf("%s %w, not written through", path, ErrSymlink)
		}
		return explainErrno(path, err)
	}
	return writeRegular(f, path, data)
}

func writeRegular(f *os.File, name string, data []byte) error {
	if err := regular(f, name); err != nil {
		f.Close()
		return err
	}
	// Truncate only once the file is known to be a regular one.
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// regular checks that the open file f is a regular file.
func regular(f *os.File, name string) error {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s %w", name, ErrDirectory)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %w", name, ErrSpecial)
	}
	return nil
}

// explain turns the error of opening name in root into one that says why.
func explain(root *os.Root, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent" {
		if fi, lerr := root.Lstat(name); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s %w that %w %s", name, ErrSymlink, ErrEscapes, root.Name())
		}
		return fmt.Errorf("%s %w %s (through a symbolic link)", name, ErrEscapes, root.Name())
	}
	return explainErrno(name, err)
}

func explainErrno(name string, err error) error {
	if errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%s %w", name, ErrDirectory)
	}
	if errors.Is(err, syscall.ENXIO) {
		// A fifo without a reader opened for writing.
		return fmt.Errorf("%s %w", name, ErrSpecial)
	}
	return err
}
