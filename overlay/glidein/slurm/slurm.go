// Package slurm is the Slurm site of glideins: it starts each glidein as a
// Slurm batch job through the cluster's own commands (sbatch, squeue, sacct,
// scancel, scontrol), as a user on a login node would, so pond needs no
// access to the cluster beyond what that user has.
//
// Every glidein gets a directory of its own (mode 0700) under a work
// directory that the login node and the compute nodes share; its files
// (token, certificate, configuration) are written there with mode 0600,
// never passed on a command line. The pondctl binary is copied once into
// WORK_DIR/bin, named by its SHA-256, and reused by every glidein.
//
// The glidein's ID is the job's name (--job-name) and its comment
// (--comment), so List finds a job whose Submit never returned (the caller
// died) and Cancel ends it by name. Running jobs and jobs ended a short
// while ago (Slurm's MinJobAge) come from squeue; older ones from sacct,
// or, on a cluster without accounting storage, from the job completion log
// (sacct -c), when this machine can read it.
package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// Config is a Slurm site. Errors about it name the attribute in
// snake_case, as the `slurm` provider's HCL spells it.
type Config struct {
	// WorkDir (work_dir) is an absolute directory that this machine and the
	// cluster's nodes share: each glidein gets WorkDir/ID, the binary is in
	// WorkDir/bin. It is created (0700) when missing. Required.
	WorkDir string
	// Partition (partition) is the partition, or several separated by
	// commas; empty for the cluster's default partition.
	Partition string
	// Account (account) and QOS (qos) are the account and quality of
	// service the jobs are charged to; empty for the user's defaults.
	Account string
	QOS     string
	// Constraint (constraint) is Slurm's --constraint: node features.
	Constraint string
	// TimeLimit (time_limit) is the most a glidein's job may run: the
	// time limit of a glidein whose request has no Lifetime, and a cap on
	// the Lifetime of one that has (the glidein learns its end from
	// POND_GLIDEIN_END and drains before it); zero leaves it to the
	// Lifetime or the partition's default. Slurm counts in minutes: limits
	// are rounded up.
	TimeLimit time.Duration
	// CPUs (cpus) and MemoryMB (memory_mb) are asked for a glidein whose
	// request does not say; zero leaves them to Slurm's defaults.
	CPUs     int
	MemoryMB int
	// Extra (extra) are more sbatch options, each written into the batch
	// script as an `#SBATCH` line: "--gres=gpu:1" or "#SBATCH --gres=gpu:1".
	// The options the site sets itself (job name, comment, chdir, export,
	// array) are refused.
	Extra []string
	// Commands are the paths of the Slurm commands.
	Commands Commands
	// Env is added to the environment of the Slurm commands, such as
	// "SLURM_CONF=/etc/slurm/other.conf".
	Env []string
	// History (history) is how far back List looks for ended glideins in
	// sacct. Default 7 days.
	History time.Duration
	// Login (login) is the cluster's login node, reached over SSH: the
	// Slurm commands run there, and WorkDir is a directory of it. Nil:
	// they run on this machine, which is then a login node.
	Login *Login `json:",omitempty"`
}

// Login is a cluster's login node, reached over SSH: the login block
// every batch site shares (batch.Login). Errors about it name the
// attribute as login.NAME.
type Login = batch.Login

// Commands are the paths of the Slurm commands the site runs; an empty
// field is the command's name, looked up in PATH.
type Commands struct {
	Sbatch   string // sbatch
	Squeue   string // squeue
	Sacct    string // sacct
	Scancel  string // scancel
	Scontrol string // scontrol
	Sacctmgr string // sacctmgr: only when account or qos is set
}

// Site is a Slurm cluster glideins are started on.
type Site struct {
	cfg Config

	// runner runs the Slurm commands, and fs is the work directory:
	// this machine's, or the login node's.
	runner remote.Runner
	fs     batch.FS

	inflight batch.Inflight // IDs a Submit or Cancel works on

	mu       sync.Mutex // guards histMode
	histMode historyMode
}

