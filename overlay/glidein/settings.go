package glidein

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
)

// Flags are a glidein's settings as its agent's flags give them, as
// typed: "" for one not given, which its knob then gives.
type Flags struct {
	Lifetime, EndTime, Grace, IdleTimeout, CMTimeout string
	// MaxJobs is -max-jobs, as typed.
	MaxJobs string
	// Env reads the environment (os.LookupEnv): a glidein given neither
	// -end-time nor POND_END_TIME takes its end from EndEnv.
	Env func(string) (string, bool)
}

// Define adds the glidein's flags to fs: -glidein sets id, -validate
// validate and -status-file statusFile; the others set g's fields.
func (g *Flags) Define(fs *flag.FlagSet, id, validate, statusFile *string) {
	fs.StringVar(id, "glidein", "", "run as the glidein `ID`: validate, then join the pool of -condor-host, and run down by itself (see docs/glideins.md)")
	fs.StringVar(&g.Lifetime, "lifetime", "", "a glidein's life from its start, a `duration` such as 2h (default: no limit)")
	fs.StringVar(&g.EndTime, "end-time", "", "`time` the node goes away (a glidein's batch job ends): RFC 3339 or seconds since 1970")
	fs.StringVar(&g.Grace, "grace", "", "`duration` before its end at which a glidein starts draining (default: a tenth of its life, at most 5m)")
	fs.StringVar(&g.IdleTimeout, "idle-timeout", "", "a glidein leaves after this `duration` without a claimed slot (default: never)")
	fs.StringVar(&g.MaxJobs, "max-jobs", "", "a glidein runs at most this `number` of jobs and leaves once the last has ended (default: no limit)")
	fs.StringVar(&g.CMTimeout, "cm-timeout", "", "a glidein leaves after its central manager has not answered for this `duration` (default 5m; 0: never)")
	fs.StringVar(validate, "validate", "", "JSON `file` of the checks a glidein must pass before it joins")
	fs.StringVar(statusFile, "status-file", "", "`file` a glidein writes its status to (default: glidein.status in -data-dir)")
}

// Settings are what a glidein is, as its agent's flags and knobs say.
type Settings struct {
	// ID is the glidein's ID (-glidein; "" for a node that is no
	// glidein), Name its node's name, Pool its pool, CentralManager the
	// API address of the pool's central manager, DataDir its data
	// directory.
	ID, Name, Pool, CentralManager, DataDir string
	// Started is when the agent started.
	Started time.Time
	// Validate is the validation file, and Checks the checks it holds.
	Validate string
	Checks   []api.ValidationCheck
	// StatusFile is where the glidein writes its status (default:
	// StatusFile in DataDir).
	StatusFile string
	// Lifetime is how long the glidein lives (0: no limit), and EndTime
	// when its node goes away (zero: not known); the sooner ends it.
	Lifetime time.Duration
	EndTime  time.Time
	// Grace is how long before its end the glidein starts draining (0:
	// DefaultGrace); IdleTimeout how long it may have no claimed slot,
	// and CMTimeout how long its central manager may not answer, before
	// it leaves (0: no limit).
	Grace, IdleTimeout, CMTimeout time.Duration
	// MaxJobs is the most jobs the glidein runs before it leaves (0: no
	// limit).
	MaxJobs int
}

// idPattern is what a glidein ID may be: what the sites accept, and more
// for glideins started by hand.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ParseNodeEnd reads a node's end time as POND_END_TIME or -end-time give
// it (see ParseEndTime); empty or "0" is none.
func ParseNodeEnd(s string) (time.Time, error) {
	if s = strings.TrimSpace(s); s == "" || s == "0" {
		return time.Time{}, nil
	}
	return ParseEndTime(s)
}

