package agent

import (
	"context"
	"strconv"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/knobs"
)

// The agent is the node its glidein runtime acts on.
var _ glidein.Node = (*Agent)(nil)

// glideinSettings are the glidein's settings as cfg gives them.
func (cfg *Config) glideinSettings() glidein.Settings {
	return glidein.Settings{ID: cfg.Glidein, Name: cfg.Name, Pool: cfg.Pool, CentralManager: cfg.CondorHost, DataDir: cfg.DataDir,
		Started: cfg.Started, Validate: cfg.Validate, Checks: cfg.Checks, StatusFile: cfg.StatusFile, Lifetime: cfg.Lifetime,
		EndTime: cfg.EndTime, Grace: cfg.Grace, IdleTimeout: cfg.IdleTimeout, CMTimeout: cfg.CMTimeout, MaxJobs: cfg.MaxJobs}
}

// applyGlideinFlags reads the glidein's flags g, or the knobs they
// override, into cfg and checks them together (glidein.Flags.Read).
func (cfg *Config) applyGlideinFlags(g *glidein.Flags) error {
	s := cfg.glideinSettings()
	if err := g.Read(&s, cfg.Knobs); err != nil {
		return err
	}
	cfg.Lifetime, cfg.EndTime, cfg.Grace, cfg.IdleTimeout, cfg.CMTimeout = s.Lifetime, s.EndTime, s.Grace, s.IdleTimeout, s.CMTimeout
	cfg.StatusFile, cfg.Checks, cfg.MaxJobs = s.StatusFile, s.Checks, s.MaxJobs
	return nil
}

// glideinAttrs adds what the machine ad says of a glidein: IsGlidein,
// GlideinID and, when it has an end, GlideinEndTime (seconds since 1970).
func (a *Agent) glideinAttrs() {
	if a.glidein == nil {
		return
	}
	a.ad.Static["IsGlidein"] = true
	a.ad.Static["GlideinID"] = a.cfg.Glidein
	if end := a.glidein.Status().EndTime; !end.IsZero() {
		a.ad.Static["GlideinEndTime"] = end.Unix()
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
		k[knobs.EndTime] = glidein.EndKnob(end)
	}
	if a.glidein != nil && a.cfg.MaxJobs > 0 {
		// The startd refuses jobs past the glidein's last.
		k[knobs.MaxJobs] = strconv.Itoa(a.cfg.MaxJobs)
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
func (a *Agent) Claimed() bool { return a.daemons.Claimed() }

// JobsSpent implements glidein.Node: it reports whether the startd has
// started the most jobs it may (POND_MAX_JOBS) and none still runs.
func (a *Agent) JobsSpent() bool { return a.daemons.JobsSpent() }

// ReachCentralManager implements glidein.Node.
func (a *Agent) ReachCentralManager(ctx context.Context) error {
	return a.cmProbe(ctx)
}

// runGlidein runs the glidein's runtime while the agent runs (see Run and
// glidein.Runtime.Go), with its watch on spot notices when it has one.
// Without a glidein, ended never reports and stop does nothing.
func (a *Agent) runGlidein(ctx context.Context) (ended <-chan glidein.Ending, stop func(cause error)) {
	if a.glidein == nil {
		return nil, func(error) {}
	}
	var watch func(context.Context)
	if a.cfg.Notices.Spot {
		watch = a.watchNotices
	}
	return a.glidein.Go(ctx, a, watch)
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

// watchNotices watches the instance metadata service until ctx ends or a
// notice comes (ec2.WatchNotices); then it says why in the machine ad and
// interrupts the glidein, which drains at once and ends.
func (a *Agent) watchNotices(ctx context.Context) {
	ec2.WatchNotices(ctx, a.cfg.Notices, a.logger, func(n ec2.Notice) {
		a.noteDrain(n.Reason, n.Message)
		a.glidein.Interrupt(n.Reason, n.Message)
	})
}

// noteDrain puts why the node drains in its machine ad and its startd's
// slot ads, as PondDrainReason and PondDrainMessage.
func (a *Agent) noteDrain(reason, message string) {
	attrs := map[string]string{"PondDrainReason": strconv.Quote(reason), "PondDrainMessage": strconv.Quote(message)}
	attrs = a.ad.Stamps(attrs)
	if a.daemons == nil {
		return
	}
	a.daemons.SetStamps(attrs)
	if err := a.daemons.Set(nil); err != nil {
		a.logger.Warn("cannot put the drain's reason in the slot ads", "err", err)
	}
}
