package agent

import (
	"context"
	"flag"
	"strconv"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/knobs"
)

// The agent is the node its glidein runtime acts on.
var _ glidein.Node = (*Agent)(nil)

// glideinFlags are the glidein's flags whose values are read once the
// configuration file's knobs are known (glidein.Flags.Read).
type glideinFlags struct{ glidein.Flags }

// define adds the glidein's flags to fs.
func (g *glideinFlags) define(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Glidein, "glidein", "", "run as the glidein `ID`: validate, then join the pool of -condor-host, and run down by itself (see docs/glideins.md)")
	fs.StringVar(&g.Lifetime, "lifetime", "", "a glidein's life from its start, a `duration` such as 2h (default: no limit)")
	fs.StringVar(&g.EndTime, "end-time", "", "`time` the node goes away (a glidein's batch job ends): RFC 3339 or seconds since 1970")
	fs.StringVar(&g.Grace, "grace", "", "`duration` before its end at which a glidein starts draining (default: a tenth of its life, at most 5m)")
	fs.StringVar(&g.IdleTimeout, "idle-timeout", "", "a glidein leaves after this `duration` without a claimed slot (default: never)")
	fs.StringVar(&g.CMTimeout, "cm-timeout", "", "a glidein leaves after its central manager has not answered for this `duration` (default 5m; 0: never)")
	fs.StringVar(&cfg.Validate, "validate", "", "JSON `file` of the checks a glidein must pass before it joins")
	fs.StringVar(&cfg.StatusFile, "status-file", "", "`file` a glidein writes its status to (default: glidein.status in -data-dir)")
}

// glideinSettings are the glidein's settings as cfg gives them.
func (cfg *Config) glideinSettings() glidein.Settings {
	return glidein.Settings{ID: cfg.Glidein, Name: cfg.Name, Pool: cfg.Pool, CentralManager: cfg.CondorHost, DataDir: cfg.DataDir,
		Started: cfg.Started, Validate: cfg.Validate, Checks: cfg.Checks, StatusFile: cfg.StatusFile, Lifetime: cfg.Lifetime,
		EndTime: cfg.EndTime, Grace: cfg.Grace, IdleTimeout: cfg.IdleTimeout, CMTimeout: cfg.CMTimeout}
}

// apply reads the glidein's flags, or the knobs they override, into cfg
// and checks them together (glidein.Flags.Read).
func (g *glideinFlags) apply(cfg *Config) error {
	s := cfg.glideinSettings()
	if err := g.Read(&s, cfg.Knobs); err != nil {
		return err
	}
	cfg.Lifetime, cfg.EndTime, cfg.Grace, cfg.IdleTimeout, cfg.CMTimeout = s.Lifetime, s.EndTime, s.Grace, s.IdleTimeout, s.CMTimeout
	cfg.StatusFile, cfg.Checks = s.StatusFile, s.Checks
	return nil
}

// glideinAttrs adds what the machine ad says of a glidein: IsGlidein,
// GlideinID and, when it has an end, GlideinEndTime (seconds since 1970).
func (a *Agent) glideinAttrs() {
	if a.glidein == nil {
		return
	}
	a.ad.static["IsGlidein"] = true
	a.ad.static["GlideinID"] = a.cfg.Glidein
	if end := a.glidein.Status().EndTime; !end.IsZero() {
		a.ad.static["GlideinEndTime"] = end.Unix()
	}
}

// daemonKnobs are the knobs the agent gives its daemons at start, besides
// those of its configuration file: CONDOR_HOST, and the node's end (see
// nodeEnd) as POND_END_TIME in seconds since 1970, with which the startd
// refuses jobs that would not finish before it, drains and vacates in
// time (for a glidein, from when the glidein drains: glideinGrace). SetEndTime changes the same knob at run time; every
// reconfiguration keeps them.
func (a *Agent) daemonKnobs() map[string]string {
	k := map[string]string{"CONDOR_HOST": a.CondorHost()}
	if a.cfg.Pool != "" {
		// The schedd stamps its jobs with the pool; the startd prefers them.
		k[knobs.Pool] = a.cfg.Pool
	}
	if l := a.failoverDaemonList(); l != "" {
		k["DAEMON_LIST"] = l
	}
	if end := a.nodeEnd(); !end.IsZero() {
		k[knobs.EndTime] = endKnob(end)
	}
	if g := a.glideinGrace(); g > 0 {
		k[knobs.EndGrace] = strconv.FormatInt(int64((g+time.Second-1)/time.Second), 10)
	}
	return k
}

// glideinGrace is how long before its end a glidein drains
// (glidein.Runtime.DrainGrace), unless the configuration sets
// POND_END_GRACE; zero for a node that is no glidein.
func (a *Agent) glideinGrace() time.Duration {
	if a.glidein == nil {
		return 0
	}
	if v, ok := a.cfg.Knob(knobs.EndGrace); ok && v != "" {
		return 0
	}
	return a.glidein.DrainGrace()
}

// nodeEnd is when the node goes away, as its daemons start: the end set
// at run time (SetEndTime) when there is one, else a glidein's end (its
// end time or its lifetime, the sooner), else the configured
// POND_END_TIME (-end-time); zero for none.
func (a *Agent) nodeEnd() time.Time {
	a.endMu.Lock()
	defer a.endMu.Unlock()
	switch {
	case a.endSet:
		return a.end
	case a.glidein != nil:
		return a.glidein.Status().EndTime
	}
	return a.cfg.EndTime
}

// endKnob is the daemons' POND_END_TIME for the node's end t: seconds
// since 1970, or "0" for none.
func endKnob(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.Unix(), 10)
}

// Quarantined implements glidein.Node: it reports whether the startd
// quarantined the node as a black hole, and why.
func (a *Agent) Quarantined() (string, bool) {
	if q := a.quarantine(); q != nil {
		return q.Reason, true
	}
	return "", false
}

// Claimed implements glidein.Node: it reports whether one of the
// startd's slots (other than a partitionable one) is claimed.
func (a *Agent) Claimed() bool {
	sd := a.daemons.master.Startd()
	if sd == nil {
		return false
	}
	for _, slot := range sd.Slots() {
		if typ, _ := slot.EvalAttr("SlotType").StringValue(); typ == "Partitionable" {
			continue
		}
		if state, _ := slot.EvalAttr("State").StringValue(); state == "Claimed" {
			return true
		}
	}
	return false
}

// ReachCentralManager implements glidein.Node.
func (a *Agent) ReachCentralManager(ctx context.Context) error {
	return a.cmProbe(ctx)
}

// runGlidein runs the glidein's runtime while the agent runs (see Run):
// ended reports when the runtime has drained the node for a reason of its
// own; stop ends it for a reason of the agent's (cause ErrAskedToLeave,
// or any other for a signal or an error) and waits until it has drained.
// Without a glidein, ended never reports and stop does nothing.
func (a *Agent) runGlidein(ctx context.Context) (ended <-chan glidein.Ending, stop func(cause error)) {
	if a.glidein == nil {
		return nil, func(error) {}
	}
	rctx, cancel := context.WithCancelCause(ctx)
	ch := make(chan glidein.Ending, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ch <- a.glidein.Run(rctx, a)
	}()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if a.cfg.Notices.Spot {
			a.watchNotices(rctx)
		}
	}()
	return ch, func(cause error) { cancel(cause); <-done; <-watched }
}

// glideinStatus is the glidein's status for GET /v1/self; nil for an
// agent that is no glidein.
func (a *Agent) glideinStatus() *api.GlideinStatus {
	if a.glidein == nil {
		return nil
	}
	st := a.glidein.Status()
	return &st
}
