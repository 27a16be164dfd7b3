package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
)

// List reports the glideins whose ID starts with prefix: those squeue
// shows (queued, running, ended a short while ago), then those sacct still
// remembers. Of several jobs with one ID, the one not ended, or else the
// last submitted, is reported.
func (s *Site) List(ctx context.Context, prefix string) ([]glidein.Glidein, error) {
	out, err := s.run(ctx, "squeue", s.cfg.Commands.Squeue, "--noheader", "--me", "--states=all", "--format="+squeueFormat)
	if err != nil {
		return nil, fmt.Errorf("slurm site: listing glideins: %w", err)
	}
	byID := batch.Latest{}
	queue := parseSqueue(string(out))
	history, err := s.history(ctx)
	if err != nil {
		return nil, fmt.Errorf("slurm site: listing ended glideins: %w", err)
	}
	// squeue tells that a job failed, not its exit code: sacct does, which
	// says whether the glidein failed its validation.
	var failed []string
	for _, j := range queue {
		if _, ok := glideinOf(j, prefix); ok && j.exit == "" {
			if st, _ := stateOf(j.state); st == glidein.Failed {
				failed = append(failed, j.id)
			}
		}
	}
	exits := s.exits(ctx, failed)
	for _, j := range queue {
		if e, ok := exits[j.id]; ok {
			j.exit = e.exit
			if j.reason == "" || j.reason == "None" {
				j.reason = e.reason
			}
		}
		if g, ok := glideinOf(s.withDetail(ctx, j), prefix); ok {
			byID.Add(g)
		}
	}
	for _, j := range history {
		g, ok := glideinOf(s.withDetail(ctx, j), prefix)
		if !ok {
			continue
		}
		// squeue knows better about a job it still shows.
		if old, ok := byID[g.ID]; ok && old.SiteID == g.SiteID {
			continue
		}
		byID.Add(g)
	}
	return byID.Sorted(), nil
}

// history is the ended jobs sacct remembers: from accounting storage, or
// on a cluster without it, from the job completion log. A cluster that has
// neither, or whose completion log this machine cannot read, has no
// history: List then reports what squeue shows.
func (s *Site) history(ctx context.Context) ([]job, error) {
	since := time.Now().Add(-s.cfg.History).Format("2006-01-02T15:04:05")
	uid, _, err := s.fs.User(ctx)
	if err != nil {
		return nil, err
	}
	args := []string{"--noheader", "--parsable2", "--delimiter=" + sep, "--allocations",
		"--user=" + uid, "--starttime=" + since, "--endtime=now", "--format=" + sacctFields}
	s.mu.Lock()
	mode := s.histMode
	s.mu.Unlock()
	if mode != historyCompletion {
		out, err := s.run(ctx, "sacct", s.cfg.Commands.Sacct, args...)
		if err == nil {
			s.setHistory(historyAccounting)
			return parseSacct(string(out)), nil
		}
		var ce *cmdError
		if !errors.As(err, &ce) || !ce.said("accounting storage is disabled") {
			return nil, err
		}
		s.setHistory(historyCompletion)
	}
	out, err := s.run(ctx, "sacct", s.cfg.Commands.Sacct, append([]string{"--completion"}, args...)...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, nil
	}
	return parseSacct(string(out)), nil
}

// exits asks sacct how the jobs ids ended (sacct -j): their exit codes,
// by job id. It is best effort: a cluster whose sacct cannot say gives
// none, and the glideins keep squeue's reason.
func (s *Site) exits(ctx context.Context, ids []string) map[string]job {
	if len(ids) == 0 {
		return nil
	}
	args := []string{"--noheader", "--parsable2", "--delimiter=" + sep, "--allocations",
		"--jobs=" + strings.Join(ids, ","), "--format=" + exitFields}
	s.mu.Lock()
	mode := s.histMode
	s.mu.Unlock()
	if mode == historyCompletion {
		args = append([]string{"--completion"}, args...)
	}
	out, err := s.run(ctx, "sacct", s.cfg.Commands.Sacct, args...)
	if err != nil {
		return nil
	}
	return parseSacctExits(string(out))
}

// withDetail is j with, when it is a glidein that exited with
// glidein.ExitValidation, the message of its status file in its directory
// (validation failed: check NAME: WHY), which says why.
func (s *Site) withDetail(ctx context.Context, j job) job {
	code, _, _ := strings.Cut(j.exit, ":")
	if code != strconv.Itoa(glidein.ExitValidation) {
		return j
	}
	id := j.name
	if batch.CheckID(id) != nil {
		id = j.comment
	}
	if batch.CheckID(id) != nil {
		return j
	}
	for _, name := range statusFiles {
		st, err := s.readStatus(ctx, filepath.Join(s.dir(id), name))
		if err != nil || st.ID != id || st.Reason != glidein.ReasonValidation {
			continue
		}
		if why := glidein.SafeMessage(st.Message); why != "" {
			j.detail = why
			break
		}
	}
	return j
}

