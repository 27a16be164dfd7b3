package jobqueue

import (
	"context"
	"database/sql"
	"fmt"
)

// outboxSchema is the table of the records a state change leaves for its
// caller to deliver (a job's event log entry, say): committed with the
// change, so that a crash between the change and the delivery loses
// neither.
const outboxSchema = `
CREATE TABLE IF NOT EXISTS outbox (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	cluster INTEGER NOT NULL,
	proc    INTEGER NOT NULL,
	record  BLOB    NOT NULL
);
`

// Outbox collects the records of the state changes made with a context
// from WithOutbox: Record is called, inside the change's transaction, for
// each job that changes state, and what it returns (nothing when nil) is
// stored in the queue with the change, all or none.
type Outbox struct {
	// Record returns the record of job id's change from one state to
	// another, or nil for none.
	Record func(id JobID, from, to Status) []byte
	// Entries are the records stored, in order; set once the change
	// committed. The caller delivers them and then calls Delivered.
	Entries []OutboxEntry
	// Attrs, when not nil, names the attributes of a job's ad that its
	// Changed.Ad holds when an action of many jobs (RemoveEach) moves it
	// to the history; nil, its whole ad. The history keeps the whole ad
	// either way (Queue.JobsOf reads it).
	Attrs   []string
	pending []OutboxEntry
}

// OutboxEntry is a stored record of a state change.
type OutboxEntry struct {
	Seq    int64
	ID     JobID
	Record []byte
}

type outboxKey struct{}

// WithOutbox returns a context whose state changes (Transition, Apply,
// Hold, Release, Remove) store ob's records in their transaction.
func WithOutbox(ctx context.Context, ob *Outbox) context.Context {
	return context.WithValue(ctx, outboxKey{}, ob)
}

// record stores the outbox record of one change, if the context asks for
// one.
func (q *Queue) record(ctx context.Context, tx *sql.Tx, id JobID, from, to Status) error {
	ob, _ := ctx.Value(outboxKey{}).(*Outbox)
	if ob == nil || ob.Record == nil {
		return nil
	}
	rec := ob.Record(id, from, to)
	if rec == nil {
		return nil
	}
	var seq int64
	if err := q.queryRow(ctx, tx, outboxInsertSQL,
		id.Cluster, id.Proc, rec).Scan(&seq); err != nil {
		return fmt.Errorf("job queue: job %s: recording its outbox entry: %w", id, err)
	}
	ob.pending = append(ob.pending, OutboxEntry{Seq: seq, ID: id, Record: rec})
	return nil
}

// committed publishes the records of a transaction that committed, or
// drops those of one rolled back.
func committed(ctx context.Context, ok bool) {
	ob, _ := ctx.Value(outboxKey{}).(*Outbox)
	if ob == nil {
		return
	}
	if ok {
		ob.Entries = append(ob.Entries, ob.pending...)
	}
	ob.pending = nil
}

// PendingOutbox returns the records stored and not yet delivered, oldest
// first: after a crash, those whose delivery it interrupted.
func (q *Queue) PendingOutbox(ctx context.Context) ([]OutboxEntry, error) {
	rows, err := q.w.QueryContext(ctx, `SELECT seq, cluster, proc, record FROM outbox ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("job queue: reading the outbox: %w", err)
	}
	defer rows.Close()
	var out []OutboxEntry
	for rows.Next() {
		var e OutboxEntry
		if err := rows.Scan(&e.Seq, &e.ID.Cluster, &e.ID.Proc, &e.Record); err != nil {
			return nil, fmt.Errorf("job queue: reading the outbox: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: reading the outbox: %w", err)
	}
	return out, nil
}

// Delivered removes the outbox record seq once its delivery is done.
func (q *Queue) Delivered(ctx context.Context, seq int64) error {
	if _, err := q.w.ExecContext(ctx, `DELETE FROM outbox WHERE seq = ?`, seq); err != nil {
		return fmt.Errorf("job queue: outbox entry %d: %w", seq, err)
	}
	return nil
}

// DeliveredAll removes the outbox records seqs, whose deliveries are
// done, in one transaction: a batch of changes' records at once.
func (q *Queue) DeliveredAll(ctx context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	return q.tx(ctx, func(tx *sql.Tx) error { return q.deleteDelivered(ctx, tx, seqs) })
}

// deleteDelivered removes the outbox records seqs in tx.
func (q *Queue) deleteDelivered(ctx context.Context, tx *sql.Tx, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	args := make([]any, len(seqs))
	for i, s := range seqs {
		args[i] = s
	}
	if err := q.insertRows(ctx, tx, deleteOutbox, args); err != nil {
		return fmt.Errorf("job queue: outbox entries %d to %d: %w", seqs[0], seqs[len(seqs)-1], err)
	}
	return nil
}
