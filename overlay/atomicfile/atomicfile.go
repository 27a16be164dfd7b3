// Package atomicfile replaces small files so that a reader sees the old
// content or the new one, never a part.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Write replaces the file at path with data, mode 0600: written to a
// temporary file of its own in the same directory, synced and renamed
// over path. Writers of the same path at once each rename a whole file of
// their own: the last rename wins, and no reader sees a part. The rename
// survives a crash of the machine only once the directory is synced too
// (SyncDir).
func Write(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes data, synced, to a new temporary file, mode 0600, in
// the directory of path, and returns its name; the file is removed when
// it could not be written whole.
func writeTemp(path string, data []byte) (tmp string, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+tempInfix+"*")
	if err != nil {
		return "", err
	}
	tmp = f.Name()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// tempInfix marks the temporary files of Write and Create.
const tempInfix = ".tmp-"

// IsTemp reports whether name (a file's base name) is that of a
// temporary file of Write or Create, left in its directory by a crash
// before its rename or link.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempInfix)
}

// SyncDir syncs the directory dir, so that the files created, renamed or
// removed in it stay so after a crash of the machine.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Create writes data to a new file at path, mode 0600, unless path
// exists: the file appears whole or not at all, even to another process
// that creates it at the same moment. The data is written to a temporary
// file of its own in the same directory, synced, and linked to path, which
// fails when path exists; the directory is then synced. Create reports
// whether it made the file: false, with a nil error, when path existed,
// which it leaves as it was.
func Create(path string, data []byte) (created bool, err error) {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, SyncDir(filepath.Dir(path))
}
