package glidein

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/atomicfile"
	"github.com/pond-htc/pond/providers"
)

// The states of a glidein in the journal.
const (
	// recIntent: the ID is recorded and Submit may have been called; the
	// site may or may not have the glidein.
	recIntent = "intent"
	// recSubmitted: the site took the glidein (its SiteID is known).
	recSubmitted = "submitted"
	// recCancelling: Cancel was or is about to be called.
	recCancelling = "cancelling"
)

// record is one glidein in the journal. It is written, and synced to
// disk, before the glidein is submitted (State intent), and again once the
// site took it.
type record struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Prefix  string `json:"prefix"`
	Index   int    `json:"index"`
	State   string `json:"state"`
	SiteID  string `json:"site_id,omitempty"`
	Host    string `json:"host,omitempty"`
	// Spec is the hash of the spec it was submitted with; empty for a
	// glidein adopted from the site, which is kept as it is.
	Spec string `json:"spec,omitempty"`
	// Adopted says the site had it before the journal did.
	Adopted bool      `json:"adopted,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// journal keeps one file per glidein under dir, each replaced atomically
// and synced (file and directory) before write returns.
type journal struct {
	dir string
}

func (j journal) path(id string) string { return filepath.Join(j.dir, id+".json") }

func (j journal) write(r *record) error {
	if err := providers.PrivateDir(j.dir); err != nil {
		return fmt.Errorf("glidein journal: %w", err)
	}
	r.Updated = time.Now().UTC()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("glidein journal: %w", err)
	}
	p := j.path(r.ID)
	// Synced, renamed, and the directory synced: once write returns, the
	// record survives a crash of pondctl or of the machine.
	if err := atomicfile.Write(p, data); err != nil {
		return fmt.Errorf("glidein journal: %w", err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("glidein journal: %w", err)
	}
	return nil
}

func (j journal) remove(id string) error {
	if err := os.Remove(j.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("glidein journal: %w", err)
	}
	return atomicfile.SyncDir(j.dir)
}

// list returns the records whose ID starts with prefix, by index then
// creation.
func (j journal) list(prefix string) ([]*record, error) {
	des, err := os.ReadDir(j.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("glidein journal: %w", err)
	}
	var out []*record
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || !strings.HasPrefix(name, prefix) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(j.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("glidein journal: %w", err)
		}
		var r record
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("glidein journal: %s: %w", name, err)
		}
		out = append(out, &r)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Index != out[b].Index {
			return out[a].Index < out[b].Index
		}
		return out[a].Created.Before(out[b].Created)
	})
	return out, nil
}

// ownerKeyFile holds the working directory's key, which starts the IDs
// of its glideins after IDPrefix: two working directories that name their
// glidein resources alike never list, adopt or cancel one another's.
const ownerKeyFile = "owner"

// ownerKey returns the working directory's key, made the first time (8
// lowercase letters and digits), under root (.pond/glidein).
func ownerKey(root string) (string, error) {
	path := filepath.Join(root, ownerKeyFile)
	if data, err := os.ReadFile(path); err == nil {
		k := strings.TrimSpace(string(data))
		if validKey(k) {
			return k, nil
		}
		return "", fmt.Errorf("%s: %q is not a key of 8 lowercase letters and digits", path, k)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := providers.PrivateDir(root); err != nil {
		return "", err
	}
	k := randomText(8)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Made meanwhile by another pondctl.
		return ownerKey(root)
	}
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(k + "\n"); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return k, atomicfile.SyncDir(root)
}

func validKey(k string) bool {
	if len(k) != 8 {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// randomText returns n random lowercase letters and digits.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