// historyMode is where List finds ended jobs.
type historyMode int

const (
	historyUnknown    historyMode = iota
	historyAccounting             // sacct
	historyCompletion             // sacct -c: the job completion log
)

var _ glidein.Site = (*Site)(nil)

var (
	// nameRE is what a partition, an account or a QOS may be.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_.\-]+$`)
)

// refusedOptions are the sbatch options Extra may not set: the site's own.
var refusedOptions = []string{"-J", "--job-name", "--comment", "-D", "--chdir", "--export", "-a", "--array", "--wrap"}

// New checks cfg and returns the site. It runs no command: Check does.
func New(cfg Config) (*Site, error) {
	if cfg.WorkDir == "" {
		return nil, errors.New("slurm site: work_dir is required: a directory shared with the cluster's nodes")
	}
	if !filepath.IsAbs(cfg.WorkDir) {
		return nil, fmt.Errorf("slurm site: work_dir %q must be an absolute path", cfg.WorkDir)
	}
	if strings.ContainsAny(cfg.WorkDir, "%\n\x00") {
		return nil, fmt.Errorf("slurm site: work_dir %q may not hold %%, a newline or NUL (sbatch expands %% in file names)", cfg.WorkDir)
	}
	cfg.WorkDir = filepath.Clean(cfg.WorkDir)
	if cfg.Partition != "" {
		for _, p := range strings.Split(cfg.Partition, ",") {
			if !nameRE.MatchString(p) {
				return nil, fmt.Errorf("slurm site: partition %q: %q is not a partition name (letters, digits, '_', '.', '-')", cfg.Partition, p)
			}
		}
	}
	for _, a := range []struct{ attr, v string }{{"account", cfg.Account}, {"qos", cfg.QOS}} {
		if a.v != "" && !nameRE.MatchString(a.v) {
			return nil, fmt.Errorf("slurm site: %s %q: letters, digits, '_', '.' and '-' only", a.attr, a.v)
		}
	}
	if strings.ContainsAny(cfg.Constraint, " \t\n\r\x00'\"\\") {
		return nil, fmt.Errorf("slurm site: constraint %q may not hold spaces, quotes or control characters", cfg.Constraint)
	}
	if cfg.TimeLimit < 0 {
		return nil, fmt.Errorf("slurm site: time_limit %v is negative", cfg.TimeLimit)
	}
	if cfg.CPUs < 0 {
		return nil, fmt.Errorf("slurm site: cpus %d is negative", cfg.CPUs)
	}
	if cfg.MemoryMB < 0 {
		return nil, fmt.Errorf("slurm site: memory_mb %d is negative", cfg.MemoryMB)
	}
	if cfg.History < 0 {
		return nil, fmt.Errorf("slurm site: history %v is negative", cfg.History)
	}
	if cfg.History == 0 {
		cfg.History = 7 * 24 * time.Hour
	}
	extra := make([]string, len(cfg.Extra))
	for i, line := range cfg.Extra {
		l, err := extraLine(line)
		if err != nil {
			return nil, fmt.Errorf("slurm site: extra[%d] %q: %w", i, line, err)
		}
		extra[i] = l
	}
	cfg.Extra = extra
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || !batch.IsEnvName(k) {
			return nil, fmt.Errorf("slurm site: env %q is not NAME=VALUE", kv)
		}
	}
	batch.DefaultCommands(cfg.Commands.list()...)
	if cfg.Login != nil {
		l := *cfg.Login
		cfg.Login = &l
	}
	runner, fs, err := batch.Connect(cfg.WorkDir, cfg.Login)
	if err != nil {
		return nil, fmt.Errorf("slurm site: %w", err)
	}
	return &Site{cfg: cfg, runner: runner, fs: fs}, nil
}

// Close closes the connection to the login node, if any.
func (s *Site) Close() error { return s.runner.Close() }

