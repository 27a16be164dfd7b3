package submit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// Job is one job's ClassAd: attribute name -> ClassAd expression text
// (strings are quoted literals, e.g. Cmd -> `"/bin/echo"`).
type Job = map[string]string

// Universe numbers as HTCondor's JobUniverse attribute holds them.
const (
	UniverseVanilla   = 5
	UniverseScheduler = 7
	UniverseLocal     = 12
)

// Options parameterise the expansion of a submit file into jobs.
type Options struct {
	ClusterID int       // ClusterId of the jobs (default 1)
	FirstProc int       // ProcId of the first job (default 0)
	Owner     string    // Owner (default $USER)
	UIDDomain string    // domain of User = Owner@UIDDomain (default host name)
	QDate     time.Time // submission time (default now)
	SubmitDir string    // directory relative paths resolve against (default working directory)
	// Macros are extra submit macros (as condor_submit's name=value
	// arguments); the file's own definitions take precedence.
	Macros map[string]string
	// Env is the submitter's environment for getenv (default os.Environ()).
	Env []string
	// LookupEnv serves $ENV() (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// ReadFile reads "queue ... from FILE" (default os.ReadFile).
	ReadFile func(string) ([]byte, error)
	// Glob serves "queue ... matching" (default filepath.Glob).
	Glob func(string) ([]string, error)
	// Stat checks that initialdir exists (default os.Stat).
	Stat func(string) (os.FileInfo, error)
	// CheckExecutable, when set, checks each distinct executable the
	// submit host sends or runs (one not given transfer_executable =
	// false) as condor_submit checks it, the error reported at the
	// executable command's file:line (CheckExecutable is condor_submit's
	// check; a schedd that materializes a submitted digest sets none).
	CheckExecutable func(path string) error
	// CheckLog, when set, checks each distinct job event log (log,
	// dagman_log) as CheckExecutable its executable (CheckLog is
	// condor_submit's check).
	CheckLog func(path string) error
	// Arch and OpSys go into the default Requirements (default this host).
	Arch, OpSys string
	// FileSystemDomain is the submit host's FILESYSTEM_DOMAIN (default host name).
	FileSystemDomain string
	// ScheddName, when set, gives each job a GlobalJobId.
	ScheddName string
	// DefaultRequestCpus/Memory/Disk are JOB_DEFAULT_REQUEST* (defaults
	// 1, 128 and HTCondor 25's disk expression).
	DefaultRequestCpus, DefaultRequestMemory, DefaultRequestDisk string
	// MaxJobs bounds the jobs one file may produce (default 1,000,000).
	MaxJobs int
}

