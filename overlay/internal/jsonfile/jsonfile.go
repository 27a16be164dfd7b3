// Package jsonfile writes small JSON documents atomically: a reader sees
// the old document or the new one, never a part.
package jsonfile

import (
	"encoding/json"
	"fmt"
	"os"
)

// Write stores v as indented JSON at path with mode 0600, through a
// temporary file that is synced and renamed over path.
func Write(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
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
