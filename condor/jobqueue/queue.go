// Package jobqueue is the schedd's job queue: an embedded SQLite database
// (modernc.org/sqlite, WAL mode) holding job ClassAds as attribute name ->
// expression text, job states with HTCondor's numbering and transitions,
// and the history of completed and removed jobs.
//
// A cluster is submitted at once (Submit), or in two steps as condor_submit
// does: NewCluster reserves its id, the submitter makes the jobs for that
// id, and SubmitCluster commits them, a retry of the same submission
// changing nothing.
//
// Durability: every Submit, NewCluster, SubmitCluster, Transition,
// SetAttrs, Remove, Hold and Release is one transaction, committed before the call returns. The database runs
// in WAL mode with synchronous=NORMAL by default: a committed transaction
// is in the operating system's page cache when the call returns, so it
// survives the schedd being killed (kill -9) at any moment; only a crash of
// the whole machine may lose the last transactions, and never corrupts the
// database. Options.Synchronous = "FULL" adds an fsync per commit, which
// also survives power loss at the cost of throughput.
//
// Attributes common to all jobs of a cluster are stored once per cluster
// (as HTCondor's cluster ad); each job stores only its own differing
// attributes, which override the cluster's.
package jobqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// Status is a job's JobStatus as HTCondor numbers it.
type Status int

// Job states.
const (
	Idle               Status = 1
	Running            Status = 2
	Removed            Status = 3
	Completed          Status = 4
	Held               Status = 5
	TransferringOutput Status = 6
	Suspended          Status = 7
)

