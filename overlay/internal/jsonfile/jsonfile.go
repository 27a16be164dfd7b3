// Package jsonfile writes small JSON documents atomically: a reader sees
// the old document or the new one, never a part.
package jsonfile

import (
	"encoding/json"
	"fmt"

	"github.com/pond-htc/pond/overlay/atomicfile"
)

// Write stores v as indented JSON at path with mode 0600, through a
// temporary file that is synced and renamed over path.
func Write(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return atomicfile.Write(path, data)
}
