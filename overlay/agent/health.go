package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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

// quarantineFile is where, in its data directory, a node keeps its
// quarantine, so that a black hole stays one when its agent restarts.
const quarantineFile = "quarantine.json"

// maxQuarantineTag is the most bytes of a quarantine's reason the serf tag
// carries: serf's tags share a few hundred bytes.
const maxQuarantineTag = 120

// quarantineChanged is told by the startd when it quarantines the node as
// a black hole (it could not start jobs again and again) and when the
// quarantine lifts (nil): the agent logs it and sets the quarantined tag,
// which `pondctl sea members` shows and a pilot factory may act on.
func (a *Agent) quarantineChanged(q *startd.Quarantine) {
	tag := ""
	if q != nil {
		a.logger.Warn("the node is quarantined: it cannot start jobs; it takes no job", "reason", q.Reason,
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
		a.logger.Info("the node's quarantine is over; it takes jobs again")
	}
	if err := a.saveQuarantine(q); err != nil {
		a.logger.Warn("recording the quarantine; a restart would forget it", "err", err)
	}
	if a.sea == nil {
		return
	}
	if err := a.SetTags(map[string]string{api.TagQuarantined: tag}); err != nil {
		a.logger.Warn("setting the quarantined tag", "err", err)
	}
}

// saveQuarantine records q in the node's data directory, or removes the
// record when q is nil; a node without a data directory keeps none.
func (a *Agent) saveQuarantine(q *startd.Quarantine) error {
	if a.cfg.DataDir == "" {
		return nil
	}
	path := filepath.Join(a.cfg.DataDir, quarantineFile)
	if q == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return jsonfile.Write(path, q)
}

// loadQuarantine returns the quarantine recorded in the node's data
// directory before a restart, nil when there is none or it is over. A
// record that cannot be read is reported, not ignored: the node would
// otherwise take jobs it had refused.
func (a *Agent) loadQuarantine() (*startd.Quarantine, error) {
	if a.cfg.DataDir == "" {
		return nil, nil
	}
	path := filepath.Join(a.cfg.DataDir, quarantineFile)
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

// quarantine returns the node's quarantine as the API shows it, nil when
// the node takes jobs or runs no startd.
func (a *Agent) quarantine() *api.Quarantine {
	sd := a.startd()
	if sd == nil {
		return nil
	}
	q := sd.Quarantined()
	if q == nil {
		return nil
	}
	return &api.Quarantine{Reason: q.Reason, Since: q.Since, Until: q.Until}
}

// endTime returns when the node goes away (POND_END_TIME), zero when it
// does not know or runs no startd.
func (a *Agent) endTime() time.Time {
	if sd := a.startd(); sd != nil {
		return sd.EndTime()
	}
	return time.Time{}
}

// startd returns the node's running startd, or nil.
func (a *Agent) startd() *startd.Startd {
	if a.daemons == nil || a.daemons.master == nil {
		return nil
	}
	return a.daemons.master.Startd()
}

// SetEndTime tells the node when it goes away (zero: never), overriding
// its end from the configuration (POND_END_TIME, -end-time) or, for a
// glidein, the glidein's end: its startd takes only the jobs whose
// declared runtime ends before then, drains POND_END_GRACE before it, and
// vacates what still runs at the end. It is the same knob the agent gives
// its daemons at start (daemonKnobs), changed by a reconfiguration, and it
// holds across later ones. A glidein's runtime keeps its own end, at which
// the glidein leaves.
func (a *Agent) SetEndTime(t time.Time) error {
	a.endMu.Lock()
	a.end, a.endSet = t, true
	a.endMu.Unlock()
	return a.daemons.set(map[string]string{knobs.EndTime: endKnob(t)})
}

// formerBlackholeRuntime was how soon a job had to fail for its failure to
// count against the node; no exit of a job counts any more.
const formerBlackholeRuntime = "POND_BLACKHOLE_RUNTIME"

// checkHealthKnobs reads the knobs of the node's health and end, so that
// a bad value stops the agent before anything starts, naming the knob.
func checkHealthKnobs(r knobs.Reader) error {
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
