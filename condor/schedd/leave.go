package schedd

import (
	"context"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// leaveInQueue evaluates a job's LeaveJobInQueue (leave_in_queue) as it
// stands completed: with attrs set, JobStatus 4 and its CompletionDate.
func leaveInQueue(ad *classad.Ad, attrs jobqueue.Ad, completed time.Time) bool {
	e, ok := ad.Lookup("LeaveJobInQueue")
	if !ok {
		return false
	}
	if readsNothing(e) {
		return classad.EvalWith(e, ad, nil).IsTrue()
	}
	tmp := ad.Copy()
	for k, v := range attrs {
		_ = tmp.SetExpr(k, v)
	}
	tmp.SetInt("JobStatus", int64(jobqueue.Completed))
	if _, ok := tmp.Lookup("CompletionDate"); !ok || tmp.EvalNumber("CompletionDate", nil, 0) <= 0 {
		tmp.SetInt("CompletionDate", completed.Unix())
	}
	return classad.EvalWith(e, tmp, nil).IsTrue()
}

// complete moves a job that ran to its end to Completed with attrs, with
// its terminated event ev in its logs before it leaves the queue, as
// HTCondor's shadow writes the event before the schedd lets the job go:
// whoever sees the job leave the queue (condor q, condor history, a
// script that then reads the log) finds its end in its log. The change
// keeps the job in the queue, completed, with ev stored in the outbox
// (outbox.go); ev is written to the job's logs; then, in one transaction,
// the job moves to the history (unless its LeaveJobInQueue keeps it, as
// HTCondor's schedd leaves it, for retireCompleted to move later) and the
// outbox record is dropped. A schedd that stops in between writes ev when
// it starts again, unless the logs have it (replayOutbox), and
// retireCompleted moves the job then, as the schedd starts; meanwhile retireCompleted leaves a
// job being ended (ending) alone.
func (s *Schedd) complete(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, attrs jobqueue.Ad, ev joblog.Event) error {
	keep := leaveInQueue(ad, attrs, s.now())
	s.mu.Lock()
	s.ending[id] = true
	s.mu.Unlock()
	ended := func() {
		s.mu.Lock()
		delete(s.ending, id)
		s.mu.Unlock()
	}
	entries, err := s.recordEvents(ctx, ev, func(ctx context.Context) error {
		return s.q.Apply(ctx, []jobqueue.Change{{ID: id, To: jobqueue.Completed, Attrs: attrs, Keep: true}})
	})
	if err != nil {
		ended()
		return err
	}
	seqs := make([]int64, 0, len(entries))
	for _, e := range entries {
		s.writeEntry(ctx, e, ad, false)
		seqs = append(seqs, e.Seq)
	}
	var retire []jobqueue.JobID
	if !keep {
		retire = append(retire, id)
	}
	// The job's end is made and told: its move is made even if the caller
	// gives up waiting now, and in the background, so that it shares the
	// commit of what the queue makes next (the start of the claim's next
	// job, nearly always) rather than adding one to the job's end.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer ended()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := s.q.RetireDelivered(rctx, retire, seqs); err != nil {
			// The job stays completed in the queue for retireCompleted;
			// its event, written, is not written again (replayOutbox
			// finds it).
			s.log.Warn("moving a completed job to the history", "job", id, "err", err)
		}
	}()
	return nil
}

// retireCompleted moves to the history the completed jobs left in the
// queue whose LeaveJobInQueue is no longer true, a page at a time; it
// runs with the periodic policy's evaluation.
func (s *Schedd) retireCompleted(ctx context.Context) {
	pq := jobqueue.PageQuery{Limit: periodicPageSize, Status: []jobqueue.Status{jobqueue.Completed}}
	retired := false
	for ctx.Err() == nil {
		page, err := s.q.Page(ctx, pq)
		if err != nil {
			s.log.Warn("reading the completed jobs left in the queue", "err", err)
			break
		}
		for _, j := range page {
			s.mu.Lock()
			ending := s.ending[j.ID]
			s.mu.Unlock()
			if ending {
				// Its terminated event is being written (complete).
				continue
			}
			// An unreadable ad leaves: nothing could keep it.
			if ad, err := wire.ToClassAd(j.Ad); err == nil && leaveInQueue(ad, nil, j.EnteredStatus) {
				continue
			}
			if err := s.q.Retire(ctx, j.ID); err != nil && !gone(err) {
				s.log.Warn("moving a completed job to the history", "job", j.ID, "err", err)
				continue
			}
			s.log.Info("the completed job's LeaveJobInQueue is no longer true; moved to the history", "job", j.ID)
			retired = true
		}
		if len(page) < pq.Limit {
			break
		}
		pq.After = page[len(page)-1].ID
	}
	if retired {
		s.markDirty()
	}
}
