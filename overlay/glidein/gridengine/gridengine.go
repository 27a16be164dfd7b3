// Package gridengine is the Grid Engine site of glideins (Son of Grid
// Engine, Univa/Altair Grid Engine, Open Cluster Scheduler): it starts
// each glidein as a batch job through the cluster's own commands (qsub,
// qstat, qdel, qacct, qconf), as a user on a login node would, so pond
// needs no access to the cluster beyond what that user has.
//
// Every glidein gets a directory of its own (mode 0700) under a work
// directory that the login node and the execution hosts share; its files
// are written there with mode 0600, never passed on a command line. The
// pondctl binary is copied once into WORK_DIR/bin, named by its SHA-256.
//
// The glidein's ID is the job's name (qsub -N), so List finds a job whose
// Submit never returned and Cancel ends it by name. Submission is exactly
// once (overlay/glidein/batch.Submit): under a lock in the glidein's
// directory, qsub runs only when qstat shows no job of that name and the
// directory holds no output of one, and a result lost with the connection
// is learnt from qstat, never by submitting again. Queued and running
// jobs, and those ended a short while ago (the cluster's finished_jobs),
// come from qstat; older ones from qacct.
package gridengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// KindName is the kind's name: the provider "gridengine", a factory
// entry's site.kind.
const KindName = "gridengine"

// Config is a Grid Engine site. Errors about it name the attribute in
// snake_case, as the `gridengine` provider's HCL spells it.
type Config struct {
	// WorkDir (work_dir) is an absolute directory that the login node and
	// the execution hosts share: each glidein gets WorkDir/ID, the binary
	// is in WorkDir/bin. It is created (0700) when missing. Required.
	WorkDir string
	// Queue (queue) is the cluster queue (qsub -q), or several separated
	// by commas; empty lets the scheduler choose.
	Queue string
	// Project (project) is the project the jobs are charged to (qsub -P);
	// empty for the user's default.
	Project string
	// PE (parallel_environment) is the parallel environment a glidein of
	// more than one CPU asks its slots of (qsub -pe PE N); empty: a
	// glidein asks for one slot, and more CPUs are an error.
	PE string
	// Walltime (walltime) is the most a glidein's job may run (h_rt): the
	// limit of a glidein whose request has no Lifetime, and a cap on the
	// Lifetime of one that has; zero leaves it to the Lifetime or the
	// queue's own limit. Grid Engine counts in seconds.
	Walltime time.Duration
	// CPUs (cpus) and MemoryMB (memory_mb) are asked for a glidein whose
	// request does not say; zero leaves them to the cluster's defaults.
	CPUs     int
	MemoryMB int
	// MemoryResource (memory_resource) is the resource memory is asked
	// with, per slot (qsub -l NAME=MBM): default mem_free.
	MemoryResource string
	// Extra (extra) are more qsub options, each written into the batch
	// script as a `#$` line: "-l gpu=1" or "#$ -l gpu=1". The options the
	// site sets itself (name, output, directory, shell, environment,
	// array, rerun) are refused.
	Extra []string
	// Commands are the paths of the Grid Engine commands.
	Commands Commands
	// Env is added to the environment of the Grid Engine commands, such
	// as "SGE_ROOT=/opt/sge", "SGE_CELL=default".
	Env []string
	// History (history) is how far back List looks for ended glideins in
	// qacct. Default 7 days.
	History time.Duration
	// Login (login) is the cluster's login node, reached over SSH: the
	// commands run there, and WorkDir is a directory of it. Nil: they run
	// on this machine, which is then a submit host.
	Login *batch.Login `json:",omitempty"`
}

// Commands are the paths of the Grid Engine commands the site runs; an
// empty field is the command's name, looked up in PATH.
type Commands struct {
	Qsub  string // qsub
	Qstat string // qstat
	Qdel  string // qdel
	Qacct string // qacct
	Qconf string // qconf
}

// Site is a Grid Engine cluster glideins are started on.
type Site struct {
	cfg Config

	// runner runs the commands, and fs is the work directory: this
	// machine's, or the login node's.
	runner remote.Runner
	fs     batch.FS

	inflight batch.Inflight // IDs a Submit or Cancel works on
}

