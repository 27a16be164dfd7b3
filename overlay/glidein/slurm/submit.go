package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// ScriptName is the batch script in a glidein's directory; its output goes
// to slurm-JOBID.out beside it.
const ScriptName = "glidein.sh"

// Submit starts one glidein: it refuses an ID that squeue already shows,
// copies the binary (once), writes the glidein's directory and files and
// its batch script, and runs sbatch.
func (s *Site) Submit(ctx context.Context, req glidein.Request) (glidein.Glidein, error) {
	if err := s.checkRequest(req); err != nil {
		return glidein.Glidein{}, fmt.Errorf("slurm site: %w", err)
	}
	if !s.lock(req.ID) {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: submitted or cancelled meanwhile: %w", req.ID, glidein.ErrDuplicate)
	}
	defer s.unlock(req.ID)

	jobs, err := s.jobsNamed(ctx, req.ID)
	if err != nil {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: looking for it before submitting: %w", req.ID, err)
	}
	if len(jobs) > 0 {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s is Slurm job %s: %w", req.ID, strings.Join(jobs, ", "), glidein.ErrDuplicate)
	}
	// A job that ran under this ID, ended and was forgotten by squeue left
	// its output in the directory, which Cancel has not removed yet.
	out, err := s.fs.RanAlready(ctx, s.dir(req.ID), "slurm-*.out")
	if err != nil {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: %w", req.ID, err)
	}
	if out != "" {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s ran already (%s): %w", req.ID, out, glidein.ErrDuplicate)
	}

	bin, err := s.fs.InstallBinary(ctx, req.Binary)
	if err != nil {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: %w", req.ID, err)
	}
	dir := s.dir(req.ID)
	if err := s.fs.WriteDir(ctx, dir, req.Files); err != nil {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: %w", req.ID, err)
	}
	script := filepath.Join(dir, ScriptName)
	if err := s.fs.WriteFile(ctx, script, []byte(s.script(req, dir, bin))); err != nil {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: %w", req.ID, err)
	}
	args := append([]string{"--parsable"}, s.options(req, dir)...)
	args = append(args, script)
	submitted := time.Now()
	var jobID string
	if s.remoteLogin() {
		// On a login node, exactly once across a lost connection.
		jobID, err = batch.Submit(ctx, s.runAs("sbatch"), system{&s.cfg}, batch.Job{
			Tag: req.ID, Dir: dir, Output: "slurm-*.out",
			Submit: remote.Cmd{Path: s.cfg.Commands.Sbatch, Args: args},
		})
		if errors.Is(err, batch.ErrRefused) {
			var ce *cmdError
			if !errors.As(err, &ce) || ce.unreachable == "" {
				// sbatch said no: nothing was queued, nothing is left.
				_ = s.fs.RemoveAll(ctx, dir)
				return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: sbatch refused it: %w", req.ID, err)
			}
		}
		if err != nil {
			return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: %w", req.ID, err)
		}
	} else {
		out, err := s.run(ctx, "sbatch", s.cfg.Commands.Sbatch, args...)
		if err != nil {
			var ce *cmdError
			if errors.As(err, &ce) && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
				// sbatch said no: nothing was queued, nothing is left.
				os.RemoveAll(dir)
			}
			if ce != nil && ce.unreachable != "" {
				return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: %w", req.ID, err)
			}
			return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: sbatch refused it: %w", req.ID, err)
		}
		jobID, err = parseJobID(out)
		if err != nil {
			return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: %w", req.ID, err)
		}
	}
	return glidein.Glidein{ID: req.ID, SiteID: jobID, State: glidein.Queued, Submitted: submitted}, nil
}

// parseJobID reads what sbatch --parsable says: JOBID[;CLUSTER].
func parseJobID(out []byte) (string, error) {
	jobID, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.ParseUint(jobID, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch --parsable said %q, not a job id", out)
	}
	return jobID, nil
}

// checkRequest says what is wrong with req.
func (s *Site) checkRequest(req glidein.Request) error {
	if err := checkID(req.ID); err != nil {
		return err
	}
	if req.Binary == "" {
		return fmt.Errorf("glidein %s: no binary", req.ID)
	}
	if req.Lifetime < 0 || req.CPUs < 0 || req.MemoryMB < 0 {
		return fmt.Errorf("glidein %s: lifetime, cpus and memory may not be negative", req.ID)
	}
	for k := range req.Env {
		if !envRE.MatchString(k) {
			return fmt.Errorf("glidein %s: env %q is not a variable name", req.ID, k)
		}
	}
	for _, a := range req.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("glidein %s: argument %q holds NUL", req.ID, a)
		}
	}
	return checkFiles(req.ID, req.Files)
}

