package jobqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
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
// transaction: the end of jobs whose terminated events were written. A job
// no longer in the queue, or in another state than Completed (removed
// meanwhile), is left as it is. The calls made while one's transaction
// runs are made together in the next (a group commit), each returning
// once the transaction that made its own committed.
func (q *Queue) RetireDelivered(ctx context.Context, ids []JobID, seqs []int64) error {
	if len(ids) == 0 && len(seqs) == 0 {
		return nil
	}
	return q.joinRetire(ctx, ids, seqs)
}

// joinRetire makes ids and seqs part of the retire group's next
// transaction and waits for it to commit.
func (q *Queue) joinRetire(ctx context.Context, ids []JobID, seqs []int64) error {
	g := &q.retire
	done := make(chan error, 1)
	g.mu.Lock()
	g.ids, g.seqs = append(g.ids, ids...), append(g.seqs, seqs...)
	g.waiting = append(g.waiting, done)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if lead {
		q.retireGroup(context.WithoutCancel(ctx))
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("job queue: moving completed jobs to the history: %w", ctx.Err())
	}
}

// DeliveredLater drops the outbox record seq, whose delivery is done or
// no longer wanted, with the next RetireDelivered transaction, or with
// one of its own once maxLaterSeqs records wait: a record nobody waits on
// costs no commit of its own. A record still stored when the queue closes
// is found again by PendingOutbox, whose reader must tell that it was
// delivered.
func (q *Queue) DeliveredLater(seq int64) {
	g := &q.retire
	g.mu.Lock()
	g.seqs = append(g.seqs, seq)
	flush := len(g.seqs) >= maxLaterSeqs && !g.running && !g.flushing
	g.flushing = g.flushing || flush
	g.mu.Unlock()
	if flush {
		go func() { _ = q.joinRetire(context.Background(), nil, nil) }()
	}
}

// maxLaterSeqs is how many outbox records DeliveredLater keeps before it
// drops them in a transaction of their own.
const maxLaterSeqs = 1024

// retireGroup makes the RetireDelivered calls gathered, in one
// transaction. The first round is its caller's; the calls made meanwhile
// are made by another goroutine, so that no caller waits for others' turns.
func (q *Queue) retireGroup(ctx context.Context) {
	g := &q.retire
	g.mu.Lock()
	ids, seqs, waiting := g.ids, g.seqs, g.waiting
	g.ids, g.seqs, g.waiting, g.flushing = nil, nil, nil, false
	if len(waiting) == 0 {
		g.running = false
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	err := q.retireDelivered(ctx, ids, seqs)
	for _, w := range waiting {
		w <- err
	}
	g.mu.Lock()
	more := len(g.waiting) > 0
	if !more {
		g.running = false
	}
	g.mu.Unlock()
	if more {
		go q.retireGroup(ctx)
	}
}

// retireGroup gathers the RetireDelivered calls made while one's
// transaction runs (see there).
type retireGroup struct {
	mu      sync.Mutex
	running bool
	ids     []JobID
	seqs    []int64
	waiting []chan error
	// flushing says that DeliveredLater started a transaction for the
	// records waiting, which has not taken them yet: one is enough.
	flushing bool
}

// retireDelivered is RetireDelivered's transaction.
func (q *Queue) retireDelivered(ctx context.Context, ids []JobID, seqs []int64) error {
	return q.tx(ctx, func(tx *sql.Tx) error {
		now := q.now().Unix()
		for _, id := range ids {
			var st Status
			err := q.queryRow(ctx, tx, `SELECT status FROM jobs WHERE cluster = ? AND proc = ?`, id.Cluster, id.Proc).Scan(&st)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("job queue: job %s: %w", id, err)
			}
			if st != Completed {
				continue
			}
			if _, err := q.toHistory(ctx, tx, id, Completed, now); err != nil {
				return err
			}
		}
		return q.deleteDelivered(ctx, tx, seqs)
	})
}
