package agent

import (
	"time"

	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/knobs"
)

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
	if a.daemons == nil || a.daemons.Master == nil {
		return nil
	}
	return a.daemons.Master.Startd()
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
	return a.daemons.Set(map[string]string{knobs.EndTime: glidein.EndKnob(t)})
}
