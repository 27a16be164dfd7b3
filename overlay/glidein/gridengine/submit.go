package gridengine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// ScriptName is the batch script in a glidein's directory; its output
// goes to sge-JOBID.out beside it.
const ScriptName = batch.ScriptName

// outputPattern is the glob of the output files of a glidein's jobs in
// its directory: a job that ran leaves one.
const outputPattern = outputPrefix + "*.out"

// outputPrefix starts the output files of a glidein's jobs in its
// directory (sge-JOBID.out).
const outputPrefix = "sge-"

// Submit starts one glidein: it refuses an ID that qstat already shows or
// whose job left its output, copies the binary (once), writes the
// glidein's directory, files and batch script, and runs qsub exactly
// once (batch.Submit).
func (s *Site) Submit(ctx context.Context, req glidein.Request) (glidein.Glidein, error) {
	if err := s.checkRequest(req); err != nil {
		return glidein.Glidein{}, fmt.Errorf("gridengine site: %w", err)
	}
	if !s.inflight.Lock(req.ID) {
		return glidein.Glidein{}, fmt.Errorf("gridengine site: glidein %s: submitted or cancelled meanwhile: %w", req.ID, glidein.ErrDuplicate)
	}
	defer s.inflight.Unlock(req.ID)

	dir := s.dir(req.ID)
	script, err := batch.Stage(ctx, s.fs, "Grid Engine", req, dir, outputPattern, s.jobsNamed,
		func(bin string) string { return s.script(req, dir, bin) })
	if err != nil {
		return glidein.Glidein{}, fmt.Errorf("gridengine site: %w", err)
	}
	args := append([]string{"-terse"}, s.options(req, dir)...)
	submitted := time.Now()
	jobID, err := batch.Submit(ctx, s.runAs("qsub"), system{&s.cfg}, batch.Job{
		Tag: req.ID, Dir: dir, Output: outputPattern,
		Submit: remote.Cmd{Path: s.cfg.Commands.Qsub, Args: append(args, script)},
	})
	if errors.Is(err, batch.ErrRefused) {
		var ce *cmdError
		if !errors.As(err, &ce) || !unreachable(ce.stderr) {
			// qsub said no: nothing was queued, nothing is left.
			_ = s.fs.RemoveAll(context.WithoutCancel(ctx), dir)
			return glidein.Glidein{}, fmt.Errorf("gridengine site: glidein %s: qsub refused it: %w", req.ID, err)
		}
	}
	if err != nil {
		return glidein.Glidein{}, fmt.Errorf("gridengine site: glidein %s: %w", req.ID, err)
	}
	return glidein.Glidein{ID: req.ID, SiteID: jobID, State: glidein.Queued, Submitted: submitted}, nil
}

// checkRequest says what is wrong with req.
func (s *Site) checkRequest(req glidein.Request) error {
	if err := batch.CheckRequest(req, outputPrefix); err != nil {
		return err
	}
	if req.CPUs > 1 && s.cfg.PE == "" {
		return fmt.Errorf("glidein %s: %d CPUs need the site's parallel_environment to ask their slots of", req.ID, req.CPUs)
	}
	return nil
}

// WriteFiles implements glidein.FileWriter: it replaces files in the
// directory of a glidein that qstat shows queued or running, each
// through a rename, so that a glidein still queued starts with the new
// ones and a running one reads them again.
func (s *Site) WriteFiles(ctx context.Context, id string, files map[string][]byte) error {
	if err := batch.CheckID(id); err != nil {
		return fmt.Errorf("gridengine site: write files: %w", err)
	}
	if err := batch.CheckFiles(id, files, outputPrefix); err != nil {
		return fmt.Errorf("gridengine site: write files: %w", err)
	}
	if !s.inflight.Lock(id) {
		return fmt.Errorf("gridengine site: write files: glidein %s is being submitted or cancelled", id)
	}
	defer s.inflight.Unlock(id)
	jobs, err := s.jobsNamed(ctx, id)
	if err != nil {
		return fmt.Errorf("gridengine site: write files of %s: %w", id, err)
	}
	if len(jobs) == 0 {
		return fmt.Errorf("gridengine site: write files: glidein %s is not queued or running", id)
	}
	if err := s.fs.ReplaceFiles(ctx, s.dir(id), files); err != nil {
		if errors.Is(err, batch.ErrNoDir) {
			return fmt.Errorf("gridengine site: write files: glidein %s is not queued or running", id)
		}
		return fmt.Errorf("gridengine site: write files of %s: %w", id, err)
	}
	return nil
}

