package jobqueue

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// A commit group makes the write transactions of many callers in one: a
// group commit. Each caller's work is a unit; the units given while one
// round's transaction runs are made together in the next round; a unit
// that fails is rolled back alone and the others commit (groupRound). A caller returns once the round that made
// its unit committed (nil) or failed (its error): a nil error means its
// unit is committed, an error that none of it is. A caller whose context
// ends before its round takes its unit withdraws it, as one waiting for
// the writer of tx gives up its turn; once taken, the unit's outcome is
// the caller's, whatever its context does.
//
// The first round runs in the goroutine of the caller that found no round
// running; the rounds after it run in a goroutine of their own, so that no
// caller waits for others' turns once its own is made.
type commitGroup struct {
	mu      sync.Mutex
	running bool
	units   []*groupUnit
	// seqs are outbox records delivered (DeliveredLater), dropped with
	// the next round.
	seqs []int64
	// flushing says that DeliveredLater asked for a round of its own for
	// the records waiting, which has not taken them yet: one is enough.
	flushing bool
}

// groupUnit is one caller's part of a round.
type groupUnit struct {
	ctx   context.Context
	fn    func(ctx context.Context, tx *sql.Tx) error // nil: nothing but the round
	done  chan error
	taken bool // by a round; guarded by commitGroup.mu
}

// grouped makes fn part of the commit group's next round and waits for
// that round's outcome. fn's statements run with ctx's values but not its
// cancellation: a unit is made whole or not at all.
func (q *Queue) grouped(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("job queue: waiting for the writer: %w", err)
	}
	g := &q.group
	u := &groupUnit{ctx: ctx, fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	g.units = append(g.units, u)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if lead {
		q.groupRounds()
	}
	select {
	case err := <-u.done:
		return err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !u.taken {
		for i, w := range g.units {
			if w == u {
				g.units = append(g.units[:i], g.units[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		return fmt.Errorf("job queue: waiting for the writer: %w", ctx.Err())
	}
	g.mu.Unlock()
	return <-u.done
}

// groupRounds makes one round of the units waiting, then hands the next
// to a goroutine of its own if more came meanwhile.
func (q *Queue) groupRounds() {
	g := &q.group
	g.mu.Lock()
	units, seqs := g.units, g.seqs
	g.units, g.seqs, g.flushing = nil, nil, false
	if len(units) == 0 {
		g.running = false
		g.mu.Unlock()
		return
	}
	for _, u := range units {
		u.taken = true
	}
	g.mu.Unlock()
	errs, committedRound := q.groupRound(units, seqs)
	if !committedRound && len(seqs) > 0 {
		// The records are still stored: the next round drops them.
		g.mu.Lock()
		g.seqs = append(g.seqs, seqs...)
		g.mu.Unlock()
	}
	for i, u := range units {
		committed(u.ctx, errs[i] == nil)
		u.done <- errs[i]
	}
	g.mu.Lock()
	more := len(g.units) > 0
	if !more {
		g.running = false
	}
	g.mu.Unlock()
	if more {
		go q.groupRounds()
	}
}

// groupSavepoint names the savepoint each unit of a round runs in when
// the round is made again.
const groupSavepoint = "pond_unit"

// groupRound is one round's transaction: the units, then the delivered
// records seqs dropped. It returns each unit's outcome, and whether the
// transaction committed. The units run one after the other with no
// savepoint, which costs statements of their own: should one fail, the
// transaction is rolled back and made again without it, each unit then
// in a savepoint of its own, so that a unit failing then is rolled back
// alone. A unit may thus run twice; only its last run is committed, and
// its outbox records are those of that run.
func (q *Queue) groupRound(units []*groupUnit, seqs []int64) ([]error, bool) {
	errs := make([]error, len(units))
	all := func(err error) ([]error, bool) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs, false
	}
	ctx := context.Background()
	if err := q.wgate.Acquire(ctx, 1); err != nil {
		return all(fmt.Errorf("job queue: waiting for the writer: %w", err))
	}
	defer q.wgate.Release(1)
	defer q.clusters.settled()
	failed, err := q.groupTx(ctx, units, seqs, errs, false)
	if failed {
		// Its records and the others' of this run are not stored.
		for _, u := range units {
			committed(u.ctx, false)
		}
		if len(units) == 1 && len(seqs) == 0 {
			return errs, false
		}
		_, err = q.groupTx(ctx, units, seqs, errs, true)
	}
	if err != nil {
		return all(err)
	}
	return errs, true
}

// groupTx runs one try of a round's transaction. Without savepoints, it
// stops at the first unit that fails (failed), its error in errs, and
// rolls the transaction back; with them, it runs every unit whose errs is
// still nil, each in a savepoint, and commits. err is the transaction's
// own failure, which leaves nothing made.
func (q *Queue) groupTx(ctx context.Context, units []*groupUnit, seqs []int64, errs []error, savepoints bool) (failed bool, err error) {
	tx, err := q.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("job queue: begin: %w", err)
	}
	for i, u := range units {
		if u.fn == nil || errs[i] != nil {
			continue
		}
		uctx := context.WithoutCancel(u.ctx)
		if !savepoints {
			if err := u.fn(uctx, tx); err != nil {
				_ = tx.Rollback()
				errs[i] = err
				return true, nil
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT "+groupSavepoint); err != nil {
			_ = tx.Rollback()
			return false, fmt.Errorf("job queue: savepoint: %w", err)
		}
		if err := u.fn(uctx, tx); err != nil {
			errs[i] = err
			if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO "+groupSavepoint); rerr != nil {
				_ = tx.Rollback()
				return false, fmt.Errorf("job queue: rolling back a failed change (%v): %w", err, rerr)
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE "+groupSavepoint); err != nil {
			_ = tx.Rollback()
			return false, fmt.Errorf("job queue: releasing a savepoint: %w", err)
		}
	}
	if err := q.deleteDelivered(ctx, tx, seqs); err != nil {
		_ = tx.Rollback()
		return false, err
	}
	start := time.Now()
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("job queue: commit: %w", err)
	}
	if q.onCommit != nil {
		q.onCommit(time.Since(start))
	}
	return false, nil
}

// DeliveredLater drops the outbox record seq, whose delivery is done or
// no longer wanted, with the commit group's next round, or with a round
// of its own once maxLaterSeqs records wait: a record nobody waits on
// costs no commit of its own. A record still stored when the queue closes
// is found again by PendingOutbox, whose reader must tell that it was
// delivered.
func (q *Queue) DeliveredLater(seq int64) {
	g := &q.group
	g.mu.Lock()
	g.seqs = append(g.seqs, seq)
	flush := len(g.seqs) >= maxLaterSeqs && !g.running && !g.flushing
	g.flushing = g.flushing || flush
	g.mu.Unlock()
	if flush {
		go func() { _ = q.grouped(context.Background(), nil) }()
	}
}

// maxLaterSeqs is how many outbox records DeliveredLater keeps before it
// drops them in a round of their own.
const maxLaterSeqs = 1024