func (o Options) withDefaults() Options {
	if o.ClusterID == 0 {
		o.ClusterID = 1
	}
	if o.Owner == "" {
		o.Owner = os.Getenv("USER")
		if o.Owner == "" {
			o.Owner = "nobody"
		}
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	if o.UIDDomain == "" {
		o.UIDDomain = host
	}
	if o.FileSystemDomain == "" {
		o.FileSystemDomain = host
	}
	if o.QDate.IsZero() {
		o.QDate = time.Now()
	}
	if o.SubmitDir == "" {
		o.SubmitDir, _ = os.Getwd()
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.ReadFile == nil {
		o.ReadFile = os.ReadFile
	}
	if o.Glob == nil {
		o.Glob = filepath.Glob
	}
	if o.Stat == nil {
		o.Stat = os.Stat
	}
	if o.Arch == "" {
		switch runtime.GOARCH {
		case "amd64":
			o.Arch = "X86_64"
		case "arm64":
			o.Arch = "aarch64"
		default:
			o.Arch = strings.ToUpper(runtime.GOARCH)
		}
	}
	if o.OpSys == "" {
		o.OpSys = strings.ToUpper(runtime.GOOS)
	}
	if o.DefaultRequestCpus == "" {
		o.DefaultRequestCpus = "1"
	}
	if o.DefaultRequestMemory == "" {
		o.DefaultRequestMemory = "128"
	}
	if o.DefaultRequestDisk == "" {
		o.DefaultRequestDisk = "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024"
	}
	if o.MaxJobs <= 0 {
		o.MaxJobs = 1_000_000
	}
	return o
}

// knownCommands are the submit commands understood here; others draw a
// warning unless used as macros.
var knownCommands = setOf(
	"executable", "arguments", "args", "environment", "env", "getenv", "input", "output", "error",
	"log", "initialdir", "initial_dir", "iwd", "request_cpus", "request_memory", "request_disk",
	"request_gpus", "requirements", "rank", "transfer_input_files", "transfer_output_files",
	"transfer_output_remaps", "should_transfer_files", "when_to_transfer_output", "transfer_executable",
	"universe", "notification", "notify_user", "priority", "hold", "accounting_group",
	"accounting_group_user", "batch_name", "periodic_hold", "periodic_hold_reason", "periodic_hold_subcode",
	"periodic_release", "periodic_remove", "on_exit_hold", "on_exit_hold_reason", "on_exit_hold_subcode",
	"on_exit_remove", "max_retries", "success_exit_code", "leave_in_queue", "job_max_vacate_time",
	"concurrency_limits", "nice_user", "stream_output", "stream_error", "kill_sig", "description",
	"job_lease_duration", "allowed_execute_duration", "allowed_job_duration", "max_idle",
	"max_materialize", "coresize", "image_size", "want_graceful_removal", "docker_image",
	"container_image", "next_job_start_delay", "copy_to_spool", "email_attributes", "run_as_owner",
	"output_destination", "preserve_relative_paths", "skip_filechecks", "transfer_input",
	"transfer_output", "transfer_error", "log_xml", "load_profile", "want_remote_io", "job_machine_attrs",
	"submit_event_notes", "periodic_vacate", "retry_until", "buffer_size", "buffer_block_size",
	"request_memory_fraction", "dagman_log", "deferral_time", "deferral_window", "deferral_prep_time", "job_batch_id", "encrypt_execute_directory",
	"checkpoint_exit_code", "transfer_checkpoint_files", "job_machine_attrs_history_length",
)

// IgnoredCommands are the submit commands condor_submit knows that pond
// takes but does not act on: each draws a warning at submit time, and
// docs/compatibility.md lists them.
var IgnoredCommands = []string{
	"buffer_block_size", "buffer_size", "container_image",
	"copy_to_spool", "coresize", "docker_image", "encrypt_execute_directory",
	"job_batch_id", "job_machine_attrs", "job_machine_attrs_history_length", "load_profile", "log_xml", "next_job_start_delay",
	"output_destination", "periodic_vacate",
	"preserve_relative_paths", "request_memory_fraction", "run_as_owner",
	"skip_filechecks", "transfer_error", "transfer_input", "transfer_output", "want_graceful_removal",
	"want_remote_io",
}

var ignoredCommands = setOf(IgnoredCommands...)

func setOf(names ...string) map[string]struct{} {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	return m
}

type where struct{ line, col int }

type custom struct {
	name, value string
	at          where
}

// jobBuilder carries the state of an expansion.
type jobBuilder struct {
	f        *File
	opts     Options
	m        *macroSet
	at       map[string]where // lower-case command -> last definition
	customs  []custom
	qdate    int64
	jobs     []Job
	proc     int
	sawQueue bool
	// plan, when set, makes queue statements record segments (a job
	// factory's) instead of building jobs.
	plan *Factory

	// Of the job being built, for the steps after the one that sets them:
	iwd string // its Iwd
	stf string // its ShouldTransferFiles

	// checked holds the paths opts.CheckExecutable and opts.CheckLog
	// passed, by kind (checkOnce).
	checked map[string]bool
}

// Jobs expands the file into jobs: one per item and step of every queue
// statement, all in cluster opts.ClusterID, ProcIds counting from
// opts.FirstProc. Commands apply to the queue statements that follow them.
func (f *File) Jobs(ctx context.Context, opts Options) ([]Job, error) {
	b, err := f.build(ctx, opts, nil)
	if err != nil {
		return nil, err
	}
	return b.jobs, nil
}

// build runs the file's statements with opts: into jobs, or, with plan,
// into plan's segments.
func (f *File) build(ctx context.Context, opts Options, plan *Factory) (*jobBuilder, error) {
	opts = opts.withDefaults()
	b := &jobBuilder{
		plan: plan,
		f:    f, opts: opts,
		m:     &macroSet{vals: map[string]string{}, env: opts.LookupEnv},
		at:    map[string]where{},
		qdate: opts.QDate.Unix(),
		proc:  opts.FirstProc,
	}
	for k, v := range opts.Macros {
		b.m.set(k, v)
	}
	b.m.set("ARCH", opts.Arch)
	b.m.set("OPSYS", opts.OpSys)
	cluster := strconv.Itoa(opts.ClusterID)
	b.m.set("Cluster", cluster)
	b.m.set("ClusterId", cluster)
	if err := b.run(ctx, f.Name, f.stmts, 0); err != nil {
		return nil, err
	}
	if !b.sawQueue {
		return nil, &Error{File: f.Name, Msg: "no queue statement: nothing to submit"}
	}
	return b, nil
}

// ifFrame is one level of if/elif/else/endif while running statements.
type ifFrame struct{ active, taken, outer bool }

// run executes statements in order: definitions, conditionals, includes
// and queue statements.
func (b *jobBuilder) run(ctx context.Context, file string, stmts []stmt, depth int) error {
	var ifs []ifFrame
	live := func() bool { return len(ifs) == 0 || ifs[len(ifs)-1].active }
	for _, s := range stmts {
		if err := ctx.Err(); err != nil {
			return err
		}
		at := &Error{File: file, Line: s.line, Col: s.col}
		switch s.dir {
		case "if":
			fr := ifFrame{outer: live()}
			if fr.outer {
				ok, err := b.cond(s.value)
				if err != nil {
					at.Msg, at.Err = "bad if condition", err
					return at
				}
				fr.active, fr.taken = ok, ok
			}
			ifs = append(ifs, fr)
			continue
		case "elif":
			fr := &ifs[len(ifs)-1]
			fr.active = false
			if fr.outer && !fr.taken {
				ok, err := b.cond(s.value)
				if err != nil {
					at.Msg, at.Err = "bad elif condition", err
					return at
				}
				fr.active, fr.taken = ok, ok
			}
			continue
		case "else":
			fr := &ifs[len(ifs)-1]
			fr.active = fr.outer && !fr.taken
			fr.taken = true
			continue
		case "endif":
			ifs = ifs[:len(ifs)-1]
			continue
		}
		if !live() {
			continue
		}
		switch {
		case s.dir == "include":
			if depth >= 10 {
				at.Msg = "includes nested deeper than 10"
				return at
			}
			name, err := b.m.expand(s.value)
			if err != nil {
				at.Msg, at.Err = "include", err
				return at
			}
			path := b.abs(name)
			src, err := b.opts.ReadFile(path)
			if err != nil {
				at.Msg, at.Err = "include "+path, err
				return at
			}
			inc, err := Parse(path, src)
			if err != nil {
				return err
			}
			if err := b.run(ctx, path, inc.stmts, depth+1); err != nil {
				return err
			}
		case s.queue != nil:
			b.sawQueue = true
			if err := b.queue(ctx, s.queue); err != nil {
				return err
			}
		default:
			b.define(s)
		}
	}
	return nil
}

// cond evaluates an if/elif condition as condor_submit does: true/false,
// yes/no, numbers, "defined NAME", "version OP X.Y[.Z]", each optionally
// negated with "!".
func (b *jobBuilder) cond(c string) (bool, error) {
	c = strings.TrimSpace(c)
	if strings.HasPrefix(c, "!") {
		v, err := b.cond(c[1:])
		return !v, err
	}
	word, rest, _ := strings.Cut(c, " ")
	switch strings.ToLower(word) {
	case "defined":
		n, err := b.m.expand(strings.TrimSpace(rest))
		if err != nil || strings.TrimSpace(n) == "" {
			return false, err
		}
		v, ok, err := b.m.value(n)
		return ok && strings.TrimSpace(v) != "", err
	case "version":
		return versionCond(rest)
	}
	v, err := b.m.expand(c)
	if err != nil {
		return false, err
	}
	v = strings.TrimSpace(v)
	if strings.ContainsAny(v, "=<>&|") {
		return false, fmt.Errorf("%q: complex conditionals are not supported", v)
	}
	if t, ok := config.ParseBool(v); ok {
		return t, nil
	}
	if f, _, err := evalArith(v); err == nil {
		return f != 0, nil
	}
	return false, fmt.Errorf("%q is not a conditional", v)
}

// submitVersion is the HTCondor version "if version" compares against.
var submitVersion = [3]int{25, 0, 0}

func versionCond(rest string) (bool, error) {
	rest = strings.TrimSpace(rest)
	op := ">="
	for _, o := range []string{"==", "!=", ">=", "<=", ">", "<"} {
		if strings.HasPrefix(rest, o) {
			op, rest = o, strings.TrimSpace(rest[len(o):])
			break
		}
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return false, fmt.Errorf("bad version %q (want X.Y or X.Y.Z)", rest)
	}
	var want [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return false, fmt.Errorf("bad version %q", rest)
		}
		want[i] = n
	}
	r := 0
	for i := range 3 {
		if submitVersion[i] != want[i] {
			if submitVersion[i] < want[i] {
				r = -1
			} else {
				r = 1
			}
			break
		}
	}
	switch op {
	case "==":
		return r == 0, nil
	case "!=":
		return r != 0, nil
	case ">":
		return r > 0, nil
	case "<":
		return r < 0, nil
	case "<=":
		return r <= 0, nil
	}
	return r >= 0, nil
}

func (b *jobBuilder) define(s stmt) {
	key := s.key
	switch {
	case strings.HasPrefix(key, "+"):
		b.addCustom(key[1:], s)
		return
	case len(key) > 3 && strings.EqualFold(key[:3], "MY."):
		b.addCustom(key[3:], s)
		return
	}
	b.m.set(key, s.value)
	b.at[strings.ToLower(key)] = where{s.line, s.col}
}

func (b *jobBuilder) addCustom(name string, s stmt) {
	for i := range b.customs {
		if strings.EqualFold(b.customs[i].name, name) {
			b.customs[i] = custom{name, s.value, where{s.line, s.col}}
			return
		}
	}
	b.customs = append(b.customs, custom{name, s.value, where{s.line, s.col}})
}

func (b *jobBuilder) errAt(at where, msg string, err error) error {
	return &Error{File: b.f.Name, Line: at.line, Col: at.col, Msg: msg, Err: err}
}

// items returns the items of a queue statement (one nil row for a plain
// queue).
func (b *jobBuilder) items(q *Queue) (itemRows, error) {
	at := where{q.Line, q.Col}
	var raw []string
	switch q.Mode {
	case QueuePlain:
		return itemRows{plain: true}, nil
	case QueueIn:
		for _, it := range q.Items {
			v, err := b.m.expand(it)
			if err != nil {
				return itemRows{}, b.errAt(at, "queue in", err)
			}
			raw = append(raw, v)
		}
	case QueueFrom:
		lines := q.Items
		if !q.Inline {
			name, err := b.m.expand(q.FromFile)
			if err != nil {
				return itemRows{}, b.errAt(at, "queue from", err)
			}
			name = b.abs(name)
			data, err := b.opts.ReadFile(name)
			if err != nil {
				return itemRows{}, b.errAt(at, "queue from "+name, err)
			}
			lines = nil
			// Unlike an inline list, a file's lines are all items.
			lines = strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
			for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
				lines = lines[:len(lines)-1]
			}
		}
		for _, l := range lines {
			v, err := b.m.expand(l)
			if err != nil {
				return itemRows{}, b.errAt(at, "queue from", err)
			}
			raw = append(raw, v)
		}
	case QueueMatching:
		seen := map[string]bool{}
		for _, g := range q.Globs {
			pat, err := b.m.expand(g)
			if err != nil {
				return itemRows{}, b.errAt(at, "queue matching", err)
			}
			absPat := b.abs(pat)
			matches, err := b.opts.Glob(absPat)
			if err != nil {
				return itemRows{}, b.errAt(at, "queue matching "+pat, err)
			}
			sort.Strings(matches)
			for _, mt := range matches {
				if q.Match != "" {
					st, err := b.opts.Stat(mt)
					if err != nil || st.IsDir() != (q.Match == "dirs") {
						continue
					}
				}
				// Report matches as the pattern was written (relative stays relative).
				if !filepath.IsAbs(pat) {
					if rel, err := filepath.Rel(b.opts.SubmitDir, mt); err == nil {
						mt = rel
					}
				}
				if !seen[mt] {
					seen[mt] = true
					raw = append(raw, mt)
				}
			}
		}
	}
	raw, err := applySlice(raw, q.Slice)
	if err != nil {
		return itemRows{}, b.errAt(at, "queue slice", err)
	}
	return itemRows{raw: raw, from: q.Mode == QueueFrom, vars: len(q.Vars)}, nil
}

