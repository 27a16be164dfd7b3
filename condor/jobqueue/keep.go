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