// String returns the state's name as condor_q spells it.
func (s Status) String() string {
	switch s {
	case Idle:
		return "Idle"
	case Running:
		return "Running"
	case Removed:
		return "Removed"
	case Completed:
		return "Completed"
	case Held:
		return "Held"
	case TransferringOutput:
		return "TransferringOutput"
	case Suspended:
		return "Suspended"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Terminal reports whether jobs in state s leave the queue for history.
func (s Status) Terminal() bool { return s == Removed || s == Completed }

// validTransitions lists the state changes HTCondor's schedd makes.
var validTransitions = map[Status][]Status{
	Idle:               {Running, Held, Removed},
	Running:            {Idle, Completed, Held, Removed, Suspended, TransferringOutput},
	Suspended:          {Running, Idle, Held, Removed},
	TransferringOutput: {Completed, Idle, Held, Removed},
	Held:               {Idle, Removed},
	// A completed job left in the queue (LeaveJobInQueue) may be removed.
	Completed: {Removed},
}

// CanTransition reports whether a job may go from one state to another.
func CanTransition(from, to Status) bool {
	for _, s := range validTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Ad is a job ClassAd: attribute name -> ClassAd expression text.
type Ad = map[string]string

// JobID names a job as cluster.proc.
type JobID struct {
	Cluster int
	Proc    int
}

// String formats the id as "cluster.proc".
func (id JobID) String() string { return fmt.Sprintf("%d.%d", id.Cluster, id.Proc) }

// ParseJobID parses "cluster.proc".
func ParseJobID(s string) (JobID, error) {
	c, p, ok := strings.Cut(s, ".")
	if !ok {
		return JobID{}, fmt.Errorf("job id %q is not cluster.proc", s)
	}
	ci, err1 := strconv.Atoi(c)
	pi, err2 := strconv.Atoi(p)
	if err1 != nil || err2 != nil || ci <= 0 || pi < 0 {
		return JobID{}, fmt.Errorf("job id %q is not cluster.proc", s)
	}
	return JobID{ci, pi}, nil
}

// Job is a job read from the queue or history.
type Job struct {
	ID            JobID
	Owner         string
	Status        Status
	EnteredStatus time.Time // EnteredCurrentStatus
	Ad            Ad        // attributes (all, or the projection asked for)
}

// ErrNotFound is wrapped by errors about jobs that are not in the queue.
var ErrNotFound = errors.New("no such job")

// TransitionError reports a state change HTCondor does not allow.
type TransitionError struct {
	ID       JobID
	From, To Status
}

// Error implements error.
func (e *TransitionError) Error() string {
	if e.From == e.To {
		return fmt.Sprintf("job %s is already %s", e.ID, e.From)
	}
	return fmt.Sprintf("job %s cannot go from %s to %s", e.ID, e.From, e.To)
}

// Options tune Open.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "NORMAL" (default;
	// commits survive process crashes) or "FULL" (also power loss).
	Synchronous string
	// Now is the clock for QDate, EnteredCurrentStatus and friends.
	Now func() time.Time
	// ReadConns bounds concurrent readers (default 4).
	ReadConns int
	// OnCommit, when set, is told how long each write transaction's
	// commit took (the schedd's commit latency histogram).
	OnCommit func(time.Duration)
}

// Queue is an open job queue. It is safe for concurrent use.
type Queue struct {
	path string
	w    *sql.DB // single writer connection
	// wgate hands w to the write transactions in the order they asked
	// for it. database/sql gives a freed connection to a waiter chosen at
	// random, so that under load one report could wait behind any number
	// of later ones, past its client's timeout.
	wgate *semaphore.Weighted
	r     *sql.DB // reader pool
	now   func() time.Time
	// onCommit is Options.OnCommit (nil for none).
	onCommit func(time.Duration)

	stmts map[string]*sql.Stmt // hot statements prepared on the writer at Open

	readMu sync.Mutex
	reads  map[string]*sql.Stmt // statements of Get, prepared on the reader pool once

	group commitGroup // the group commit of Apply and RetireDelivered (group.go)

	clusters clusterAds // cluster ads kept for Get and the moves to the history
}

// maxReadStmts bounds the statements kept prepared on the reader pool.
const maxReadStmts = 16

// preparedReads runs the queries given to it as statements prepared once
// on the reader pool, rather than parsed and planned again at each call:
// for the fixed queries of Get, which the schedd makes as each job starts
// and ends.
type preparedReads struct{ q *Queue }

// QueryContext runs text with args, prepared once.
func (p preparedReads) QueryContext(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	q := p.q
	q.readMu.Lock()
	st, ok := q.reads[text]
	if !ok && len(q.reads) < maxReadStmts {
		var err error
		if st, err = q.r.PrepareContext(ctx, text); err != nil {
			q.readMu.Unlock()
			return nil, fmt.Errorf("job queue: preparing %q: %w", text, err)
		}
		if q.reads == nil {
			q.reads = map[string]*sql.Stmt{}
		}
		q.reads[text] = st
	}
	q.readMu.Unlock()
	if st == nil {
		return q.r.QueryContext(ctx, text, args...)
	}
	return st.QueryContext(ctx, args...)
}

// historySizes fills the sizes of the history's ads (history_sizes) in a
// queue made before they were kept, once.
func historySizes(ctx context.Context, w *sql.DB) error {
	// Asked apart from the measuring itself, which would otherwise step
	// through the whole history at every open to test it row by row.
	var unmeasured bool
	if err := w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM history) AND NOT EXISTS (SELECT 1 FROM history_sizes)`).Scan(&unmeasured); err != nil {
		return fmt.Errorf("measuring the history's ads: %w", err)
	}
	if !unmeasured {
		return nil
	}
	if _, err := w.ExecContext(ctx, `INSERT INTO history_sizes(cluster, proc, completed, seq, size)
		SELECT cluster, proc, completed, seq, length(CAST(ad AS BLOB)) FROM history`); err != nil {
		return fmt.Errorf("measuring the history's ads: %w", err)
	}
	return nil
}

// hotStatements are prepared once on the writer connection, with the
// queries that read one job whole (oneJobQueries), as a job's move to the
// history does.
var hotStatements = []string{
	`UPDATE meta SET value = value + 1 WHERE key = 'next_cluster' RETURNING value - 1`,
	`UPDATE meta SET value = value + 1 WHERE key = 'history_seq' RETURNING value`,
	`INSERT INTO clusters(cluster, reserved) VALUES (?, ?)`,
	`SELECT committed, submission FROM clusters WHERE cluster = ?`,
	`UPDATE clusters SET committed = ?, submission = ? WHERE cluster = ?`,
	`SELECT status, num_starts, num_holds FROM jobs WHERE cluster = ? AND proc = ?`,
	`UPDATE jobs SET status = ?, entered = ?, num_starts = ?, num_holds = ? WHERE cluster = ? AND proc = ?`,
	`INSERT OR REPLACE INTO history(cluster, proc, owner, status, completed, seq, ad) VALUES (?, ?, ?, ?, ?, ?, ?)`,
	`DELETE FROM proc_attrs WHERE cluster = ? AND proc = ?`,
	`DELETE FROM jobs WHERE cluster = ? AND proc = ?`,
	`DELETE FROM cluster_attrs WHERE cluster = ? AND NOT EXISTS (SELECT 1 FROM jobs WHERE cluster = ?)`,
	holdAttrsSQL,
	deleteAttrSQL,
	outboxInsertSQL,
}

// The statements of a hold's release and of an outbox record, one per job
// a mass action changes.
const (
	holdAttrsSQL    = `SELECT name, value FROM proc_attrs WHERE cluster = ? AND proc = ? AND name IN ('HoldReason', 'HoldReasonCode', 'HoldReasonSubCode')`
	deleteAttrSQL   = `DELETE FROM proc_attrs WHERE cluster = ? AND proc = ? AND name = ?`
	outboxInsertSQL = `INSERT INTO outbox(cluster, proc, record) VALUES (?, ?, ?) RETURNING seq`
)

// stmt returns text bound to tx: the statement prepared at Open when it
// is a hot one, otherwise one prepared in tx.
func (q *Queue) stmt(ctx context.Context, tx *sql.Tx, text string) (*sql.Stmt, error) {
	if st, ok := q.stmts[text]; ok {
		return tx.StmtContext(ctx, st), nil
	}
	st, err := tx.PrepareContext(ctx, text)
	if err != nil {
		return nil, fmt.Errorf("job queue: preparing %q: %w", text, err)
	}
	return st, nil
}

const schema = `
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', 1), ('next_cluster', 1);
CREATE TABLE IF NOT EXISTS jobs (
	cluster    INTEGER NOT NULL,
	proc       INTEGER NOT NULL,
	owner      TEXT    NOT NULL,
	status     INTEGER NOT NULL,
	entered    INTEGER NOT NULL,
	qdate      INTEGER NOT NULL,
	num_starts INTEGER NOT NULL DEFAULT 0,
	num_holds  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (cluster, proc)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status, cluster, proc);
CREATE INDEX IF NOT EXISTS jobs_owner ON jobs(owner);
CREATE INDEX IF NOT EXISTS jobs_owner_nocase ON jobs(owner COLLATE NOCASE);
CREATE TABLE IF NOT EXISTS clusters (
	cluster    INTEGER PRIMARY KEY,
	reserved   INTEGER NOT NULL,
	committed  INTEGER,
	submission TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS cluster_attrs (
	cluster INTEGER NOT NULL,
	name    TEXT NOT NULL COLLATE NOCASE,
	value   TEXT NOT NULL,
	PRIMARY KEY (cluster, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS proc_attrs (
	cluster INTEGER NOT NULL,
	proc    INTEGER NOT NULL,
	name    TEXT NOT NULL COLLATE NOCASE,
	value   TEXT NOT NULL,
	PRIMARY KEY (cluster, proc, name)
) WITHOUT ROWID;
DROP INDEX IF EXISTS cluster_attrs_periodic;
DROP INDEX IF EXISTS proc_attrs_periodic;
CREATE UNIQUE INDEX IF NOT EXISTS cluster_attrs_policy ON cluster_attrs(name, cluster)
	WHERE (name = 'PeriodicHold' OR name = 'PeriodicRelease' OR name = 'PeriodicRemove') AND lower(trim(value)) <> 'false';
CREATE UNIQUE INDEX IF NOT EXISTS proc_attrs_policy ON proc_attrs(name, cluster, proc)
	WHERE (name = 'PeriodicHold' OR name = 'PeriodicRelease' OR name = 'PeriodicRemove') AND lower(trim(value)) <> 'false';
CREATE TABLE IF NOT EXISTS history (
	cluster   INTEGER NOT NULL,
	proc      INTEGER NOT NULL,
	owner     TEXT    NOT NULL,
	status    INTEGER NOT NULL,
	completed INTEGER NOT NULL,
	seq       INTEGER NOT NULL,
	ad        TEXT    NOT NULL,
	PRIMARY KEY (cluster, proc)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS history_order ON history(completed, seq);
-- The size of each finished job's ad, kept beside the history by its
-- triggers, so that the history is bounded in bytes (PruneHistoryBytes)
-- reading this table's index, not the ads.
CREATE TABLE IF NOT EXISTS history_sizes (
	cluster   INTEGER NOT NULL,
	proc      INTEGER NOT NULL,
	completed INTEGER NOT NULL,
	seq       INTEGER NOT NULL,
	size      INTEGER NOT NULL,
	PRIMARY KEY (cluster, proc)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS history_sizes_order ON history_sizes(completed, seq, size);
CREATE TRIGGER IF NOT EXISTS history_size_in AFTER INSERT ON history BEGIN
	INSERT OR REPLACE INTO history_sizes(cluster, proc, completed, seq, size)
		VALUES (NEW.cluster, NEW.proc, NEW.completed, NEW.seq, length(CAST(NEW.ad AS BLOB)));
END;
CREATE TRIGGER IF NOT EXISTS history_size_out AFTER DELETE ON history BEGIN
	DELETE FROM history_sizes WHERE cluster = OLD.cluster AND proc = OLD.proc;
END;
CREATE INDEX IF NOT EXISTS history_owner ON history(owner);
INSERT OR IGNORE INTO meta(key, value) VALUES ('history_seq', 0);
CREATE TABLE IF NOT EXISTS job_counts (
	cluster INTEGER NOT NULL,
	owner   TEXT    NOT NULL,
	status  INTEGER NOT NULL,
	n       INTEGER NOT NULL,
	PRIMARY KEY (cluster, owner, status)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS jobs_counted AFTER INSERT ON jobs BEGIN
	INSERT INTO job_counts(cluster, owner, status, n) VALUES (NEW.cluster, NEW.owner, NEW.status, 1)
		ON CONFLICT(cluster, owner, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS jobs_uncounted AFTER DELETE ON jobs BEGIN
	UPDATE job_counts SET n = n - 1 WHERE cluster = OLD.cluster AND owner = OLD.owner AND status = OLD.status;
	DELETE FROM job_counts WHERE cluster = OLD.cluster AND owner = OLD.owner AND status = OLD.status AND n <= 0;
END;
CREATE TRIGGER IF NOT EXISTS jobs_recounted AFTER UPDATE OF status, owner ON jobs
WHEN OLD.status != NEW.status OR OLD.owner != NEW.owner BEGIN
	UPDATE job_counts SET n = n - 1 WHERE cluster = OLD.cluster AND owner = OLD.owner AND status = OLD.status;
	DELETE FROM job_counts WHERE cluster = OLD.cluster AND owner = OLD.owner AND status = OLD.status AND n <= 0;
	INSERT INTO job_counts(cluster, owner, status, n) VALUES (NEW.cluster, NEW.owner, NEW.status, 1)
		ON CONFLICT(cluster, owner, status) DO UPDATE SET n = n + 1;
END;
CREATE TABLE IF NOT EXISTS batch_overrides (
	cluster INTEGER PRIMARY KEY,
	n       INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS batch_override_set AFTER INSERT ON proc_attrs
WHEN NEW.name = 'JobBatchName' COLLATE NOCASE BEGIN
	INSERT INTO batch_overrides(cluster, n) VALUES (NEW.cluster, 1) ON CONFLICT(cluster) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS batch_override_unset AFTER DELETE ON proc_attrs
WHEN OLD.name = 'JobBatchName' COLLATE NOCASE BEGIN
	UPDATE batch_overrides SET n = n - 1 WHERE cluster = OLD.cluster;
	DELETE FROM batch_overrides WHERE cluster = OLD.cluster AND n <= 0;
END;
`

// countsSchema fills job_counts and batch_overrides, which the triggers
// keep from then on, once for a queue made before them.
const countsSchema = `
DELETE FROM job_counts;
INSERT INTO job_counts(cluster, owner, status, n) SELECT cluster, owner, status, COUNT(*) FROM jobs GROUP BY cluster, owner, status;
DELETE FROM batch_overrides;
INSERT INTO batch_overrides(cluster, n) SELECT cluster, COUNT(*) FROM proc_attrs WHERE name = 'JobBatchName' GROUP BY cluster;
INSERT INTO meta(key, value) VALUES ('counts', 1);
`

func dsn(path, sync string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	// The path is part of an SQLite URI: escape what URIs give meaning to.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + q.Encode()
}

// Open opens (creating if needed) the queue database at path with default
// options.
func Open(ctx context.Context, path string) (*Queue, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith opens the queue database at path.
func OpenWith(ctx context.Context, path string, opts Options) (*Queue, error) {
	sync := strings.ToUpper(opts.Synchronous)
	switch sync {
	case "":
		sync = "NORMAL"
	case "NORMAL", "FULL", "EXTRA":
	default:
		return nil, fmt.Errorf("job queue %s: synchronous must be NORMAL or FULL, not %q", path, opts.Synchronous)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	w, err := sql.Open("sqlite", dsn(path, sync, false))
	if err != nil {
		return nil, fmt.Errorf("job queue %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if _, err := w.ExecContext(ctx, schema+outboxSchema+factorySchema); err != nil {
		w.Close()
		return nil, fmt.Errorf("job queue %s: creating schema: %w", path, err)
	}
	if err := historySizes(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("job queue %s: %w", path, err)
	}
	if err := fillCounts(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("job queue %s: counting the jobs: %w", path, err)
	}
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		w.Close()
		return nil, fmt.Errorf("job queue %s: WAL mode not available (journal_mode %q): %v", path, mode, err)
	}
	oneJob, err := oneJobQueries()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("job queue %s: %w", path, err)
	}
	hot := append(append(oneJob, hotStatements...), rowsStatements()...)
	stmts := make(map[string]*sql.Stmt, len(hot))
	for _, text := range hot {
		st, err := w.PrepareContext(ctx, text)
		if err != nil {
			for _, s := range stmts {
				s.Close()
			}
			w.Close()
			return nil, fmt.Errorf("job queue %s: preparing %q: %w", path, text, err)
		}
		stmts[text] = st
	}
	r, err := sql.Open("sqlite", dsn(path, sync, true))
	if err != nil {
		for _, s := range stmts {
			s.Close()
		}
		w.Close()
		return nil, fmt.Errorf("job queue %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	return &Queue{path: path, w: w, wgate: semaphore.NewWeighted(1), r: r, now: opts.Now, stmts: stmts, onCommit: opts.OnCommit}, nil
}

// fillCounts runs countsSchema unless it ran before.
func fillCounts(ctx context.Context, w *sql.DB) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM meta WHERE key = 'counts'`).Scan(&done); err != nil {
		return err
	}
	if done > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, countsSchema); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (q *Queue) Close() error {
	for _, st := range q.stmts {
		st.Close()
	}
	q.readMu.Lock()
	for _, st := range q.reads {
		st.Close()
	}
	q.reads = nil
	q.readMu.Unlock()
	err1 := q.r.Close()
	err2 := q.w.Close()
	if err2 != nil {
		return fmt.Errorf("job queue %s: %w", q.path, err2)
	}
	if err1 != nil {
		return fmt.Errorf("job queue %s: %w", q.path, err1)
	}
	return nil
}

// Path returns the database file's path.
func (q *Queue) Path() string { return q.path }

// tx runs fn in one immediate write transaction, once the transactions
// that asked before it have run.
func (q *Queue) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := q.wgate.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("job queue: waiting for the writer: %w", err)
	}
	defer q.wgate.Release(1)
	tx, err := q.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("job queue: begin: %w", err)
	}
	defer q.clusters.settled()
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		committed(ctx, false)
		return err
	}
	start := time.Now()
	if err := tx.Commit(); err != nil {
		committed(ctx, false)
		return fmt.Errorf("job queue: commit: %w", err)
	}
	if q.onCommit != nil {
		q.onCommit(time.Since(start))
	}
	committed(ctx, true)
	return nil
}

// unquote decodes a ClassAd string literal, or returns s unchanged.
func unquote(s string) string {
	t := strings.TrimSpace(s)
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return t
	}
	t = t[1 : len(t)-1]
	if !strings.Contains(t, `\`) {
		return t
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] == '\\' && i+1 < len(t) {
			i++
			switch t[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(t[i])
			}
			continue
		}
		b.WriteByte(t[i])
	}
	return b.String()
}

// quoter escapes the characters a ClassAd string literal cannot hold as
// they are.
var quoter = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)

// quote renders s as a ClassAd string literal.
func quote(s string) string {
	return `"` + quoter.Replace(s) + `"`
}

// lookup finds an attribute case-insensitively.
func lookup(ad Ad, name string) (string, bool) {
	if v, ok := ad[name]; ok {
		return v, true
	}
	for k, v := range ad {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// setAttr sets name in ad, replacing any differently-cased spelling.
func setAttr(ad Ad, name, value string) {
	for k := range ad {
		if k != name && strings.EqualFold(k, name) {
			delete(ad, k)
		}
	}
	ad[name] = value
}