// itemRows are the items of a queue statement, kept as their lines and
// split into a row of values, one per variable, when a job needs them:
// a million items cost a million strings.
type itemRows struct {
	raw   []string
	plain bool // a plain queue: one row, no variables
	from  bool // "from" lines, split among the variables
	vars  int
}

func (r itemRows) len() int {
	if r.plain {
		return 1
	}
	return len(r.raw)
}

// row returns the values of item i, one per variable.
func (r itemRows) row(i int) []string {
	switch {
	case r.plain:
		return nil
	case r.from:
		return splitRow(r.raw[i], r.vars)
	}
	row := make([]string, r.vars)
	row[0] = r.raw[i]
	return row
}

// splitRow splits a "from" line among n variables: each but the last
// takes one token ending at a comma or whitespace; the last takes the rest.
// A line holding the unit separator (0x1F, as HTCondor's Python client
// writes item data) is split at it alone, each value as it is.
func splitRow(line string, n int) []string {
	row := make([]string, n)
	if strings.Contains(line, "\x1f") {
		copy(row, strings.SplitN(strings.TrimRight(line, "\r"), "\x1f", n))
		return row
	}
	s := strings.TrimSpace(line)
	for i := 0; i < n-1; i++ {
		j := strings.IndexAny(s, ", \t")
		if j < 0 {
			row[i], s = s, ""
			continue
		}
		row[i] = s[:j]
		if s[j] == ',' {
			s = s[j+1:]
		} else {
			s = strings.TrimLeft(s[j:], " \t")
		}
		s = strings.TrimLeft(s, " \t")
	}
	row[n-1] = strings.TrimSpace(s)
	return row
}

func (b *jobBuilder) queue(ctx context.Context, q *Queue) error {
	at := where{q.Line, q.Col}
	count := 1
	if q.Count != "" {
		cs, err := b.m.expand(q.Count)
		if err != nil {
			return b.errAt(at, "queue count", err)
		}
		f, isInt, err := evalArith(cs)
		if err != nil || !isInt || f < 0 {
			return b.errAt(at, fmt.Sprintf("queue count %q is not a non-negative integer", cs), err)
		}
		count = int(f)
	}
	rows, err := b.items(q)
	if err != nil {
		return err
	}
	if b.plan != nil {
		if b.plan.total+count*rows.len() > b.opts.MaxJobs {
			return b.errAt(at, fmt.Sprintf("submit would create more than %d jobs", b.opts.MaxJobs), nil)
		}
		b.plan.segment(b, q, count, rows)
		b.proc += count * rows.len()
		return nil
	}
	if len(b.jobs)+count*rows.len() > b.opts.MaxJobs {
		return b.errAt(at, fmt.Sprintf("submit would create more than %d jobs", b.opts.MaxJobs), nil)
	}
	for rowIdx := range rows.len() {
		row := rows.row(rowIdx)
		for step := 0; step < count; step++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			job, err := b.procJob(q.Vars, rowIdx, row, step)
			if err != nil {
				return err
			}
			b.jobs = append(b.jobs, job)
			b.proc++
		}
	}
	for _, v := range q.Vars {
		delete(b.m.vals, strings.ToLower(v))
	}
	return nil
}

