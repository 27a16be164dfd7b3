package schedd

import (
	"context"
	"time"

	"github.com/pond-htc/pond/condor/classad"
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

// complete moves a job that ran to its end to Completed with attrs: to
// the history, or, while its LeaveJobInQueue is true, left in the queue
// as HTCondor's schedd leaves it, for retireCompleted to move later.
func (s *Schedd) complete(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, attrs jobqueue.Ad) error {
	keep := leaveInQueue(ad, attrs, s.now())
	return s.q.Apply(ctx, []jobqueue.Change{{ID: id, To: jobqueue.Completed, Attrs: attrs, Keep: keep}})
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
