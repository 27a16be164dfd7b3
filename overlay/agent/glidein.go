package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/knobs"
)

// The agent is the node its glidein runtime acts on.
var _ glidein.Node = (*Agent)(nil)

// glideinFlags are the glidein's flags whose values are read once the
// configuration file's knobs are known.
type glideinFlags struct {
	lifetime, endTime, grace, idle, cm string
	// env reads the environment (os.LookupEnv): a glidein given neither
	// -end-time nor POND_END_TIME takes its end from glidein.EndEnv.
	env func(string) (string, bool)
}

// define adds the glidein's flags to fs.
func (g *glideinFlags) define(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Glidein, "glidein", "", "run as the glidein `ID`: validate, then join the pool of -condor-host, and run down by itself (see docs/glideins.md)")
	fs.StringVar(&g.lifetime, "lifetime", "", "a glidein's life from its start, a `duration` such as 2h (default: no limit)")
	fs.StringVar(&g.endTime, "end-time", "", "`time` the node goes away (a glidein's batch job ends): RFC 3339 or seconds since 1970")
	fs.StringVar(&g.grace, "grace", "", "`duration` before its end at which a glidein starts draining (default: a tenth of its life, at most 5m)")
	fs.StringVar(&g.idle, "idle-timeout", "", "a glidein leaves after this `duration` without a claimed slot (default: never)")
	fs.StringVar(&g.cm, "cm-timeout", "", "a glidein leaves after its central manager has not answered for this `duration` (default 5m; 0: never)")
	fs.StringVar(&cfg.Validate, "validate", "", "JSON `file` of the checks a glidein must pass before it joins")
	fs.StringVar(&cfg.StatusFile, "status-file", "", "`file` a glidein writes its status to (default: glidein.status in -data-dir)")
}

// glideinID is what a glidein ID may be: what overlay/glidein's sites
// accept, and more for glideins started by hand.
var glideinID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// apply reads the glidein's flags, or the knobs they override, into cfg
// and checks them together.
func (g *glideinFlags) apply(cfg *Config) error {
	r := knobs.Reader(func(name string) (string, bool) { v, ok := cfg.Knobs[name]; return v, ok })
	var given []string // the glidein's settings given, flag or knob
	dur := func(name, value, knob string) (time.Duration, error) {
		if value == "" {
			if v, ok := cfg.Knobs[knob]; ok && v != "" {
				given = append(given, knob)
			}
			return r.Duration(knob)
		}
		given = append(given, "-"+name)
		d, err := knobs.ParseDuration(value)
		if err != nil {
			return 0, fmt.Errorf("-%s %q: %w", name, value, err)
		}
		return d, nil
	}
	var err error
	if cfg.Lifetime, err = dur("lifetime", g.lifetime, knobs.GlideinLifetime); err != nil {
		return err
	}
	if cfg.Grace, err = dur("grace", g.grace, knobs.GlideinGrace); err != nil {
		return err
	}
	if cfg.IdleTimeout, err = dur("idle-timeout", g.idle, knobs.GlideinIdleTimeout); err != nil {
		return err
	}
	if cfg.CMTimeout, err = dur("cm-timeout", g.cm, knobs.GlideinCMTimeout); err != nil {
		return err
	}
	// The end time is any node's (a glidein's batch job, a cloud
	// lease): a node that is no glidein has it too.
	end, endName := g.endTime, "-end-time"
	if end == "" {
		end, endName = cfg.Knobs[knobs.EndTime], knobs.EndTime
	}
	if end == "" && cfg.Glidein != "" && g.env != nil {
		// The batch job's end, which its site put in its environment.
		if v, ok := g.env(glidein.EndEnv); ok {
			end, endName = v, glidein.EndEnv
		}
	}
	if cfg.EndTime, err = parseEndTime(end); err != nil {
		return fmt.Errorf("%s %q: %w", endName, end, err)
	}
	if !cfg.EndTime.IsZero() && !cfg.EndTime.After(cfg.Started) {
		return fmt.Errorf("%s %s: the node's end has already passed (it is %s)", endName, end, cfg.Started.UTC().Format(time.RFC3339))
	}
	if cfg.Validate != "" {
		given = append(given, "-validate")
	}
	if cfg.StatusFile != "" {
		given = append(given, "-status-file")
	}
	if cfg.Glidein == "" {
		if len(given) > 0 {
			return fmt.Errorf("%s: only a glidein has it: give the glidein's ID with -glidein", given[0])
		}
		return nil
	}
	if !glideinID().MatchString(cfg.Glidein) {
		return fmt.Errorf("-glidein %q: want 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit", cfg.Glidein)
	}
	if cfg.Pool == "" {
		return fmt.Errorf("-glidein %s: name its pool with -pool: a glidein joins a pool", cfg.Glidein)
	}
	if cfg.CondorHost == "" {
		return fmt.Errorf("-glidein %s: give the API address of the pool's central manager with -condor-host: a glidein joins a pool", cfg.Glidein)
	}
	if cfg.StatusFile == "" {
		if cfg.DataDir == "" {
			return fmt.Errorf("-glidein %s: give it -data-dir (or -status-file) for its status file", cfg.Glidein)
		}
		cfg.StatusFile = filepath.Join(cfg.DataDir, glidein.StatusFile)
	}
	if end, _ := glidein.End(cfg.Started, cfg.Lifetime, cfg.EndTime); cfg.Grace > 0 && !end.IsZero() && cfg.Grace >= end.Sub(cfg.Started) {
		return fmt.Errorf("-grace %s: not shorter than the glidein's life of %s: it would drain from its start", cfg.Grace, end.Sub(cfg.Started).Round(time.Second))
	}
	if cfg.Validate != "" {
		if cfg.Checks, err = glidein.ReadChecks(cfg.Validate); err != nil {
			return fmt.Errorf("-validate: %w", err)
		}
	}
	return nil
}