// procJob builds the job b.proc, of item row rowIdx and step of a queue
// statement whose item variables are vars: the one code path of an
// eager submit and of a job factory's materialization.
func (b *jobBuilder) procJob(vars []string, rowIdx int, row []string, step int) (Job, error) {
	for i, v := range vars {
		if row != nil {
			b.m.set(v, row[i])
		}
	}
	b.m.set("Row", strconv.Itoa(rowIdx))
	b.m.set("ItemIndex", strconv.Itoa(rowIdx))
	b.m.set("Step", strconv.Itoa(step))
	b.m.set("Process", strconv.Itoa(b.proc))
	b.m.set("ProcId", strconv.Itoa(b.proc))
	return b.job()
}

// get returns the expanded value of the first defined command among names.
func (b *jobBuilder) get(names ...string) (string, where, bool, error) {
	for _, n := range names {
		ln := strings.ToLower(n)
		raw, ok := b.m.vals[ln]
		if !ok {
			continue
		}
		at := b.at[ln]
		v, err := b.m.expand(raw)
		if err != nil {
			return "", at, true, b.errAt(at, n, err)
		}
		return strings.TrimSpace(v), at, true, nil
	}
	return "", where{}, false, nil
}

func (b *jobBuilder) abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(b.opts.SubmitDir, p)
}

// jobSteps build a job's ad, each from the submit commands of one concern,
// in this order: a step may read what an earlier one set, and custom
// attributes come last because they override everything.
var jobSteps = [...]func(*jobBuilder, Job) error{
	(*jobBuilder).universe,
	(*jobBuilder).initialDir,
	(*jobBuilder).executable,
	(*jobBuilder).arguments,
	(*jobBuilder).environment,
	(*jobBuilder).stdio,
	(*jobBuilder).resources,
	(*jobBuilder).transfer,
	(*jobBuilder).stringCommands,
	(*jobBuilder).policy,
	(*jobBuilder).notification,
	(*jobBuilder).imageSize,
	(*jobBuilder).matching,
	(*jobBuilder).hold,
	(*jobBuilder).customAttrs,
}

