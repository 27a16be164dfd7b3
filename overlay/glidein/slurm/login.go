package slurm

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

// submitScript: MODE LOCK ID SQUEUE [SBATCH ARGS...], run on the login
// node. It holds an flock on LOCK (in the glidein's directory) while it
// asks squeue for a job named ID and, in MODE submit when there is none
// and the directory holds no output of an earlier job, runs sbatch. The
// lock outlives a lost connection: a submission whose result was lost
// holds it until its sbatch returned, so that a later one (MODE find,
// or submit again) sees the job that sbatch made. It prints "existing
// JOBIDS", "ran OUTPUT", "none" (find) or "submitted " then what sbatch
// printed.
const submitScript = `mode=$1 lock=$2 id=$3 squeue=$4; shift 4
command -v flock > /dev/null 2>&1 || { echo "flock (util-linux) is not installed on the login node" >&2; exit 73; }
exec 9>> "$lock" || exit 70
flock -w 120 9 || { echo "another submission of $id still holds $lock after 120 s" >&2; exit 71; }
jobs=$("$squeue" --noheader --me --states=all --name="$id" --format=%i) || exit 72
if [ -n "$jobs" ]; then echo existing $jobs; exit 0; fi
if [ "$mode" = find ]; then echo none; exit 0; fi
for o in "${lock%/*}"/slurm-*.out; do if [ -e "$o" ]; then echo ran "$o"; exit 0; fi; done
printf 'submitted '
exec "$@"
`

// lockName is the lock file of a glidein's submission, in its directory.
const lockName = ".submit.lock"

// reconcileWait bounds how long a Submit whose sbatch result was lost
// tries to learn from the login node whether the job exists.
const reconcileWait = 90 * time.Second

// submitRemote runs sbatch with args on the login node for the glidein
// id whose directory is dir (submitScript), and returns the job's ID. A
// lost connection is reconciled by asking squeue, under the same lock,
// for a job named id: never by running sbatch again.
func (s *Site) submitRemote(ctx context.Context, id, dir string, args []string) (string, error) {
	out, err := s.submitCmd(ctx, "submit", id, dir, append([]string{s.cfg.Commands.Sbatch}, args...)...)
	if err != nil && lost(ctx, err) {
		return s.reconcile(ctx, id, dir, err)
	}
	word, rest, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil {
		var ce *cmdError
		if word == "submitted" && errors.As(err, &ce) && ce.unreachable == "" {
			// sbatch said no: nothing was queued, nothing is left.
			_ = s.fs.removeAll(ctx, dir)
			return "", fmt.Errorf("slurm site: glidein %s: sbatch refused it: %w", id, err)
		}
		return "", fmt.Errorf("slurm site: glidein %s: %w", id, err)
	}
	switch word {
	case "existing":
		return "", fmt.Errorf("slurm site: glidein %s is Slurm job %s: %w", id, strings.Join(strings.Fields(rest), ", "), glidein.ErrDuplicate)
	case "ran":
		return "", fmt.Errorf("slurm site: glidein %s ran already (%s): %w", id, rest, glidein.ErrDuplicate)
	case "submitted":
		jobID, err := parseJobID([]byte(rest))
		if err != nil {
			return "", fmt.Errorf("slurm site: glidein %s: %w", id, err)
		}
		return jobID, nil
	}
	return "", fmt.Errorf("slurm site: glidein %s: the login node said %q", id, out)
}

// submitCmd runs submitScript in mode for the glidein id.
func (s *Site) submitCmd(ctx context.Context, mode, id, dir string, sbatch ...string) ([]byte, error) {
	args := append([]string{"-c", submitScript, "sh", mode, filepath.Join(dir, lockName), id, s.cfg.Commands.Squeue}, sbatch...)
	return s.run(ctx, "sbatch", "/bin/sh", args...)
}

// reconcile learns, after the result of sbatch for the glidein id was
// lost (cause), whether the job exists: it asks squeue under the
// submission's lock, which an sbatch still running on the login node
// holds until it returned, until the login node answers or reconcileWait
// passes. It returns the job's ID, or an error saying that nothing was
// submitted, or that it could not tell (the next Submit of id tells:
// it finds the job by its name).
func (s *Site) reconcile(ctx context.Context, id, dir string, cause error) (string, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reconcileWait)
	defer cancel()
	for delay := 250 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		out, err := s.submitCmd(rctx, "find", id, dir)
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
				return "", fmt.Errorf("slurm site: glidein %s: not submitted: the connection was lost while sbatch ran, and squeue shows no job of that name (%w)", id, cause)
			}
			return "", fmt.Errorf("slurm site: glidein %s: %w; then the login node said %q", id, cause, out)
		}
		if !lost(rctx, err) && !errors.Is(err, remote.ErrUnreachable) {
			return "", fmt.Errorf("slurm site: glidein %s: %w; then, asking squeue for it: %w", id, cause, err)
		}
		select {
		case <-rctx.Done():
			return "", fmt.Errorf("slurm site: glidein %s: %w; the login node could not be asked again within %v whether the job exists: the next submission of %s finds it by its name: %w",
				id, cause, reconcileWait, id, err)
		case <-time.After(delay):
		}
	}
}
