package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// ScriptName is the batch script in a glidein's directory; its output goes
// to slurm-JOBID.out beside it.
const ScriptName = batch.ScriptName

// Submit starts one glidein: it refuses an ID that squeue already shows,
// copies the binary (once), writes the glidein's directory and files and
// its batch script, and runs sbatch.
func (s *Site) Submit(ctx context.Context, req glidein.Request) (glidein.Glidein, error) {
	if err := s.checkRequest(req); err != nil {
		return glidein.Glidein{}, fmt.Errorf("slurm site: %w", err)
	}
	if !s.inflight.Lock(req.ID) {
		return glidein.Glidein{}, fmt.Errorf("slurm site: glidein %s: submitted or cancelled meanwhile: %w", req.ID, glidein.ErrDuplicate)
	}
	defer s.inflight.Unlock(req.ID)

	dir := s.dir(req.ID)
	script, err := batch.Stage(ctx, s.fs, "Slurm", req, dir, outputPattern, s.jobsNamed,
		func(bin string) string { return s.script(req, dir, bin) })
	if err != nil {
		return glidein.Glidein{}, fmt.Errorf("slurm site: %w", err)
	}
	args := append([]string{"--parsable"}, s.options(req, dir)...)
	args = append(args, script)
	submitted := time.Now()
	var jobID string
	if s.remoteLogin() {
		// On a login node, exactly once across a lost connection.
		jobID, err = batch.Submit(ctx, s.runAs("sbatch"), system{&s.cfg}, batch.Job{
			Tag: req.ID, Dir: dir, Output: outputPattern,
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
	return batch.CheckRequest(req, outputPrefix)
}

// outputPrefix starts the output files of a glidein's jobs in its
// directory (slurm-JOBID.out).
const outputPrefix = "slurm-"

// outputPattern is the glob of the output files of a glidein's jobs in
// its directory: a job that ran leaves one.
const outputPattern = outputPrefix + "*.out"

var _ glidein.FileWriter = (*Site)(nil)

// WriteFiles implements glidein.FileWriter: it replaces files in the
// directory of a glidein that squeue shows queued or running (in the
// work directory this machine and the nodes share), each through a
// rename, so that a glidein still queued starts with the new ones and a
// running one reads them again: a pilot factory renews a glidein's
// credentials this way, also while it waits in the queue.
func (s *Site) WriteFiles(ctx context.Context, id string, files map[string][]byte) error {
	if err := batch.CheckID(id); err != nil {
		return fmt.Errorf("slurm site: write files: %w", err)
	}
	if err := batch.CheckFiles(id, files, outputPrefix); err != nil {
		return fmt.Errorf("slurm site: write files: %w", err)
	}
	if !s.inflight.Lock(id) {
		return fmt.Errorf("slurm site: write files: glidein %s is being submitted or cancelled", id)
	}
	defer s.inflight.Unlock(id)
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
	if cpus := batch.Or(req.CPUs, s.cfg.CPUs); cpus > 0 {
		opts = append(opts, "--cpus-per-task="+strconv.Itoa(cpus))
	}
	if mem := batch.Or(req.MemoryMB, s.cfg.MemoryMB); mem > 0 {
		opts = append(opts, "--mem="+strconv.Itoa(mem))
	}
	if limit := batch.Limit(req.Lifetime, s.cfg.TimeLimit); limit > 0 {
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

// minutes is d in whole minutes, rounded up, as Slurm's --time counts.
func minutes(d time.Duration) int { return int((d + time.Minute - 1) / time.Minute) }

// script is the batch script of a glidein: the extra #SBATCH lines, the
// environment, then the binary with its arguments.
func (s *Site) script(req glidein.Request, dir, bin string) string {
	return batch.Script(req, dir, bin, s.cfg.Extra, minutes(batch.Limit(req.Lifetime, s.cfg.TimeLimit))*60)
}