// remoteLogin reports whether the Slurm commands run on a login node
// over SSH.
func (s *Site) remoteLogin() bool { return s.cfg.Login != nil }

// extraLine makes an Extra entry an #SBATCH line, or says why it cannot be.
func extraLine(line string) (string, error) {
	if strings.ContainsAny(line, "\n\r\x00") {
		return "", errors.New("an option is one line")
	}
	opt := strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(opt, "#SBATCH"); ok {
		opt = strings.TrimSpace(rest)
	}
	if !strings.HasPrefix(opt, "-") {
		return "", errors.New(`not an sbatch option: "--option=value" or "#SBATCH --option=value"`)
	}
	name, _, _ := strings.Cut(strings.Fields(opt)[0], "=")
	for _, r := range refusedOptions {
		if name == r || (len(r) == 2 && strings.HasPrefix(name, r)) {
			return "", fmt.Errorf("%s is set by pond itself", name)
		}
	}
	return "#SBATCH " + opt, nil
}

// Kind is "slurm".
func (s *Site) Kind() string { return "slurm" }

// Describe implements glidein.Describer: the site's Config as JSON.
func (s *Site) Describe() (json.RawMessage, error) { return json.Marshal(s.cfg) }

// Config returns the site's configuration, with its defaults filled in.
func (s *Site) Config() Config { return s.cfg }

// cmdError is a Slurm command that failed, with what it said.
type cmdError struct {
	attr   string // the Commands attribute: sbatch, squeue, ...
	path   string
	args   []string
	err    error
	stderr string
	// unreachable, when the command could not reach the controller, says
	// where it looked for it (describeController).
	unreachable string
}

func (e *cmdError) Error() string {
	cmd := batch.CommandString(e.path, e.args)
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	} else {
		msg = e.err.Error() + ": " + msg
	}
	if remote.IsNotFound(e.err) {
		return fmt.Sprintf("%s command %q: not found (set %s to its path)", e.attr, e.path, e.attr)
	}
	if e.unreachable != "" {
		return fmt.Sprintf("%s could not reach the Slurm controller: %s; %s: %s", e.attr, e.unreachable, cmd, msg)
	}
	return fmt.Sprintf("%s: %s", cmd, msg)
}

func (e *cmdError) Unwrap() error { return e.err }

// said reports whether the command's error output holds s.
func (e *cmdError) said(s string) bool { return strings.Contains(e.stderr, s) }

// run runs one Slurm command and returns its standard output.
func (s *Site) run(ctx context.Context, attr, path string, args ...string) ([]byte, error) {
	// Times as 2006-01-02T15:04:05 whatever the user's settings.
	env := append(slices.Clip(s.cfg.Env), "SLURM_TIME_FORMAT=standard")
	stdout, stderr, err := s.runner.Run(ctx, remote.Cmd{Path: path, Args: args, Env: env})
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		// What it said, on either stream (scontrol tells on stdout).
		said := strings.TrimSpace(string(stderr) + "\n" + string(stdout))
		ce := &cmdError{attr: attr, path: path, args: args, err: err, stderr: said}
		if controllerUnreachable(said) {
			ce.unreachable = s.describeController()
		}
		return stdout, ce
	}
	return stdout, nil
}

// runAs is s.run as a batch.Run, the command named attr in errors.
func (s *Site) runAs(attr string) batch.Run {
	return func(ctx context.Context, c remote.Cmd) ([]byte, error) {
		return s.run(ctx, attr, c.Path, c.Args...)
	}
}

// list is the commands by their names in a provider block's commands.
func (c *Commands) list() []batch.Command {
	return []batch.Command{
		{Name: "sbatch", Path: &c.Sbatch},
		{Name: "squeue", Path: &c.Squeue},
		{Name: "sacct", Path: &c.Sacct},
		{Name: "scancel", Path: &c.Scancel},
		{Name: "scontrol", Path: &c.Scontrol},
		{Name: "sacctmgr", Path: &c.Sacctmgr},
	}
}
