// Package atomicfile replaces small files so that a reader sees the old
// content or the new one, never a part.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces the file at path with data, mode 0600: written to a
// temporary file of its own in the same directory, synced and renamed
// over path. Writers of the same path at once each rename a whole file of
// their own: the last rename wins, and no reader sees a part. The rename
// survives a crash of the machine only once the directory is synced too
// (SyncDir).
func Write(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	renamed = true
	return nil
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
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return false, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, SyncDir(dir)
}
