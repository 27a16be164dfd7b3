package schedd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// Act runs condor_rm, condor_hold or condor_release, on the caller's own
// jobs unless the caller is an administrator (see restrict).
func (s *Schedd) Act(ctx context.Context, req *wire.ActRequest) (*wire.ActResponse, error) {
	if len(req.Args) == 0 && strings.TrimSpace(req.Constraint) == "" && !req.All {
		return nil, fmt.Errorf("%w: no jobs selected (give job ids, owners, a constraint or all)", wire.ErrBadRequest)
	}
	sels, err := selectors(req.Args, req.Constraint)
	if err != nil {
		return nil, err
	}
	// A cluster's factory goes (or pauses) before its jobs, so that it
	// makes none after them.
	if _, err := s.factoryAct(ctx, req, sels); err != nil {
		return nil, fmt.Errorf("%s: %w", req.Action, err)
	}
	if sels, err = s.restrict(ctx, sels); err != nil {
		return nil, err
	}
	out := &wire.ActResponse{Changed: []string{}}
	var removed []jobqueue.JobID
	for _, sel := range sels {
		var changed []jobqueue.Changed
		var act func(context.Context) error
		var ev joblog.Event
		switch req.Action {
		case wire.ActRemove:
			ev = joblog.Event{Type: joblog.Aborted, Message: removedBy(ctx, req.Reason)}
			act = func(ctx context.Context) (err error) {
				changed, err = s.q.Remove(ctx, sel, firstNonEmpty(req.Reason, "via condor_rm"))
				return err
			}
		case wire.ActHold:
			ev = joblog.Event{Type: joblog.Held, Message: firstNonEmpty(req.Reason, "via condor_hold"), HoldCode: 1}
			act = func(ctx context.Context) (err error) {
				changed, err = s.q.Hold(ctx, sel, firstNonEmpty(req.Reason, "via condor_hold"), 1, 0)
				return err
			}
		case wire.ActRelease:
			ev = joblog.Event{Type: joblog.Released, Message: firstNonEmpty(req.Reason, "via condor_release")}
			act = func(ctx context.Context) (err error) {
				changed, err = s.q.Release(ctx, sel, firstNonEmpty(req.Reason, "via condor_release"))
				return err
			}
		default:
			return nil, fmt.Errorf("%w: unknown action %q", wire.ErrBadRequest, req.Action)
		}
		// Each job's event is stored with its change (outbox.go).
		events, err := s.recordEvents(ctx, ev, act)
		for _, e := range events {
			s.deliverEvent(ctx, e, nil, false)
		}
		if errors.Is(err, jobqueue.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.Action, err)
		}
		for _, c := range changed {
			out.Changed = append(out.Changed, c.ID.String())
			s.afterAct(ctx, req, c)
			if req.Action == wire.ActRemove {
				removed = append(removed, c.ID)
			}
		}
	}
	s.removeOthers(ctx, removed, 0)
	s.markDirty()
	return out, nil
}

// removedBy is the reason a job log's abort event gives for condor_rm:
// as HTCondor's schedd writes it, the reason followed by the user who
// asked, when the request was authenticated.
func removedBy(ctx context.Context, reason string) string {
	msg := firstNonEmpty(reason, "via condor_rm")
	if who, _, _ := strings.Cut(callerOf(ctx).name, "@"); who != "" {
		msg += " (by user " + who + ")"
	}
	return msg
}

// afterAct queues a job an action released and vacates a removed or held
// job that was running.
func (s *Schedd) afterAct(ctx context.Context, req *wire.ActRequest, c jobqueue.Changed) {
	s.mu.Lock()
	s.idle.delete(c.ID)
	cl := s.active[c.ID]
	s.mu.Unlock()
	if req.Action == wire.ActRelease {
		s.addIdle(ctx, c.ID)
		return
	}
	if c.From == jobqueue.Running {
		s.vacateJob(cl, c.ID)
	}
}

// vacateJob has the startd of claim cl stop job id, which left the
// running state while on it; a startd that cannot be told loses the
// claim. A nil claim, or one without an address, is left alone. A job
// the schedd runs itself (local.go) is stopped.
func (s *Schedd) vacateJob(cl *claim, id jobqueue.JobID) {
	s.stopLocal(id)
	if cl == nil || cl.addr() == "" {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		vctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := s.peer(cl.addr()).Startd().Vacate(vctx, &wire.VacateRequest{ClaimID: cl.id, JobID: id.String()})
		if err != nil {
			s.log.Warn("vacating job", "job", id, "err", err)
			s.finishClaim(cl)
		}
	}()
}