var (
	_ glidein.Site       = (*Site)(nil)
	_ glidein.Describer  = (*Site)(nil)
	_ glidein.FileWriter = (*Site)(nil)
)

var (
	// nameRE is what a queue, a project, a parallel environment or a
	// resource may be.
	nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.\-]*$`)
	// queueRE is a queue, possibly QUEUE@HOST or QUEUE@@HOSTGROUP.
	queueRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.\-]*(@@?[A-Za-z0-9_.\-]+)?$`)
)

// refusedOptions are the qsub options Extra may not set: the site's own.
var refusedOptions = []string{"-N", "-o", "-e", "-j", "-wd", "-cwd", "-S", "-V", "-v", "-t", "-b", "-r",
	"-terse", "-sync", "-now", "-shell", "-i", "-hold_jid", "-tc", "-C", "-@"}

// New checks cfg and returns the site. It runs no command: Check does.
func New(cfg Config) (*Site, error) {
	if cfg.WorkDir == "" {
		return nil, glidein.SettingErrorf("work_dir", "is required: a directory shared with the cluster's execution hosts")
	}
	if !filepath.IsAbs(cfg.WorkDir) {
		return nil, glidein.SettingErrorf("work_dir", "%q must be an absolute path", cfg.WorkDir)
	}
	// qsub expands $JOB_ID and the like in -o and -wd; ':' separates
	// hosts from paths there.
	if strings.ContainsAny(cfg.WorkDir, "$:\n\r\x00") {
		return nil, glidein.SettingErrorf("work_dir", "%q may not hold '$', ':', a newline or NUL (qsub reads them in paths)", cfg.WorkDir)
	}
	cfg.WorkDir = filepath.Clean(cfg.WorkDir)
	if cfg.Queue != "" {
		for _, q := range strings.Split(cfg.Queue, ",") {
			if !queueRE.MatchString(q) {
				return nil, glidein.SettingErrorf("queue", "%q: %q is not a queue name (QUEUE, QUEUE@HOST or QUEUE@@HOSTGROUP)", cfg.Queue, q)
			}
		}
	}
	if cfg.MemoryResource == "" {
		cfg.MemoryResource = "mem_free"
	}
	for _, a := range []struct{ attr, v string }{{"project", cfg.Project}, {"parallel_environment", cfg.PE}, {"memory_resource", cfg.MemoryResource}} {
		if a.v != "" && !nameRE.MatchString(a.v) {
			return nil, glidein.SettingErrorf(a.attr, "%q: a letter or '_', then letters, digits, '_', '.' and '-'", a.v)
		}
	}
	for _, a := range []struct {
		attr string
		v    int64
	}{{"walltime", int64(cfg.Walltime)}, {"cpus", int64(cfg.CPUs)}, {"memory_mb", int64(cfg.MemoryMB)}, {"history", int64(cfg.History)}} {
		if a.v < 0 {
			return nil, glidein.SettingErrorf(a.attr, "is negative")
		}
	}
	if cfg.CPUs > 1 && cfg.PE == "" {
		return nil, glidein.SettingErrorf("cpus", "%d CPUs need a parallel_environment to ask their slots of", cfg.CPUs)
	}
	if cfg.History == 0 {
		cfg.History = 7 * 24 * time.Hour
	}
	extra := make([]string, len(cfg.Extra))
	for i, line := range cfg.Extra {
		l, err := extraLine(line)
		if err != nil {
			return nil, glidein.SettingErrorf("extra_qsub", "[%d] %q: %v", i, line, err)
		}
		extra[i] = l
	}
	cfg.Extra = extra
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || !batch.IsEnvName(k) {
			return nil, fmt.Errorf("gridengine site: env %q is not NAME=VALUE", kv)
		}
	}
	batch.DefaultCommands(cfg.Commands.list()...)
	if cfg.Login != nil {
		l := *cfg.Login
		cfg.Login = &l
	}
	runner, fs, err := batch.Connect(cfg.WorkDir, cfg.Login)
	if err != nil {
		return nil, fmt.Errorf("gridengine site: %w", err)
	}
	return &Site{cfg: cfg, runner: runner, fs: fs}, nil
}