// job builds the ad of the job at the current step of a queue statement.
func (b *jobBuilder) job() (Job, error) {
	j := b.identity()
	for _, step := range jobSteps {
		if err := step(b, j); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// identity returns the job's ids, owner and submission time, with the
// defaults condor_submit gives every job.
func (b *jobBuilder) identity() Job {
	o := b.opts
	j := Job{
		"MyType": `"Job"`, "TargetType": `"Machine"`,
		"ClusterId": strconv.Itoa(o.ClusterID), "ProcId": b.m.vals["procid"],
		"Owner": classad.QuoteString(o.Owner), "User": classad.QuoteString(o.Owner + "@" + o.UIDDomain),
		"QDate": strconv.FormatInt(b.qdate, 10), "EnteredCurrentStatus": strconv.FormatInt(b.qdate, 10),
		"JobStatus": "1", "JobPrio": "0", "NumJobStarts": "0", "JobRunCount": "0", "NumRestarts": "0",
		"NumShadowStarts": "0", "NumJobMatches": "0", "ImageSize": "0", "DiskUsage": "0",
		"RemoteUserCpu": "0.0", "RemoteSysCpu": "0.0", "RemoteWallClockTime": "0.0",
		"CumulativeSlotTime": "0", "CommittedTime": "0", "CompletionDate": "0",
		"LastSuspensionTime": "0", "TotalSuspensions": "0", "CurrentHosts": "0", "MinHosts": "1", "MaxHosts": "1",
		"WantRemoteSyscalls": "false", "WantCheckpoint": "false", "LeaveJobInQueue": "false",
		"PeriodicHold": "false", "PeriodicRelease": "false", "PeriodicRemove": "false",
		"OnExitHold": "false", "OnExitRemove": "true", "JobNotification": "0", "Rank": "0.0",
		"In": `"/dev/null"`, "Out": `"/dev/null"`, "Err": `"/dev/null"`, "TransferIn": "false",
		"StreamOut": "false", "StreamErr": "false", "CoreSize": "0", "KillSig": `"SIGTERM"`,
		"JobUniverse": strconv.Itoa(UniverseVanilla), "TransferInputSizeMB": "0",
		"FileSystemDomain": classad.QuoteString(o.FileSystemDomain), "JobSubmitMethod": "0",
		"ExitStatus": "0", "BufferSize": "524288", "BufferBlockSize": "32768",
	}
	if o.ScheddName != "" {
		j["GlobalJobId"] = classad.QuoteString(fmt.Sprintf("%s#%d.%s#%d", o.ScheddName, o.ClusterID, j["ProcId"], b.qdate))
	}
	if b.f.Name != "" {
		j["SubmitFile"] = classad.QuoteString(b.abs(b.f.Name))
	}
	return j
}

// universe sets JobUniverse: vanilla, scheduler or local.
func (b *jobBuilder) universe(j Job) error {
	v, at, ok, err := b.get("universe")
	if err != nil || !ok || v == "" {
		return err
	}
	switch strings.ToLower(v) {
	case "vanilla":
		j["JobUniverse"] = strconv.Itoa(UniverseVanilla)
	case "scheduler":
		j["JobUniverse"] = strconv.Itoa(UniverseScheduler)
	case "local":
		j["JobUniverse"] = strconv.Itoa(UniverseLocal)
	default:
		return b.errAt(at, fmt.Sprintf("universe %q is not supported (vanilla, local and scheduler are)", v), nil)
	}
	return nil
}

// initialDir sets Iwd, the directory the job's own relative paths resolve
// against: initialdir relative to the submit directory, or the submit
// directory itself.
func (b *jobBuilder) initialDir(j Job) error {
	iwd := b.opts.SubmitDir
	if v, at, ok, err := b.get("initialdir", "initial_dir", "iwd"); err != nil {
		return err
	} else if ok && v != "" {
		iwd = b.abs(v)
		// As condor_submit, refuse a directory that is not there: the job
		// could never start.
		if st, err := b.opts.Stat(iwd); err != nil {
			return b.errAt(at, "initialdir "+iwd+" does not exist", err)
		} else if !st.IsDir() {
			return b.errAt(at, "initialdir "+iwd+" is not a directory", nil)
		}
	}
	b.iwd = filepath.Clean(iwd)
	j["Iwd"] = classad.QuoteString(b.iwd)
	return nil
}

// inIwd resolves a relative path against the job's Iwd.
func (b *jobBuilder) inIwd(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(b.iwd, p)
}

// executable sets Cmd, which every job needs.
func (b *jobBuilder) executable(j Job) error {
	exe, at, ok, err := b.get("executable")
	if err != nil {
		return err
	}
	if !ok || exe == "" {
		return &Error{File: b.f.Name, Msg: "no executable given (executable = /path/to/program)"}
	}
	// Unlike input, output and log, a relative executable is relative to
	// the submit directory, not initialdir; one that is not transferred
	// names a program on the execute host and stays as written.
	if te, _, ok, err := b.get("transfer_executable"); err != nil {
		return err
	} else if t, isBool := config.ParseBool(te); ok && isBool && !t {
		j["Cmd"] = classad.QuoteString(filepath.Clean(exe))
		return nil
	}
	path := filepath.Clean(b.abs(exe))
	if err := b.checkOnce(at, "exe:", path, b.opts.CheckExecutable); err != nil {
		return err
	}
	j["Cmd"] = classad.QuoteString(path)
	return nil
}

// checkOnce runs check (CheckExecutable, CheckLog; nil: none) on path once
// a kind (its key prefix) and path, its error reported at at.
func (b *jobBuilder) checkOnce(at where, kind, path string, check func(string) error) error {
	if check == nil || b.checked[kind+path] {
		return nil
	}
	if err := check(path); err != nil {
		return b.errAt(at, err.Error(), nil)
	}
	if b.checked == nil {
		b.checked = map[string]bool{}
	}
	b.checked[kind+path] = true
	return nil
}

// CheckLog checks a job's event log on the submit host as condor_submit
// does: the directory it is to be written in exists, so that the job's
// events are not lost to a log that can never be written.
func CheckLog(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("log file %s: the directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("log file %s: %w", path, err)
	case !st.IsDir():
		return fmt.Errorf("log file %s: %s is not a directory", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("log file %s is a directory", path)
	}
	return nil
}

// CheckExecutable checks an executable on the submit host as
// condor_submit does before it queues a job that would only be held: it
// exists, is a file, is not empty, and is not a script whose first line
// ends in a carriage return (a file saved with DOS line endings, whose
// interpreter "sh\r" the kernel would not find).
func CheckExecutable(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("executable file %s does not exist", path)
	case err != nil:
		return fmt.Errorf("executable file %s: %w", path, err)
	case st.IsDir():
		return fmt.Errorf("executable file %s is a directory", path)
	case st.Size() == 0:
		return fmt.Errorf("executable file %s has zero length", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("executable file %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, 1024)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bytes.Cut(head, []byte("\n"))
		if bytes.HasSuffix(line, []byte("\r")) {
			return fmt.Errorf("executable file %s is a script with CRLF (DOS/Windows) line endings: its interpreter cannot be found; convert it (dos2unix) and submit again", path)
		}
	}
	return nil
}

// arguments sets Arguments (the V2 syntax) or Args (the old one).
func (b *jobBuilder) arguments(j Job) error {
	v, at, ok, err := b.get("arguments", "args")
	if err != nil {
		return err
	}
	if !ok || v == "" {
		j["Arguments"] = `""`
		return nil
	}
	args, v2, err := ParseArguments(v)
	if err != nil {
		return b.errAt(at, "arguments", err)
	}
	if v2 {
		j["Arguments"] = classad.QuoteString(JoinArgumentsV2(args))
	} else {
		j["Args"] = classad.QuoteString(strings.Join(args, " "))
	}
	return nil
}

// environment sets Environment (V2) or Env (the old syntax) from
// environment and the submitter's variables getenv picks, which the
// environment command's own overrides.
func (b *jobBuilder) environment(j Job) error {
	var env []string
	envV2 := true
	if v, at, ok, err := b.get("environment", "env"); err != nil {
		return err
	} else if ok && v != "" {
		if env, envV2, err = ParseEnvironment(v); err != nil {
			return b.errAt(at, "environment", err)
		}
	}
	base, err := b.getenv()
	if err != nil {
		return err
	}
	if len(base) > 0 {
		env = mergeEnv(base, env)
		envV2 = true
	}
	// condor_submit turns the environment command's old syntax into the
	// new one; only the env command keeps it, in Env with its delimiter.
	if _, viaEnv := b.m.vals["env"]; !envV2 && viaEnv {
		if _, both := b.m.vals["environment"]; !both {
			j["Env"] = classad.QuoteString(strings.Join(env, ";"))
			j["EnvDelim"] = `";"`
			return nil
		}
	}
	j["Environment"] = classad.QuoteString(JoinEnvironmentV2(sortEnv(env)))
	return nil
}

// getenv returns the submitter's variables getenv asks for: all of them
// (true), none (false), or those matching its patterns, the first match
// deciding and a "!" pattern excluding.
func (b *jobBuilder) getenv() ([]string, error) {
	v, at, ok, err := b.get("getenv")
	if err != nil || !ok || v == "" {
		return nil, err
	}
	if t, isBool := config.ParseBool(v); isBool {
		if t {
			return b.opts.Env, nil
		}
		return nil, nil
	}
	var base []string
	pats := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	for _, e := range b.opts.Env {
		n, _, _ := strings.Cut(e, "=")
		for _, p := range pats {
			neg := strings.HasPrefix(p, "!")
			if m, err := filepath.Match(strings.ToUpper(strings.TrimPrefix(p, "!")), strings.ToUpper(n)); err != nil {
				return nil, b.errAt(at, "getenv pattern "+p, err)
			} else if m {
				if !neg {
					base = append(base, e)
				}
				break
			}
		}
	}
	return base, nil
}

// stdio sets the job's standard input, output and error (In, Out, Err)
// and its event logs (UserLog and DAGManNodesLog, relative to Iwd).
func (b *jobBuilder) stdio(j Job) error {
	for _, m := range []struct{ cmd, attr string }{{"input", "In"}, {"output", "Out"}, {"error", "Err"}} {
		if v, _, ok, err := b.get(m.cmd); err != nil {
			return err
		} else if ok && v != "" {
			j[m.attr] = classad.QuoteString(v)
			if m.cmd == "input" {
				delete(j, "TransferIn")
				j["StreamIn"] = "false"
			}
		}
	}
	if v, at, ok, err := b.get("log"); err != nil {
		return err
	} else if ok && v != "" {
		if err := b.checkOnce(at, "log:", b.inIwd(v), b.opts.CheckLog); err != nil {
			return err
		}
		j["UserLog"] = classad.QuoteString(b.inIwd(v))
	}
	// dagman_log is the DAG manager's nodes' log, where the schedd also
	// writes the job's events (DAGManNodesLog), as condor_submit sets it.
	if v, at, ok, err := b.get("dagman_log"); err != nil {
		return err
	} else if ok && v != "" {
		if err := b.checkOnce(at, "log:", b.inIwd(v), b.opts.CheckLog); err != nil {
			return err
		}
		j["DAGManNodesLog"] = classad.QuoteString(b.inIwd(v))
	}
	return nil
}

// resources sets RequestCpus, RequestMemory, RequestDisk and RequestGPUs.
func (b *jobBuilder) resources(j Job) error {
	cpus, err := b.resource("request_cpus", b.opts.DefaultRequestCpus, "")
	if err != nil {
		return err
	}
	j["RequestCpus"] = cpus
	mem, err := b.resource("request_memory", b.opts.DefaultRequestMemory, "M")
	if err != nil {
		return err
	}
	j["RequestMemory"] = mem
	disk, err := b.resource("request_disk", b.opts.DefaultRequestDisk, "K")
	if err != nil {
		return err
	}
	j["RequestDisk"] = disk
	if v, _, ok, err := b.get("request_gpus"); err != nil {
		return err
	} else if ok && v != "" {
		j["RequestGPUs"] = v
	}
	return nil
}

// transfer sets ShouldTransferFiles and WhenToTransferOutput.
func (b *jobBuilder) transfer(j Job) error {
	b.stf = "IF_NEEDED"
	if v, at, ok, err := b.get("should_transfer_files"); err != nil {
		return err
	} else if ok && v != "" {
		switch u := strings.ToUpper(v); u {
		case "YES", "NO", "IF_NEEDED":
			b.stf = u
		case "TRUE":
			b.stf = "YES"
		case "FALSE":
			b.stf = "NO"
		default:
			return b.errAt(at, fmt.Sprintf("should_transfer_files must be YES, NO or IF_NEEDED, not %q", v), nil)
		}
	}
	j["ShouldTransferFiles"] = classad.QuoteString(b.stf)
	if b.stf == "YES" {
		// Always transferring, the job does not care where it runs.
		delete(j, "FileSystemDomain")
	}
	wto := "ON_EXIT"
	v, at, ok, err := b.get("when_to_transfer_output")
	if err != nil {
		return err
	}
	if ok && v != "" {
		switch u := strings.ToUpper(v); u {
		case "ON_EXIT", "ON_EXIT_OR_EVICT", "ON_SUCCESS":
			wto = u
		default:
			return b.errAt(at, fmt.Sprintf("when_to_transfer_output must be ON_EXIT, ON_EXIT_OR_EVICT or ON_SUCCESS, not %q", v), nil)
		}
	}
	if b.stf != "NO" {
		j["WhenToTransferOutput"] = classad.QuoteString(wto)
	} else if ok {
		return b.errAt(at, "when_to_transfer_output makes no sense with should_transfer_files = NO", nil)
	}
	return nil
}

// stringAttrs are the submit commands whose value becomes a string
// attribute as it is.
var stringAttrs = [...]struct{ cmd, attr string }{
	{"transfer_input_files", "TransferInput"}, {"transfer_output_files", "TransferOutput"},
	{"transfer_output_remaps", "TransferOutputRemaps"}, {"output_destination", "OutputDestination"},
	{"concurrency_limits", "ConcurrencyLimits"}, {"notify_user", "NotifyUser"},
	{"accounting_group", "AcctGroup"}, {"accounting_group_user", "AcctGroupUser"},
	{"batch_name", "JobBatchName"}, {"kill_sig", "KillSig"}, {"description", "JobDescription"},
	{"docker_image", "DockerImage"}, {"container_image", "ContainerImage"},
	{"email_attributes", "EmailAttributes"}, {"submit_event_notes", "SubmitEventNotes"},
	{"transfer_checkpoint_files", "TransferCheckpoint"},
}

// stringCommands sets the string attributes (file lists normalised to
// comma-separated) and AccountingGroup, group.user, from an accounting
// group.
func (b *jobBuilder) stringCommands(j Job) error {
	for _, m := range stringAttrs {
		v, at, ok, err := b.get(m.cmd)
		if err != nil {
			return err
		}
		if !ok || v == "" {
			continue
		}
		switch m.cmd {
		case "transfer_input_files", "transfer_output_files", "transfer_checkpoint_files":
			if b.stf == "NO" {
				return b.errAt(at, m.cmd+" names files to transfer, but should_transfer_files is NO", nil)
			}
			v = normaliseList(v)
		case "concurrency_limits":
			v = normaliseLimits(v)
		case "kill_sig":
			if v, err = signalName(v); err != nil {
				return b.errAt(at, "kill_sig", err)
			}
		case "transfer_output_remaps":
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
		}
		j[m.attr] = classad.QuoteString(v)
	}
	if t, _, ok, err := b.get("nice_user"); err != nil {
		return err
	} else if nice, _ := config.ParseBool(t); ok && nice {
		// A nice user's jobs run in the nice-user accounting group and
		// give way at once when preempted.
		j["AcctGroup"] = `"nice-user"`
		j["AcctGroupUser"] = classad.QuoteString(b.opts.Owner)
		j["MaxJobRetirementTime"] = "0"
	}
	if _, ok := j["AcctGroup"]; ok {
		user := b.opts.Owner
		if _, ok := j["AcctGroupUser"]; !ok {
			j["AcctGroupUser"] = classad.QuoteString(user)
		}
		if g, ok := j["AcctGroupUser"]; ok {
			user, _ = classad.UnquoteString(g)
		}
		g, _ := classad.UnquoteString(j["AcctGroup"])
		j["AccountingGroup"] = classad.QuoteString(g + "." + user)
	} else if u, ok := j["AcctGroupUser"]; ok {
		// As condor_submit: accounting_group_user alone names the
		// submitter.
		j["AccountingGroup"] = u
	}
	return nil
}

// policyAttrs are the submit commands whose value becomes a boolean
// (kind 'b'), an integer ('i') or an expression ('e') attribute.
var policyAttrs = [...]struct {
	cmd, attr string
	kind      byte
}{
	{"transfer_executable", "TransferExecutable", 'b'}, {"leave_in_queue", "LeaveJobInQueue", 'e'},
	{"stream_output", "StreamOut", 'b'}, {"stream_error", "StreamErr", 'b'},
	{"want_graceful_removal", "WantGracefulRemoval", 'e'}, {"run_as_owner", "RunAsOwner", 'b'},
	{"preserve_relative_paths", "PreserveRelativePaths", 'b'},
	{"periodic_hold", "PeriodicHold", 'e'}, {"periodic_release", "PeriodicRelease", 'e'},
	{"periodic_remove", "PeriodicRemove", 'e'}, {"periodic_vacate", "PeriodicVacate", 'e'},
	{"on_exit_hold", "OnExitHold", 'e'}, {"on_exit_remove", "OnExitRemove", 'e'},
	{"periodic_hold_subcode", "PeriodicHoldSubCode", 'e'}, {"on_exit_hold_subcode", "OnExitHoldSubCode", 'e'},
	{"periodic_hold_reason", "PeriodicHoldReason", 'e'}, {"on_exit_hold_reason", "OnExitHoldReason", 'e'},
	{"priority", "JobPrio", 'i'}, {"max_retries", "JobMaxRetries", 'i'}, {"success_exit_code", "JobSuccessExitCode", 'i'},
	{"job_max_vacate_time", "JobMaxVacateTime", 'e'}, {"job_lease_duration", "JobLeaseDuration", 'e'},
	{"allowed_execute_duration", "AllowedExecuteDuration", 'e'}, {"allowed_job_duration", "AllowedJobDuration", 'e'},
	{"coresize", "CoreSize", 'i'}, {"next_job_start_delay", "NextJobStartDelay", 'e'},
	{"deferral_time", "DeferralTime", 'e'}, {"deferral_window", "DeferralWindow", 'e'},
	{"deferral_prep_time", "DeferralPrepTime", 'e'}, {"retry_until", "RetryUntil", 'e'},
	{"checkpoint_exit_code", "CheckpointExitCode", 'i'},
}

// policy sets the boolean, integer and expression attributes (periodic and
// on-exit policy, priority, retries, ...), checking booleans and integers;
// max_retries without on_exit_remove retries failed runs.
func (b *jobBuilder) policy(j Job) error {
	for _, m := range policyAttrs {
		v, at, ok, err := b.get(m.cmd)
		if err != nil {
			return err
		}
		if !ok || v == "" {
			continue
		}
		switch {
		case m.cmd == "stream_output" && j["Out"] == `"/dev/null"`, m.cmd == "stream_error" && j["Err"] == `"/dev/null"`:
			continue // nothing to stream
		}
		switch m.kind {
		case 'b':
			t, isBool := config.ParseBool(v)
			if !isBool {
				return b.errAt(at, fmt.Sprintf("%s must be true or false, not %q", m.cmd, v), nil)
			}
			if m.cmd == "transfer_executable" && t {
				if b.stf == "NO" {
					return b.errAt(at, "transfer_executable is true, but should_transfer_files is NO", nil)
				}
				continue // the default
			}
			j[m.attr] = strconv.FormatBool(t)
		case 'i':
			if _, err := strconv.Atoi(v); err != nil {
				return b.errAt(at, fmt.Sprintf("%s must be an integer, not %q", m.cmd, v), nil)
			}
			j[m.attr] = v
		default:
			if t, isBool := config.ParseBool(v); isBool && !isNumber(v) {
				v = strconv.FormatBool(t)
			}
			if err := checkExpr(v); err != nil {
				return b.errAt(at, m.cmd, err)
			}
			j[m.attr] = v
		}
	}
	if _, ok := j["DeferralTime"]; ok {
		// As condor_submit: a deferred job's window is 0 s and its
		// preparation time 300 s unless given.
		if _, ok := j["DeferralWindow"]; !ok {
			j["DeferralWindow"] = "0"
		}
		if _, ok := j["DeferralPrepTime"]; !ok {
			j["DeferralPrepTime"] = "300"
		}
	}
	until, hasUntil := j["RetryUntil"]
	if _, ok := j["JobMaxRetries"]; !ok && hasUntil {
		// As condor_submit: retry_until without max_retries retries
		// DEFAULT_JOB_MAX_RETRIES (2) times.
		j["JobMaxRetries"] = "2"
	}
	if _, ok := j["JobMaxRetries"]; ok {
		// As condor_submit: a job leaves the queue once it succeeds or has
		// completed more than max_retries times, or its retry_until (an
		// exit code, or an expression) is true, or when the user's own
		// on_exit_remove says so.
		success := "0"
		if _, ok := j["JobSuccessExitCode"]; ok {
			success = "JobSuccessExitCode"
		}
		remove := "NumJobCompletions > JobMaxRetries || ExitCode is " + success
		if hasUntil {
			if isNumber(until) {
				remove += " || ExitCode is " + until
			} else {
				remove += " || " + until
			}
		}
		if _, _, ok, err := b.get("on_exit_remove"); err != nil {
			return err
		} else if ok && j["OnExitRemove"] != "true" {
			remove += " || " + j["OnExitRemove"]
		}
		j["OnExitRemove"] = remove
	}
	return nil
}

// notificationCodes are JobNotification's values by notification.
var notificationCodes = map[string]string{"never": "0", "always": "1", "complete": "2", "error": "3"}

// notification sets JobNotification.
func (b *jobBuilder) notification(j Job) error {
	v, at, ok, err := b.get("notification")
	if err != nil || !ok || v == "" {
		return err
	}
	n, known := notificationCodes[strings.ToLower(v)]
	if !known {
		return b.errAt(at, fmt.Sprintf("notification must be Never, Always, Complete or Error, not %q", v), nil)
	}
	j["JobNotification"] = n
	return nil
}

// imageSize sets ImageSize, in KiB.
func (b *jobBuilder) imageSize(j Job) error {
	v, _, ok, err := b.get("image_size")
	if err != nil || !ok || v == "" {
		return err
	}
	kb, isNum, err := parseSize(v, "K")
	if err != nil || !isNum {
		return b.errAt(b.at["image_size"], "image_size must be a size like 28000 or 28M", err)
	}
	j["ImageSize"] = strconv.FormatInt(kb, 10)
	return nil
}

// matching sets Rank and Requirements.
func (b *jobBuilder) matching(j Job) error {
	rank := "0.0"
	if v, at, ok, err := b.get("rank"); err != nil {
		return err
	} else if ok && v != "" {
		if err := checkExpr(v); err != nil {
			return b.errAt(at, "rank", err)
		}
		rank = v
	}
	j["Rank"] = rank
	user := ""
	if v, at, ok, err := b.get("requirements"); err != nil {
		return err
	} else if ok {
		if v != "" {
			if err := checkExpr(v); err != nil {
				return b.errAt(at, "requirements", err)
			}
		}
		user = v
	}
	req, err := b.requirements(user, b.stf, j)
	if err != nil {
		return err
	}
	j["Requirements"] = req
	return nil
}

// hold submits the job on hold when asked.
func (b *jobBuilder) hold(j Job) error {
	v, at, ok, err := b.get("hold")
	if err != nil || !ok || v == "" {
		return err
	}
	t, isBool := config.ParseBool(v)
	if !isBool {
		return b.errAt(at, fmt.Sprintf("hold must be true or false, not %q", v), nil)
	}
	if t {
		j["JobStatus"] = "5"
		j["HoldReason"] = `"submitted on hold at user's request"`
		j["HoldReasonCode"] = "15"
	}
	return nil
}

// customAttrs sets the +Name and MY.Name attributes, replacing any
// attribute of the same name in another case.
func (b *jobBuilder) customAttrs(j Job) error {
	for _, c := range b.customs {
		v, err := b.m.expand(c.value)
		if err != nil {
			return b.errAt(c.at, "+"+c.name, err)
		}
		if strings.TrimSpace(v) == "" {
			return b.errAt(c.at, fmt.Sprintf("custom attribute %s has no value", c.name), nil)
		}
		for k := range j {
			if strings.EqualFold(k, c.name) && k != c.name {
				delete(j, k)
			}
		}
		if err := checkExpr(v); err != nil {
			return b.errAt(c.at, "+"+c.name, err)
		}
		j[c.name] = strings.TrimSpace(v)
	}
	return nil
}

// requirements builds the job's Requirements as condor_submit does: the
// user's expression, then the clauses for what the job needs. Arch and
// OpSys are left to the user's expression when it mentions them; Disk and
// Memory clauses are always there; Cpus and GPUs clauses come with a
// request_cpus other than 0 or 1 and a non-zero request_gpus the
// expression does not already mention; the file-system clause depends on the transfer
// mode, and jobs of the local and scheduler universes, which run on the
// submit host, get none.
func (b *jobBuilder) requirements(user, stf string, j Job) (string, error) {
	var parts []string
	if user != "" {
		parts = append(parts, "("+user+")")
	}
	mentions := func(attr string) bool { return mentionsAttr(user, attr) }
	if !mentions("Arch") {
		parts = append(parts, fmt.Sprintf("(TARGET.Arch == %s)", classad.QuoteString(b.opts.Arch)))
	}
	if !mentions("OpSys") {
		parts = append(parts, fmt.Sprintf("(TARGET.OpSys == %s)", classad.QuoteString(b.opts.OpSys)))
	}
	parts = append(parts, "(TARGET.Disk >= RequestDisk)", "(TARGET.Memory >= RequestMemory)")
	if v, _, ok, err := b.get("request_cpus"); err != nil {
		return "", err
	} else if n, err := strconv.Atoi(v); ok && v != "" && !mentions("Cpus") && (err != nil || n > 1) {
		parts = append(parts, "(TARGET.Cpus >= RequestCpus)")
	}
	if v, _, ok, err := b.get("request_gpus"); err != nil {
		return "", err
	} else if ok && v != "" && v != "0" && !mentions("GPUs") {
		parts = append(parts, "(TARGET.GPUs >= RequestGPUs)")
	}
	switch j["JobUniverse"] {
	case strconv.Itoa(UniverseLocal), strconv.Itoa(UniverseScheduler):
		return strings.Join(parts, " && "), nil
	}
	fsd, hft := mentions("FileSystemDomain"), mentions("HasFileTransfer")
	switch {
	case stf == "YES" && !hft:
		parts = append(parts, "(TARGET.HasFileTransfer)")
	case stf == "IF_NEEDED" && fsd && !hft:
		parts = append(parts, "(TARGET.HasFileTransfer)")
	case stf == "IF_NEEDED" && !fsd && !hft:
		parts = append(parts, "((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))")
	case stf == "NO" && !fsd:
		parts = append(parts, "(TARGET.FileSystemDomain == MY.FileSystemDomain)")
	}
	return strings.Join(parts, " && "), nil
}

// mentionsAttr reports whether expr refers to attr as a whole identifier
// (optionally TARGET.-scoped), outside string literals.
func mentionsAttr(expr, attr string) bool {
	inStr := false
	for i := 0; i < len(expr); i++ {
		ch := expr[i]
		if ch == '"' && (i == 0 || expr[i-1] != '\\') {
			inStr = !inStr
			continue
		}
		if inStr || !(isAlnum(ch) || ch == '_') || (i > 0 && (isAlnum(expr[i-1]) || expr[i-1] == '_')) {
			continue
		}
		j := i
		for j < len(expr) && (isAlnum(expr[j]) || expr[j] == '_') {
			j++
		}
		word := expr[i:j]
		if strings.EqualFold(word, attr) && !(i > 3 && strings.EqualFold(expr[i-3:i], "MY.")) {
			return true
		}
		i = j - 1
	}
	return false
}

// resource renders request_cpus/memory/disk: a plain size with optional
// unit (K, M, G, T, with or without B) becomes an integer in the attribute's
// unit (defUnit: "" count, "M" MiB, "K" KiB); anything else is kept as an
// expression.
func (b *jobBuilder) resource(cmd, def, defUnit string) (string, error) {
	v, at, ok, err := b.get(cmd)
	if err != nil {
		return "", err
	}
	if !ok || v == "" {
		return def, nil
	}
	if defUnit == "" {
		if _, err := strconv.Atoi(v); err == nil {
			return v, nil
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return "", b.errAt(at, fmt.Sprintf("%s must be a whole number, not %v", cmd, f), nil)
		}
		return v, nil
	}
	n, isNum, err := parseSize(v, defUnit)
	if err != nil {
		return "", b.errAt(at, cmd, err)
	}
	if !isNum {
		return v, nil
	}
	return strconv.FormatInt(n, 10), nil
}

// parseSize parses "2GB", "512 M", "1.5g", "1024" into units of unit ("K"
// or "M"), rounding up. isNum is false when s is not of that form.
func parseSize(s, unit string) (int64, bool, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, false, nil
	}
	num, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, false, nil
	}
	suffix := strings.ToUpper(strings.TrimSpace(t[i:]))
	suffix = strings.TrimSuffix(suffix, "B")
	if len(suffix) == 2 && suffix[1] == 'I' { // KiB, MiB, ...
		suffix = suffix[:1]
	}
	if suffix == "" {
		suffix = unit
	}
	pow := map[string]int{"K": 1, "M": 2, "G": 3, "T": 4}
	p, ok := pow[suffix]
	if !ok {
		if strings.Trim(suffix, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
			return 0, true, fmt.Errorf("unknown size unit %q in %q (use K, M, G or T)", strings.TrimSpace(t[i:]), s)
		}
		return 0, false, nil
	}
	scale := 1.0
	for d := p - pow[unit]; d > 0; d-- {
		scale *= 1024
	}
	for d := p - pow[unit]; d < 0; d++ {
		scale /= 1024
	}
	v := num * scale
	n := int64(v)
	if float64(n) < v {
		n++
	}
	return n, true, nil
}

// normaliseList joins a file list's comma-separated names with commas;
// a name may hold spaces.
func normaliseList(v string) string {
	var items []string
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	return strings.Join(items, ",")
}

// signals are the names of kill_sig's signal numbers (Linux's).
var signals = [...]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM",
	15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN",
	22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH",
	29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS"}

// signalName returns the name condor_submit gives a signal written as a
// number or a name (SIGKILL, sigkill, 9).
func signalName(v string) (string, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n > 0 && n < len(signals) && signals[n] != "" {
			return signals[n], nil
		}
		return "", fmt.Errorf("invalid signal %s", v)
	}
	u := strings.ToUpper(v)
	for _, s := range signals {
		if s != "" && s == u {
			return s, nil
		}
	}
	return "", fmt.Errorf("invalid signal %s (a name such as SIGTERM, or its number)", v)
}

// normaliseLimits writes concurrency limits as condor_submit does: lower
// case, sorted, comma-separated.
func normaliseLimits(v string) string {
	items := strings.FieldsFunc(strings.ToLower(v), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	sort.Strings(items)
	return strings.Join(items, ",")
}

// checkExpr refuses what is not a ClassAd expression, as condor_submit
// refuses an attribute it cannot parse.
func checkExpr(v string) error {
	if _, err := classad.ParseExpr(v); err != nil {
		return fmt.Errorf("%q is not a ClassAd expression: %w", v, err)
	}
	return nil
}

func isNumber(v string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	return err == nil
}