// checkFiles says what is wrong with the names of a glidein's files.
func checkFiles(id string, files map[string][]byte) error {
	for name := range files {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") ||
			name == ScriptName || strings.HasPrefix(name, "slurm-") || strings.HasPrefix(name, ".") {
			return fmt.Errorf("glidein %s: file %q: a plain name other than %s, slurm-* and .*", id, name, ScriptName)
		}
	}
	return nil
}

var _ glidein.FileWriter = (*Site)(nil)

// WriteFiles implements glidein.FileWriter: it replaces files in the
// directory of a glidein that squeue shows queued or running (in the
// work directory this machine and the nodes share), each through a
// rename, so that a glidein still queued starts with the new ones and a
// running one reads them again: a pilot factory renews a glidein's
// credentials this way, also while it waits in the queue.
func (s *Site) WriteFiles(ctx context.Context, id string, files map[string][]byte) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("slurm site: write files: %w", err)
	}
	if err := checkFiles(id, files); err != nil {
		return fmt.Errorf("slurm site: write files: %w", err)
	}
	if !s.lock(id) {
		return fmt.Errorf("slurm site: write files: glidein %s is being submitted or cancelled", id)
	}
	defer s.unlock(id)
	live, err := s.stillRunning(ctx, id)
	if err != nil {
		return fmt.Errorf("slurm site: write files of %s: %w", id, err)
	}
	if !live {
		return fmt.Errorf("slurm site: write files: glidein %s is not queued or running", id)
	}
	if err := s.fs.ReplaceFiles(ctx, s.dir(id), files); err != nil {
		if errors.Is(err, batch.ErrNoDir) {
			return fmt.Errorf("slurm site: write files: glidein %s is not queued or running", id)
		}
		return fmt.Errorf("slurm site: write files of %s: %w", id, err)
	}
	return nil
}

// dir is the glidein's directory.
func (s *Site) dir(id string) string { return filepath.Join(s.cfg.WorkDir, id) }

// options are sbatch's options for req: everything the site sets itself is
// on the command line, where it wins over the script's #SBATCH lines.
func (s *Site) options(req glidein.Request, dir string) []string {
	opts := []string{
		"--job-name=" + req.ID,
		"--comment=" + req.ID,
		"--chdir=" + dir,
		"--output=" + filepath.Join(dir, "slurm-%j.out"),
		// Not this process's environment: it may hold credentials.
		"--export=NONE",
		"--nodes=1",
		"--ntasks=1",
	}
	if cpus := cmpOr(req.CPUs, s.cfg.CPUs); cpus > 0 {
		opts = append(opts, "--cpus-per-task="+strconv.Itoa(cpus))
	}
	if mem := cmpOr(req.MemoryMB, s.cfg.MemoryMB); mem > 0 {
		opts = append(opts, "--mem="+strconv.Itoa(mem))
	}
	if limit := s.timeLimit(req); limit > 0 {
		opts = append(opts, "--time="+strconv.Itoa(minutes(limit)))
	}
	for _, o := range []struct{ name, v string }{
		{"--partition", s.cfg.Partition}, {"--account", s.cfg.Account}, {"--qos", s.cfg.QOS}, {"--constraint", s.cfg.Constraint},
	} {
		if o.v != "" {
			opts = append(opts, o.name+"="+o.v)
		}
	}
	return opts
}

func (s *Site) timeLimit(req glidein.Request) time.Duration {
	if req.Lifetime > 0 && s.cfg.TimeLimit > 0 {
		return min(req.Lifetime, s.cfg.TimeLimit)
	}
	return cmpOr(req.Lifetime, s.cfg.TimeLimit)
}

// minutes is d in whole minutes, rounded up, as Slurm's --time counts.
func minutes(d time.Duration) int { return int((d + time.Minute - 1) / time.Minute) }

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// script is the batch script of a glidein: the extra #SBATCH lines, the
// environment, then the binary with its arguments.
func (s *Site) script(req glidein.Request, dir, bin string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, l := range s.cfg.Extra {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "# pond glidein %s, written by pondctl.\n", req.ID)
	b.WriteString("PATH=/usr/local/bin:/usr/bin:/bin; export PATH\n")
	env := map[string]string{
		"POND_GLIDEIN_ID":  req.ID,
		"POND_GLIDEIN_DIR": dir,
	}
	for k, v := range req.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s; export %s\n", k, shellQuote(env[k]), k)
	}
	if limit := s.timeLimit(req); limit > 0 {
		// When the batch system ends the job: the job started just now.
		fmt.Fprintf(&b, "%[1]s=$(( $(date +%%s) + %[2]d )); export %[1]s\n", glidein.EndEnv, minutes(limit)*60)
	}
	fmt.Fprintf(&b, "cd %s || exit 1\n", shellQuote(dir))
	b.WriteString("exec " + shellQuote(bin))
	for _, a := range req.Args {
		b.WriteString(" " + shellQuote(strings.ReplaceAll(a, "{dir}", dir)))
	}
	b.WriteString("\n")
	return b.String()
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