// Read reads f, or the knobs of knob they override, into s, whose ID,
// Pool, CentralManager, DataDir, Started, Validate and StatusFile the
// agent's other flags gave, and checks them together. The end time is
// any node's (a glidein's batch job, a cloud lease); the other settings
// only a glidein's.
func (f Flags) Read(s *Settings, knob map[string]string) error {
	r := knobs.Reader(func(name string) (string, bool) { v, ok := knob[name]; return v, ok })
	var given []string // the glidein's settings given, flag or knob
	dur := func(name, value, k string) (time.Duration, error) {
		if value == "" {
			if v, ok := knob[k]; ok && v != "" {
				given = append(given, k)
			}
			return r.Duration(k)
		}
		given = append(given, "-"+name)
		d, err := knobs.ParseDuration(value)
		if err != nil {
			return 0, fmt.Errorf("-%s %q: %w", name, value, err)
		}
		return d, nil
	}
	var err error
	if s.Lifetime, err = dur("lifetime", f.Lifetime, knobs.GlideinLifetime); err != nil {
		return err
	}
	if s.Grace, err = dur("grace", f.Grace, knobs.GlideinGrace); err != nil {
		return err
	}
	if s.IdleTimeout, err = dur("idle-timeout", f.IdleTimeout, knobs.GlideinIdleTimeout); err != nil {
		return err
	}
	if s.CMTimeout, err = dur("cm-timeout", f.CMTimeout, knobs.GlideinCMTimeout); err != nil {
		return err
	}
	if f.MaxJobs != "" {
		given = append(given, "-max-jobs")
		n, err := knobs.ParseInt(f.MaxJobs)
		if err != nil {
			return fmt.Errorf("-max-jobs %q: %w", f.MaxJobs, err)
		}
		s.MaxJobs = n
	} else {
		if v, ok := knob[knobs.GlideinMaxJobs]; ok && v != "" {
			given = append(given, knobs.GlideinMaxJobs)
		}
		if s.MaxJobs, err = r.Int(knobs.GlideinMaxJobs); err != nil {
			return err
		}
	}
	if s.MaxJobs < 0 {
		return fmt.Errorf("-max-jobs %d: must not be negative (0 is no limit)", s.MaxJobs)
	}
	// The end time is any node's (a glidein's batch job, a cloud
	// lease): a node that is no glidein has it too.
	end, endName := f.EndTime, "-end-time"
	if end == "" {
		end, endName = knob[knobs.EndTime], knobs.EndTime
	}
	if end == "" && s.ID != "" && f.Env != nil {
		// The batch job's end, which its site put in its environment.
		if v, ok := f.Env(EndEnv); ok {
			end, endName = v, EndEnv
		}
	}
	if s.EndTime, err = ParseNodeEnd(end); err != nil {
		return fmt.Errorf("%s %q: %w", endName, end, err)
	}
	if !s.EndTime.IsZero() && !s.EndTime.After(s.Started) {
		return fmt.Errorf("%s %s: the node's end has already passed (it is %s)", endName, end, s.Started.UTC().Format(time.RFC3339))
	}
	if s.Validate != "" {
		given = append(given, "-validate")
	}
	if s.StatusFile != "" {
		given = append(given, "-status-file")
	}
	if s.ID == "" {
		if len(given) > 0 {
			return fmt.Errorf("%s: only a glidein has it: give the glidein's ID with -glidein", given[0])
		}
		return nil
	}
	if !idPattern.MatchString(s.ID) {
		return fmt.Errorf("-glidein %q: want 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit", s.ID)
	}
	if s.Pool == "" {
		return fmt.Errorf("-glidein %s: name its pool with -pool: a glidein joins a pool", s.ID)
	}
	if s.CentralManager == "" {
		return fmt.Errorf("-glidein %s: give the API address of the pool's central manager with -condor-host: a glidein joins a pool", s.ID)
	}
	if s.StatusFile == "" {
		if s.DataDir == "" {
			return fmt.Errorf("-glidein %s: give it -data-dir (or -status-file) for its status file", s.ID)
		}
		s.StatusFile = filepath.Join(s.DataDir, StatusFile)
	}
	if end, _ := End(s.Started, s.Lifetime, s.EndTime); s.Grace > 0 && !end.IsZero() && s.Grace >= end.Sub(s.Started) {
		return fmt.Errorf("-grace %s: not shorter than the glidein's life of %s: it would drain from its start", s.Grace, end.Sub(s.Started).Round(time.Second))
	}
	if s.Validate != "" {
		if s.Checks, err = ReadChecks(s.Validate); err != nil {
			return fmt.Errorf("-validate: %w", err)
		}
	}
	return nil
}

// Start starts the runtime of glidein s and validates the glidein, before
// its agent binds anything or starts its daemons: a glidein that fails
// validation never joins the pool. probe makes one call to its central
// manager (CentralManagerProbe). The error is a *ValidationError when a
// check failed.
func Start(ctx context.Context, s Settings, logger *slog.Logger, probe func(context.Context) error) (*Runtime, error) {
	started := s.Started
	if started.IsZero() {
		started = time.Now()
	}
	end, why := End(started, s.Lifetime, s.EndTime)
	grace := s.Grace
	if grace == 0 {
		grace = DefaultGrace(started, end)
	}
	rt, err := NewRuntime(Config{
		ID: s.ID, Name: s.Name, StatusFile: s.StatusFile, Started: started.UTC(),
		End: end, EndReason: why, Grace: grace,
		IdleTimeout: s.IdleTimeout, CMTimeout: s.CMTimeout, CentralManager: s.CentralManager,
		MaxJobs: s.MaxJobs, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	err = rt.Validate(ctx, s.Checks, Env{ID: s.ID, DataDir: s.DataDir, CentralManager: probe})
	var ve *ValidationError
	switch {
	case err == nil, errors.As(err, &ve):
	case ctx.Err() != nil:
		rt.Fail(ReasonSignal, err, 1)
	default:
		rt.Fail(ReasonError, err, 1)
	}
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// CentralManagerProbe returns a function that makes one authenticated
// call to the central manager at addr (GET /v1/self, with the node's
// token as the token file holds it then, and the node's certificate), and
// checks that it belongs to pool: an *OtherPoolError when it does
// not.
func CentralManagerProbe(addr, pool string, clientTLS *tls.Config, token func() string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		self, err := api.NewClient(addr).WithTLS(clientTLS).WithToken(token()).Self(ctx)
		if err != nil {
			return fmt.Errorf("central manager %s: %w", addr, err)
		}
		if pool != "" && self.Pool != pool {
			return &OtherPoolError{Addr: addr, Name: self.Name, Pool: self.Pool, Want: pool}
		}
		return nil
	}
}
