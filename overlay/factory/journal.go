package factory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/atomicfile"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
)

// Phase is where a glidein is in the factory's journal.
type Phase string

// The phases of a journal record.
const (
	// Intent: recorded, Submit called or about to be; the site may or may
	// not have it.
	Intent Phase = "intent"
	// Submitted: the site took it (or listed it: adopted).
	Submitted Phase = "submitted"
	// Ended: it ended; the record stays until the site forgets it.
	Ended Phase = "ended"
)

// Record is one glidein in the factory's journal.
type Record struct {
	ID    string `json:"id"`
	Entry string `json:"entry"`
	Seq   int64  `json:"seq"`
	Phase Phase  `json:"phase"`
	// Intended is when the intent was recorded; Submitted when the site
	// took it; Ended when the factory saw it end.
	Intended  time.Time `json:"intended"`
	Submitted time.Time `json:"submitted,omitzero"`
	Ended     time.Time `json:"ended,omitzero"`
	// Outcome is how it ended: done, failed, lost; Reason says why.
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Joined and Claimed are when its agent was first seen in the pool
	// and first seen running a job.
	Joined  time.Time `json:"joined,omitzero"`
	Claimed time.Time `json:"claimed,omitzero"`
	// LastSeen is when its agent was last seen in the pool.
	LastSeen time.Time `json:"last_seen,omitzero"`
	// TokenIssued and TokenExpires are when the credentials it was last
	// given (at its submission, or by a refresh) were made and expire:
	// the sooner of its token's and its certificate's expiry.
	TokenIssued  time.Time `json:"token_issued,omitzero"`
	TokenExpires time.Time `json:"token_expires,omitzero"`
	// Offers are the site's offers (EC2 instance types) it was submitted
	// to start on, in order: the first is the one chosen for the jobs,
	// the others the fallbacks the site tries when short of capacity.
	Offers []string `json:"offers,omitempty"`
}

// journal keeps one fsync'd JSON file per glidein in dir: a record is on
// disk, and its directory entry too, before the call that writes it
// returns.
type journal struct {
	dir string
}

func openJournal(dir string) (*journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("factory journal: %w", err)
	}
	return &journal{dir: dir}, nil
}

func (j *journal) path(id string) string { return filepath.Join(j.dir, id+".json") }

// put writes r durably.
func (j *journal) put(r *Record) error {
	if err := jsonfile.Write(j.path(r.ID), r); err != nil {
		return fmt.Errorf("factory journal: %w", err)
	}
	return syncDir(j.dir)
}

// remove forgets the record of id.
func (j *journal) remove(id string) error {
	if err := os.Remove(j.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("factory journal: %w", err)
	}
	return syncDir(j.dir)
}

// load reads every record, in ID order. A file that does not read is
// reported, not skipped: the factory must not forget a glidein.
func (j *journal) load() ([]*Record, error) {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("factory journal: %w", err)
	}
	var out []*Record
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			if strings.HasSuffix(name, ".tmp") || atomicfile.IsTemp(name) {
				os.Remove(filepath.Join(j.dir, name)) // a write cut short: its rename never happened
			}
			continue
		}
		data, err := os.ReadFile(filepath.Join(j.dir, name))
		if err != nil {
			return nil, fmt.Errorf("factory journal: %w", err)
		}
		var r Record
		if err := json.Unmarshal(data, &r); err != nil || r.ID+".json" != name {
			return nil, fmt.Errorf("factory journal: %s: not a record (%v)", filepath.Join(j.dir, name), err)
		}
		out = append(out, &r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