// extraLine makes an Extra entry a `#$` line, or says why it cannot be.
func extraLine(line string) (string, error) {
	if strings.ContainsAny(line, "\n\r\x00") {
		return "", errors.New("an option is one line")
	}
	opt := strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(opt, "#$"); ok {
		opt = strings.TrimSpace(rest)
	}
	if !strings.HasPrefix(opt, "-") {
		return "", errors.New(`not a qsub option: "-l gpu=1" or "#$ -l gpu=1"`)
	}
	name := strings.Fields(opt)[0]
	if slices.Contains(refusedOptions, name) {
		return "", fmt.Errorf("%s is set by pond itself", name)
	}
	return "#$ " + opt, nil
}

// Close closes the connection to the login node, if any.
func (s *Site) Close() error { return s.runner.Close() }

// Kind is "gridengine".
func (s *Site) Kind() string { return KindName }

// Describe implements glidein.Describer: the site's Config as JSON.
func (s *Site) Describe() (json.RawMessage, error) { return json.Marshal(s.cfg) }

// Config returns the site's configuration, with its defaults filled in.
func (s *Site) Config() Config { return s.cfg }

// cmdError is a Grid Engine command that failed, with what it said.
type cmdError struct {
	attr   string // the Commands attribute: qsub, qstat, ...
	path   string
	args   []string
	err    error
	stderr string
}

func (e *cmdError) Error() string {
	cmd := batch.CommandString(e.path, e.args)
	if remote.IsNotFound(e.err) {
		return fmt.Sprintf("%s command %q: not found (set commands.%s to its path)", e.attr, e.path, e.attr)
	}
	msg := e.err.Error()
	if said := strings.TrimSpace(e.stderr); said != "" {
		msg += ": " + said
	}
	if unreachable(e.stderr) {
		msg += " (the qmaster named by SGE_ROOT/SGE_CELL/common/act_qmaster and SGE_QMASTER_PORT, in the commands' environment, does not answer)"
	}
	return fmt.Sprintf("%s: %s", cmd, msg)
}

func (e *cmdError) Unwrap() error { return e.err }

// said reports whether the command's output holds s.
func (e *cmdError) said(s string) bool { return strings.Contains(e.stderr, s) }

// unreachable reports whether a command's output says it could not reach
// the qmaster.
func unreachable(said string) bool {
	for _, s := range []string{"unable to contact qmaster", "can't find connection", "unable to send message to qmaster", "commlib error"} {
		if strings.Contains(said, s) {
			return true
		}
	}
	return false
}

// run runs one Grid Engine command and returns its standard output.
func (s *Site) run(ctx context.Context, attr, path string, args ...string) ([]byte, error) {
	stdout, stderr, err := s.runner.Run(ctx, remote.Cmd{Path: path, Args: args, Env: slices.Clip(s.cfg.Env)})
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		said := strings.TrimSpace(string(stderr) + "\n" + string(stdout))
		return stdout, &cmdError{attr: attr, path: path, args: args, err: err, stderr: said}
	}
	return stdout, nil
}

// runAs is s.run as a batch.Run, the command named attr in errors.
func (s *Site) runAs(attr string) batch.Run {
	return func(ctx context.Context, c remote.Cmd) ([]byte, error) {
		return s.run(ctx, attr, c.Path, c.Args...)
	}
}

// dir is the glidein's directory.
func (s *Site) dir(id string) string { return filepath.Join(s.cfg.WorkDir, id) }

// list is the commands by their names in a provider block's commands.
func (c *Commands) list() []batch.Command {
	return []batch.Command{
		{Name: "qsub", Path: &c.Qsub},
		{Name: "qstat", Path: &c.Qstat},
		{Name: "qdel", Path: &c.Qdel},
		{Name: "qacct", Path: &c.Qacct},
		{Name: "qconf", Path: &c.Qconf},
	}
}
