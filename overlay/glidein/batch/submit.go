package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// System is what exactly-once submission needs of a batch system: how to
// find the user's jobs by their tag, and how to read the job ID its
// submit command prints. Slurm's is squeue --name and sbatch --parsable;
// Grid Engine's, PBS's and LSF's are qstat or bjobs by job name and what
// qsub or bsub print.
type System interface {
	// FindCmd prints the IDs of the user's jobs tagged tag (queued,
	// running, or ended a short while ago), separated by white space;
	// nothing when there is none.
	FindCmd(tag string) remote.Cmd
	// ParseSubmit reads the job's ID from what the submit command
	// printed.
	ParseSubmit(out []byte) (string, error)
}

// Job is one job to submit exactly once.
type Job struct {
	// Tag is what the batch system finds the job by (its name).
	Tag string
	// Dir is the job's own directory, which holds the submission's lock
	// (LockName).
	Dir string
	// Output is the pattern, in Dir, of the files a job that ran leaves
	// ("slurm-*.out"): a job of that tag ran already, and was forgotten
	// by the batch system.
	Output string
	// Submit is the submit command (sbatch ... SCRIPT).
	Submit remote.Cmd
}

// Run runs a command of the batch system (its environment added) and
// returns its standard output; a failed command's error says what it
// said.
type Run func(ctx context.Context, c remote.Cmd) ([]byte, error)

// LockName is the lock file of a job's submission, in its directory.
const LockName = ".submit.lock"

// ReconcileWait bounds how long a submission whose result was lost tries
// to learn whether the job exists.
const ReconcileWait = 90 * time.Second

// Errors of Submit.
var (
	// ErrRefused: the submit command ran and failed: nothing was
	// queued.
	ErrRefused = errors.New("refused")
	// ErrNotSubmitted: the connection was lost while the submit command
	// ran, and the batch system shows no job of the tag: it was not
	// submitted.
	ErrNotSubmitted = errors.New("not submitted")
)

// submitScript: MODE LOCK FIND OUTPUT [SUBMIT ARGS...], run where the
// batch system's commands run. It holds an flock on LOCK while it runs
// FIND (a command line) and, in MODE submit when FIND prints no job and
// LOCK's directory holds no OUTPUT, the submit command. The lock outlives
// a lost connection: a submission whose result was lost holds it until
// its submit command returned, so that a later one (MODE find, or submit
// again) sees the job that it made. It prints "existing JOBIDS", "ran
// OUTPUT", "none" (find) or "submitted " then what the submit command
// printed.
const submitScript = `mode=$1 lock=$2 find=$3 out=$4; shift 4
command -v flock > /dev/null 2>&1 || { echo "flock (util-linux) is not installed" >&2; exit 73; }
exec 9>> "$lock" || exit 70
flock -w 120 9 || { echo "another submission still holds $lock after 120 s" >&2; exit 71; }
jobs=$(eval "$find") || exit 72
if [ -n "$jobs" ]; then echo existing $jobs; exit 0; fi
if [ "$mode" = find ]; then echo none; exit 0; fi
for o in "${lock%/*}"/$out; do if [ -e "$o" ]; then echo ran "$o"; exit 0; fi; done
printf 'submitted '
exec "$@"
`

// Submit submits job exactly once, through run: under the submission's
// lock, it submits only when the batch system shows no job of the tag
// and the directory no output of one. A job that exists is
// glidein.ErrDuplicate; a submit command that failed ErrRefused. A
// lost connection (remote.ErrLost, or ctx ending) is reconciled by
// asking the batch system, under the same lock, for the tag: never by
// submitting again.
func Submit(ctx context.Context, run Run, sys System, job Job) (string, error) {
	out, err := run(ctx, script("submit", sys, job))
	if err != nil && Lost(ctx, err) {
		return reconcile(ctx, run, sys, job, err)
	}
	word, rest, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil {
		if word == "submitted" {
			return "", fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return "", err
	}
	switch word {
	case "existing":
		return "", fmt.Errorf("%s is job %s: %w", job.Tag, strings.Join(strings.Fields(rest), ", "), glidein.ErrDuplicate)
	case "ran":
		return "", fmt.Errorf("%s ran already (%s): %w", job.Tag, rest, glidein.ErrDuplicate)
	case "submitted":
		return sys.ParseSubmit([]byte(rest))
	}
	return "", fmt.Errorf("the submission said %q", out)
}

// script is submitScript in mode for job.
func script(mode string, sys System, job Job) remote.Cmd {
	args := []string{"-c", submitScript, "sh", mode, filepath.Join(job.Dir, LockName), remote.CommandLine(sys.FindCmd(job.Tag)), job.Output}
	if mode == "submit" {
		args = append(append(args, job.Submit.Path), job.Submit.Args...)
	}
	return remote.Cmd{Path: "/bin/sh", Args: args}
}

// Lost reports whether err is a command whose result is unknown: its
// connection went away, or ctx ended, while it ran.
func Lost(ctx context.Context, err error) bool {
	return errors.Is(err, remote.ErrLost) || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// reconcile learns, after the result of job's submission was lost
// (cause), whether the job exists: it asks the batch system under the
// submission's lock, which a submit command still running holds until it
// returned, until it answers or ReconcileWait passes.
func reconcile(ctx context.Context, run Run, sys System, job Job, cause error) (string, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReconcileWait)
	defer cancel()
	for delay := 250 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		out, err := run(rctx, script("find", sys, job))
		if err == nil {
			word, rest, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
			switch word {
			case "existing":
				// The last submitted, should there be several.
				jobs := strings.Fields(rest)
				slices.SortFunc(jobs, func(a, b string) int {
					x, _ := strconv.ParseUint(a, 10, 64)
					y, _ := strconv.ParseUint(b, 10, 64)
					return cmp.Compare(x, y)
				})
				return jobs[len(jobs)-1], nil
			case "none":
				return "", fmt.Errorf("%w: the connection was lost while it was submitted, and no job is named %s (%w)", ErrNotSubmitted, job.Tag, cause)
			}
			return "", fmt.Errorf("%w; then the submission said %q", cause, out)
		}
		if !Lost(rctx, err) && !errors.Is(err, remote.ErrUnreachable) {
			return "", fmt.Errorf("%w; then, asking for the job: %w", cause, err)
		}
		select {
		case <-rctx.Done():
			return "", fmt.Errorf("%w; it could not be asked again within %v whether the job exists: the next submission of %s finds it by its name: %w",
				cause, ReconcileWait, job.Tag, err)
		case <-time.After(delay):
		}
	}
}