// startGlidein starts the glidein's runtime and validates the glidein,
// before the agent binds anything or starts its daemons: a glidein that
// fails validation never joins the pool. The error is a
// *glidein.ValidationError when a check failed.
func startGlidein(ctx context.Context, cfg *Config, logger *slog.Logger, probe func(context.Context) error) (*glidein.Runtime, error) {
	started := cfg.Started
	if started.IsZero() {
		started = time.Now()
	}
	end, why := glidein.End(started, cfg.Lifetime, cfg.EndTime)
	grace := cfg.Grace
	if grace == 0 {
		grace = glidein.DefaultGrace(started, end)
	}
	rt, err := glidein.NewRuntime(glidein.Config{
		ID: cfg.Glidein, Name: cfg.Name, StatusFile: cfg.StatusFile, Started: started.UTC(),
		End: end, EndReason: why, Grace: grace,
		IdleTimeout: cfg.IdleTimeout, CMTimeout: cfg.CMTimeout, CentralManager: cfg.CondorHost,
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	err = rt.Validate(ctx, cfg.Checks, glidein.Env{ID: cfg.Glidein, DataDir: cfg.DataDir, CentralManager: probe})
	var ve *glidein.ValidationError
	switch {
	case err == nil, errors.As(err, &ve):
	case ctx.Err() != nil:
		rt.Fail(glidein.ReasonSignal, err, 1)
	default:
		rt.Fail(glidein.ReasonError, err, 1)
	}
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// centralManagerProbe returns a function that makes one authenticated
// call to the central manager at addr (GET /v1/self, with the node's
// token as the token file holds it then, and the node's certificate), and
// checks that it belongs to pool.
func centralManagerProbe(addr, pool string, clientTLS *tls.Config, token func() string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		self, err := api.NewClient(addr).WithTLS(clientTLS).WithToken(token()).Self(ctx)
		if err != nil {
			return fmt.Errorf("central manager %s: %w", addr, err)
		}
		if pool != "" && self.Pool != pool {
			return fmt.Errorf("central manager %s: the agent there (%s) belongs to pool %q, not %q", addr, self.Name, self.Pool, pool)
		}
		return nil
	}
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

// glideinGrace is how long before its end a glidein drains, which its
// startd takes as POND_END_GRACE (unless the configuration sets one), so
// that it stops taking jobs when the glidein drains and not before; zero
// for a node that is no glidein or one with no end.
func (a *Agent) glideinGrace() time.Duration {
	if a.glidein == nil {
		return 0
	}
	if v, ok := a.cfg.Knob(knobs.EndGrace); ok && v != "" {
		return 0
	}
	st := a.glidein.Status()
	if st.EndTime.IsZero() || st.DrainAt.IsZero() || !st.DrainAt.Before(st.EndTime) {
		return 0
	}
	return st.EndTime.Sub(st.DrainAt)
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

// parseEndTime reads a node's end time as POND_END_TIME or -end-time give
// it (see glidein.ParseEndTime); empty or "0" is none.
func parseEndTime(s string) (time.Time, error) {
	if s = strings.TrimSpace(s); s == "" || s == "0" {
		return time.Time{}, nil
	}
	return glidein.ParseEndTime(s)
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
