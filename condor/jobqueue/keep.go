package jobqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Retire moves a completed job left in the queue (a Change with Keep: the
// job's LeaveJobInQueue) to the history, as completed. It refuses a job in
// any other state (a *TransitionError) and one not in the queue
// (ErrNotFound).
func (q *Queue) Retire(ctx context.Context, id JobID) error {
	return q.tx(ctx, func(tx *sql.Tx) error {
		var st Status
		err := q.queryRow(ctx, tx, `SELECT status FROM jobs WHERE cluster = ? AND proc = ?`, id.Cluster, id.Proc).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("job queue: job %s: %w", id, err)
		}
		if st != Completed {
			return &TransitionError{ID: id, From: st, To: Completed}
		}
		_, err = q.toHistory(ctx, tx, id, Completed, q.now().Unix())
		return err
	})
}

// RetireDelivered moves the completed jobs ids to the history, as Retire,
// and drops the outbox records seqs, whose deliveries are done, in one
// unit of the commit group (group.go): the end of jobs whose terminated
// events were written. A job no longer in the queue, or in another state
// than Completed (removed meanwhile), is left as it is. It returns once
// the transaction that made its unit committed.
func (q *Queue) RetireDelivered(ctx context.Context, ids []JobID, seqs []int64) error {
	if len(ids) == 0 && len(seqs) == 0 {
		return nil
	}
	return q.grouped(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return q.retireDelivered(ctx, tx, ids, seqs)
	})
}

// retireDelivered is RetireDelivered's unit.
func (q *Queue) retireDelivered(ctx context.Context, tx *sql.Tx, ids []JobID, seqs []int64) error {
	now := q.now().Unix()
	for _, id := range ids {
		// The job is read once, for its status and for the history.
		job, err := q.loadOne(ctx, tx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("job queue: job %s: %w", id, err)
		}
		if job.Status != Completed {
			continue
		}
		if _, err := q.moveToHistory(ctx, tx, job, Completed, now); err != nil {
			return err
		}
	}
	return q.deleteDelivered(ctx, tx, seqs)
}
