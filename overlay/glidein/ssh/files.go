package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pond-htc/pond/overlay/glidein"
)

var _ glidein.FileWriter = (*Site)(nil)

// refreshScript: BASE HOSTKEY ID NAME. Writes standard input to the file
// NAME of a running glidein's directory, through a rename; prints
// "written", or "absent" when the host has no such glidein.
const refreshScript = resolveBase + `d=$base/hosts/$2/$3
[ -f "$d/` + markerFile + `" ] || { echo absent; exit 0; }
grep -q '^status=' "$d/` + markerFile + `" && { echo ended; exit 0; }
cat > "$d/.$4.new" && chmod 600 "$d/.$4.new" && mv -f "$d/.$4.new" "$d/$4" && echo written
`

// WriteFiles implements glidein.FileWriter: it replaces files in a
// running glidein's directory on its host, each through a rename.
func (s *Site) WriteFiles(ctx context.Context, id string, files map[string][]byte) error {
	if err := checkRequest(glidein.Request{ID: id, Files: files}); err != nil {
		return fmt.Errorf("ssh site: write files: %w", err)
	}
	hosts := s.hosts
	s.mu.Lock()
	addr, seen := s.where[id]
	s.mu.Unlock()
	if i := slices.IndexFunc(s.hosts, func(h *host) bool { return h.addr == addr }); seen && i >= 0 {
		hosts = append([]*host{s.hosts[i]}, slices.Delete(slices.Clone(s.hosts), i, i+1)...)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, h := range hosts {
		found := false
		for _, n := range names {
			out, err := s.run(ctx, h, "write "+n+" of "+id, refreshScript, bytes.NewReader(files[n]), s.cfg.BaseDir, h.key, id, n)
			if err != nil {
				errs = append(errs, err)
				break
			}
			switch strings.TrimSpace(string(out)) {
			case "written":
				found = true
				continue
			case "ended":
				return fmt.Errorf("ssh site: write files: glidein %s has ended", id)
			}
			break
		}
		if found {
			return nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ssh site: write files of %s: %w", id, err)
	}
	return fmt.Errorf("ssh site: write files: no host has glidein %s", id)
}