// options are qsub's options for req: everything the site sets itself is
// on the command line, where it wins over the script's #$ lines.
func (s *Site) options(req glidein.Request, dir string) []string {
	opts := []string{
		"-N", req.ID,
		// $JOB_ID is qsub's, not a shell's: it is passed as it is.
		"-o", filepath.Join(dir, "sge-$JOB_ID.out"), "-j", "y",
		"-wd", dir,
		"-S", "/bin/sh",
		// Never run twice: not again after its host failed.
		"-r", "n",
	}
	cpus := batch.Or(req.CPUs, s.cfg.CPUs)
	if cpus > 1 {
		opts = append(opts, "-pe", s.cfg.PE, strconv.Itoa(cpus))
	}
	if limit := batch.Limit(req.Lifetime, s.cfg.Walltime); limit > 0 {
		opts = append(opts, "-l", "h_rt="+strconv.Itoa(seconds(limit)))
	}
	if mem := batch.Or(req.MemoryMB, s.cfg.MemoryMB); mem > 0 {
		// Grid Engine's memory resources count per slot.
		slots := max(cpus, 1)
		opts = append(opts, "-l", fmt.Sprintf("%s=%dM", s.cfg.MemoryResource, (mem+slots-1)/slots))
	}
	if s.cfg.Queue != "" {
		opts = append(opts, "-q", s.cfg.Queue)
	}
	if s.cfg.Project != "" {
		opts = append(opts, "-P", s.cfg.Project)
	}
	return opts
}

// seconds is d in whole seconds, rounded up.
func seconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// script is the batch script of a glidein: the extra #$ lines, the
// environment, then the binary with its arguments.
func (s *Site) script(req glidein.Request, dir, bin string) string {
	return batch.Script(req, dir, bin, s.cfg.Extra, seconds(batch.Limit(req.Lifetime, s.cfg.Walltime)))
}

// system is Grid Engine as batch.Submit needs it: qstat -j finds the
// user's jobs by name, qsub -terse prints the job's ID.
type system struct{ cfg *Config }

var _ batch.System = system{}

// findScript: QSTAT NAME. It prints the IDs of the jobs named NAME that
// the user owns (qstat -j shows everyone's), nothing when there is none;
// it fails when qstat fails otherwise.
const findScript = `out=$("$1" -j "$2" 2>&1); rc=$?
if [ $rc -ne 0 ]; then
	case $out in *"do not exist"*) exit 0;; esac
	printf '%s\n' "$out" >&2; exit $rc
fi
me=$(id -un) || exit 1
printf '%s\n' "$out" | awk -v me="$me" '$1 == "job_number:" { id = $2 } $1 == "owner:" && $2 == me { print id }'
`

// FindCmd implements batch.System.
func (y system) FindCmd(tag string) remote.Cmd {
	return remote.Cmd{Path: "/bin/sh", Args: []string{"-c", findScript, "sh", y.cfg.Commands.Qstat, tag}}
}

// ParseSubmit implements batch.System.
func (system) ParseSubmit(out []byte) (string, error) { return parseJobID(out) }

// jobsNamed is the IDs of the user's jobs qstat shows named id.
func (s *Site) jobsNamed(ctx context.Context, id string) ([]string, error) {
	c := system{&s.cfg}.FindCmd(id)
	out, err := s.run(ctx, "qstat", c.Path, c.Args...)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}
