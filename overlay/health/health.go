// Package health keeps what a node's health means beyond its startd: the
// quarantine of a black hole recorded in the node's data directory so that
// it outlives a restart, shown in the node's quarantined tag, and the
// checks of the knobs of a node's health and end.
package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
	"github.com/pond-htc/pond/overlay/knobs"
)

// QuarantineFile is where, in its data directory, a node keeps its
// quarantine, so that a black hole stays one when its agent restarts.
const QuarantineFile = "quarantine.json"

// maxQuarantineTag is the most bytes of a quarantine's reason the serf tag
// carries: serf's tags share a few hundred bytes.
const maxQuarantineTag = 120

// Quarantines records and shows a node's quarantine.
type Quarantines struct {
	// DataDir is the node's data directory; a node without one keeps
	// no record.
	DataDir string
	// SetTags sets the node's serf tags.
	SetTags func(map[string]string) error
	Logger  *slog.Logger
}

// Changed is told by the startd when it quarantines the node as a black
// hole (it could not start jobs again and again) and when the quarantine
// lifts (nil): it logs it, records it, and sets the quarantined tag, which
// `pondctl sea members` shows and a pilot factory may act on.
func (h *Quarantines) Changed(q *startd.Quarantine) {
	tag := ""
	if q != nil {
		h.Logger.Warn("the node is quarantined: it cannot start jobs; it takes no job", "reason", q.Reason,
			"until", q.Until.UTC().Format(time.RFC3339))
		tag = q.Reason
		for len(tag) > maxQuarantineTag {
			_, size := utf8.DecodeLastRuneInString(tag)
			tag = tag[:len(tag)-size]
		}
		if tag == "" {
			tag = "quarantined"
		}
	} else {
		h.Logger.Info("the node's quarantine is over; it takes jobs again")
	}
	if err := h.save(q); err != nil {
		h.Logger.Warn("recording the quarantine; a restart would forget it", "err", err)
	}
	if err := h.SetTags(map[string]string{api.TagQuarantined: tag}); err != nil {
		h.Logger.Warn("setting the quarantined tag", "err", err)
	}
}

// saveQuarantine records q in the node's data directory, or removes the
// record when q is nil; a node without a data directory keeps none.
func (h *Quarantines) save(q *startd.Quarantine) error {
	if h.DataDir == "" {
		return nil
	}
	path := filepath.Join(h.DataDir, QuarantineFile)
	if q == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return jsonfile.Write(path, q)
}

// Load returns the quarantine recorded in the node's data
// directory before a restart, nil when there is none or it is over. A
// record that cannot be read is reported, not ignored: the node would
// otherwise take jobs it had refused.
func (h *Quarantines) Load() (*startd.Quarantine, error) {
	if h.DataDir == "" {
		return nil, nil
	}
	path := filepath.Join(h.DataDir, QuarantineFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var q startd.Quarantine
	if err := json.Unmarshal(b, &q); err != nil || q.Until.IsZero() {
		return nil, fmt.Errorf("%s: not a quarantine record (remove it to lift the quarantine): %v", path, firstErr(err, errors.New("no end time")))
	}
	if !time.Now().Before(q.Until) {
		return nil, nil
	}
	return &q, nil
}

// firstErr returns err, or else fallback.
func firstErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// FormerBlackholeRuntime was how soon a job had to fail for its failure to
// count against the node; no exit of a job counts any more.
const FormerBlackholeRuntime = "POND_BLACKHOLE_RUNTIME"

// CheckKnobs reads the knobs of the node's health and end, so that
// a bad value stops the agent before anything starts, naming the knob.
func CheckKnobs(r knobs.Reader) error {
	n, err := r.Int(knobs.BlackholeFailures)
	if err != nil {
		return err
	}
	if n < 0 {
		v, _ := r(knobs.BlackholeFailures)
		return &knobError{knob: knobs.BlackholeFailures, value: v, why: "must not be negative"}
	}
	if v, ok := r(knobs.EndTime); ok {
		if _, err := glidein.ParseNodeEnd(v); err != nil {
			return &knobError{knob: knobs.EndTime, value: v, why: err.Error()}
		}
	}
	for _, k := range []string{knobs.QuarantineTime, knobs.EndGrace} {
		if _, err := r.Duration(k); err != nil {
			return err
		}
	}
	return nil
}

// knobError is a knob whose value the agent refuses.
type knobError struct{ knob, value, why string }

func (e *knobError) Error() string { return e.knob + " = " + strconv.Quote(e.value) + ": " + e.why }
