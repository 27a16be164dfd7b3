// Package atomicfile replaces small files so that a reader sees the old
// content or the new one, never a part.
package atomicfile

import "os"

// Write replaces the file at path with data, mode 0600: written to
// path.tmp, synced and renamed over path. The rename survives a crash of
// the machine only once the directory is synced too (SyncDir).
func Write(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
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
	return os.Rename(tmp, path)
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
