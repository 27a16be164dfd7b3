package gridengine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
)

// List reports the glideins whose ID starts with prefix: those qstat
// shows (queued, running, and ended a short while ago), then those qacct
// still remembers. Of several jobs with one ID, the one not ended, or
// else the last submitted, is reported.
func (s *Site) List(ctx context.Context, prefix string) ([]glidein.Glidein, error) {
	_, who, err := s.fs.User(ctx)
	if err != nil {
		return nil, fmt.Errorf("gridengine site: listing glideins: %w", err)
	}
	out, err := s.run(ctx, "qstat", s.cfg.Commands.Qstat, "-xml", "-u", who, "-s", "prsz")
	if err != nil {
		return nil, fmt.Errorf("gridengine site: listing glideins: %w", err)
	}
	queue, err := parseQstat(out)
	if err != nil {
		return nil, fmt.Errorf("gridengine site: listing glideins: %w", err)
	}
	history, err := s.history(ctx, who, prefix)
	if err != nil {
		return nil, fmt.Errorf("gridengine site: listing ended glideins: %w", err)
	}
	byID := batch.Latest{}
	// qacct knows how a job ended, which qstat's zombie does not.
	acct := map[string]job{}
	for _, j := range history {
		acct[j.id] = j
	}
	seen := map[string]bool{}
	for _, j := range queue {
		if a, ok := acct[j.id]; ok && !live(j) {
			j = a
		}
		seen[j.id] = true
		if g, ok := glideinOf(j, prefix); ok {
			byID.Add(g)
		}
	}
	for _, j := range history {
		if seen[j.id] {
			continue
		}
		if g, ok := glideinOf(j, prefix); ok {
			byID.Add(g)
		}
	}
	return byID.Sorted(), nil
}

// history is the ended jobs of user, named prefix*, that qacct remembers
// from the last History. A cluster whose accounting file this machine (or
// the login node) cannot read has none: List then reports what qstat
// shows.
func (s *Site) history(ctx context.Context, user, prefix string) ([]job, error) {
	days := int((s.cfg.History + 24*time.Hour - 1) / (24 * time.Hour))
	out, err := s.run(ctx, "qacct", s.cfg.Commands.Qacct, "-o", user, "-d", strconv.Itoa(days), "-j", prefix+"*")
	if err != nil {
		var ce *cmdError
		if ctx.Err() != nil || !errors.As(err, &ce) {
			return nil, err
		}
		// "job name pond-* not found": none; anything else (no
		// accounting file): no history.
		return nil, nil
	}
	jobs, err := parseQacct(out)
	if err != nil {
		return nil, err
	}
	// qacct -o matches the owner; keep to it should it not.
	kept := jobs[:0]
	for _, j := range jobs {
		if j.owner == "" || j.owner == user {
			kept = append(kept, j)
		}
	}
	return kept, nil
}

// Cancel ends the glidein's jobs (qdel by name) and removes its directory
// once Grid Engine no longer runs them.
func (s *Site) Cancel(ctx context.Context, id string) error {
	if err := batch.CheckID(id); err != nil {
		return fmt.Errorf("gridengine site: cancel: %w", err)
	}
	// A Submit of this ID under way: cancel what it submits.
	if err := s.inflight.LockWait(ctx, id); err != nil {
		return fmt.Errorf("gridengine site: cancel %s: %w", id, err)
	}
	defer s.inflight.Unlock(id)
	jobs, err := s.jobsNamed(ctx, id)
	if err != nil {
		return fmt.Errorf("gridengine site: cancel %s: %w", id, err)
	}
	if len(jobs) > 0 {
		// By ID, the user's own: qdel by name would reach another user's
		// job of the same name for a manager.
		if _, err := s.run(ctx, "qdel", s.cfg.Commands.Qdel, jobs...); err != nil {
			var ce *cmdError
			if !errors.As(err, &ce) || !ce.said("does not exist") {
				return fmt.Errorf("gridengine site: cancel %s: %w", id, err)
			}
		}
	}
	// Remove its directory once qstat no longer shows the job, or after
	// cancelWait.
	live := func(ctx context.Context) (bool, error) {
		jobs, err := s.jobsNamed(ctx, id)
		return len(jobs) > 0, err
	}
	if err := batch.RemoveDir(ctx, s.fs, s.dir(id), live, cancelWait, 200*time.Millisecond); err != nil {
		return fmt.Errorf("gridengine site: cancel %s: %w", id, err)
	}
	return nil
}

// cancelWait bounds how long Cancel waits for Grid Engine to end a
// deleted glidein's job before it removes the glidein's directory anyway.
const cancelWait = 45 * time.Second