// maxStatusFile is the most bytes of a glidein's status file the site
// reads: a larger one tells nothing.
const maxStatusFile = 64 << 10

// readStatus reads a glidein's status file, which the glidein (and what
// it ran) wrote on a compute node: at most maxStatusFile bytes of a
// regular file.
func (s *Site) readStatus(ctx context.Context, path string) (*api.GlideinStatus, error) {
	data, err := s.fs.ReadFile(ctx, path, maxStatusFile)
	if err != nil {
		return nil, err
	}
	if len(data) > maxStatusFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxStatusFile)
	}
	var st api.GlideinStatus
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}

// statusFiles are where, in its directory, a glidein's status file may
// be: in the directory itself (the glidein provider's glideins, whose
// data directory it is) or in its data subdirectory (a pilot factory's).
var statusFiles = []string{glidein.StatusFile, filepath.Join("data", glidein.StatusFile)}

func (s *Site) setHistory(m historyMode) {
	s.mu.Lock()
	s.histMode = m
	s.mu.Unlock()
}

// jobsNamed is the IDs of the jobs squeue shows named id.
func (s *Site) jobsNamed(ctx context.Context, id string) ([]string, error) {
	out, err := s.run(ctx, "squeue", s.cfg.Commands.Squeue, "--noheader", "--me", "--states=all", "--name="+id, "--format=%i")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// Cancel ends the glidein's jobs (scancel by name, and by job id for a job
// renamed since) and removes its directory.
func (s *Site) Cancel(ctx context.Context, id string) error {
	if err := batch.CheckID(id); err != nil {
		return fmt.Errorf("slurm site: cancel: %w", err)
	}
	// A Submit of this ID under way: cancel what it submits.
	if err := s.inflight.LockWait(ctx, id); err != nil {
		return fmt.Errorf("slurm site: cancel %s: %w", id, err)
	}
	defer s.inflight.Unlock(id)
	if _, err := s.run(ctx, "scancel", s.cfg.Commands.Scancel, "--me", "--name="+id); err != nil {
		return fmt.Errorf("slurm site: cancel %s: %w", id, err)
	}
	// A job whose comment still says id though it was renamed.
	out, err := s.run(ctx, "squeue", s.cfg.Commands.Squeue, "--noheader", "--me", "--format="+squeueFormat)
	if err != nil {
		return fmt.Errorf("slurm site: cancel %s: %w", id, err)
	}
	for _, j := range parseSqueue(string(out)) {
		if j.comment != id || j.name == id {
			continue
		}
		if st, _ := stateOf(j.state); st.Ended() {
			continue
		}
		if _, err := s.run(ctx, "scancel", s.cfg.Commands.Scancel, j.id); err != nil {
			var ce *cmdError
			if errors.As(err, &ce) && (ce.said("already completing or completed") || ce.said("Invalid job id")) {
				continue
			}
			return fmt.Errorf("slurm site: cancel %s: %w", id, err)
		}
	}
	// Remove its directory once Slurm no longer runs the job, COMPLETING
	// included, or after cancelWait.
	live := func(ctx context.Context) (bool, error) { return s.stillRunning(ctx, id) }
	if err := batch.RemoveDir(ctx, s.fs, s.dir(id), live, cancelWait, 100*time.Millisecond); err != nil {
		return fmt.Errorf("slurm site: cancel %s: %w", id, err)
	}
	return nil
}

// cancelWait bounds how long Cancel waits for Slurm to end a cancelled
// glidein's job (its processes killed, KillWait) before it removes the
// glidein's directory anyway.
const cancelWait = 45 * time.Second

// stillRunning reports whether a job named id is queued, running or
// completing: its processes may still write into its directory.
func (s *Site) stillRunning(ctx context.Context, id string) (bool, error) {
	out, err := s.run(ctx, "squeue", s.cfg.Commands.Squeue, "--noheader", "--me", "--name="+id, "--format=%T")
	if err != nil {
		return false, err
	}
	for _, st := range strings.Fields(string(out)) {
		if g, known := stateOf(st); st == "COMPLETING" || !known || !g.Ended() {
			return true, nil
		}
	}
	return false, nil
}
