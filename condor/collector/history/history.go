// Package history keeps the central manager's operational history in
// SQLite: each slot's state over time (a row when its State, Activity,
// RemoteUser or JobId changes, not at every update), each change of a
// daemon's configuration (knob, old and new value, who and when), and
// the records of the pondctl commands that changed the pool (ApplyRecord).
// It answers a period's slot timelines, the slot-hours each user had, the
// configuration changes and the applies.
//
// Recording never waits on the database: changes go through a bounded
// channel to one writer that commits them at most once a second; when the
// channel is full a change is dropped, counted and logged. Rows older than
// the retention, and the oldest beyond the row cap, are pruned in the
// background.
package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/condor/classad"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Defaults of Options.
const (
	DefaultRetention = 30 * 24 * time.Hour
	DefaultMaxRows   = 1_000_000
	DefaultQueue     = 4096
)

// Options configure a Store.
type Options struct {
	// Retention is how long rows are kept (POND_HISTORY_RETENTION,
	// default 30 days).
	Retention time.Duration
	// MaxRows caps the rows of each table, the apply records' too
	// (POND_HISTORY_MAX_ROWS,
	// default 1,000,000): the oldest beyond it are pruned.
	MaxRows int
	// Queue bounds the changes waiting for the writer (default 4096).
	Queue int
	// Flush is the writer's period (default 1s): one transaction at most
	// per period.
	Flush time.Duration
	// SnapshotInterval is how often at most a machine ad whose only
	// changes are Volatile attributes is snapshot
	// (POND_HISTORY_SNAPSHOT_INTERVAL, default 15m).
	SnapshotInterval time.Duration
	// SnapshotCoalesce is how often at most a slot's ad is snapshot
	// (default 5s; negative: at every material change): a change
	// within it of the last snapshot is held, each later one replacing
	// it, and the last is stored, with the time it was received, once
	// the period since the last snapshot has passed. An ad that stood
	// that long is always stored; one that changed again sooner (a
	// claim's jobs one after another) only as it stood at the end. The
	// slots' states (ObserveSlot) are recorded change by change either
	// way.
	SnapshotCoalesce time.Duration
	// SnapshotRetention is how long snapshots are kept
	// (POND_HISTORY_SNAPSHOT_RETENTION, default 7 days).
	SnapshotRetention time.Duration
	// SnapshotMaxBytes caps the snapshots' stored size
	// (POND_HISTORY_SNAPSHOT_MAX_BYTES, default 256 MiB): the oldest
	// beyond it are pruned.
	SnapshotMaxBytes int64
	// Prune is the pruner's period (default 10m).
	Prune  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// SlotState is one row of a slot's timeline: the state it entered at At.
type SlotState struct {
	At         time.Time `json:"at"`
	Slot       string    `json:"slot"`
	Machine    string    `json:"machine"`
	State      string    `json:"state"`
	Activity   string    `json:"activity"`
	RemoteUser string    `json:"remote_user,omitempty"`
	JobID      string    `json:"job_id,omitempty"`
}

// ConfigChange is one knob of a daemon's configuration changing.
type ConfigChange struct {
	At   time.Time `json:"at"`
	Node string    `json:"node"`
	Knob string    `json:"knob"`
	Old  string    `json:"old"`
	New  string    `json:"new"`
	Who  string    `json:"who"`
}

// UserUsage is the slot time a user's jobs held over a period.
type UserUsage struct {
	User        string  `json:"user"`
	SlotSeconds float64 `json:"slot_seconds"`
}

// Query selects a period of the history.
type Query struct {
	Since, Until time.Time // zero Until: now
	Machine      string    // one machine's (or slot's) rows; "" every one
	Limit        int       // at most this many rows of each kind (default 10,000)
	// Snapshots asks for the machine ads' snapshots instead of the
	// states and configuration changes: those taken in the period, or
	// with At the pool as it was at At (each slot's last snapshot at or
	// before it).
	Snapshots bool
	At        time.Time
	// ConfigOnly asks for the configuration changes alone.
	ConfigOnly bool
	// Match, when set, keeps only the rows whose ad (SlotState.Ad,
	// ConfigChange.Ad) it accepts, such as a ClassAd constraint's; the
	// limit counts the rows it kept.
	Match func(*classad.Ad) bool
}

// Report is the history of a period.
type Report struct {
	Since  time.Time      `json:"since"`
	Until  time.Time      `json:"until"`
	Slots  []SlotState    `json:"slots"`
	Users  []UserUsage    `json:"users"`
	Config []ConfigChange `json:"config"`
	// Applies are the records of the pondctl commands that changed the
	// pool (an apply, a destroy), as their central manager received them;
	// none when the query names a machine.
	Applies []ApplyRecord `json:"applies"`
	// Snapshots are the machine ads' snapshots of a Snapshots query.
	Snapshots []Snapshot `json:"snapshots,omitempty"`
	Dropped   int64      `json:"dropped,omitempty"`
	// Truncated says that the period holds more rows of a kind than the
	// query's limit: the first ones are shown.
	Truncated bool `json:"truncated,omitempty"`
}

// Ad is the row as a ClassAd, which a constraint selects: MyType
// "SlotState", Name (the slot), Machine, State, Activity, RemoteUser,
// JobId, and EnteredCurrentState (Unix seconds), as in a slot's own ad.
func (st SlotState) Ad() *classad.Ad {
	ad := classad.NewAd()
	ad.SetString("MyType", "SlotState")
	ad.SetString("Name", st.Slot)
	ad.SetString("Machine", st.Machine)
	ad.SetString("State", st.State)
	ad.SetString("Activity", st.Activity)
	if st.RemoteUser != "" {
		ad.SetString("RemoteUser", st.RemoteUser)
	}
	if st.JobID != "" {
		ad.SetString("JobId", st.JobID)
	}
	ad.SetInt("EnteredCurrentState", st.At.Unix())
	return ad
}

// Ad is the change as a ClassAd, which a constraint selects: MyType
// "ConfigChange", Machine and Name (the node), Knob, OldValue, NewValue,
// Who, and ChangeTime (Unix seconds).
func (c ConfigChange) Ad() *classad.Ad {
	ad := classad.NewAd()
	ad.SetString("MyType", "ConfigChange")
	ad.SetString("Name", c.Node)
	ad.SetString("Machine", c.Node)
	ad.SetString("Knob", c.Knob)
	ad.SetString("OldValue", c.Old)
	ad.SetString("NewValue", c.New)
	ad.SetString("Who", c.Who)
	ad.SetInt("ChangeTime", c.At.Unix())
	return ad
}

type event struct {
	slot *SlotState
	conf *ConfigChange
	snap *Snapshot
	hash string // of snap: "material:full" (snapshot.go)
	node *nodeConfig
	at   time.Time // of node
	// apply is the record of a pondctl command that changed the pool.
	apply *ApplyRecord
}

type slotKey struct{ state, activity, user, job string }

// Store is the history database. It is safe for concurrent use.
type Store struct {
	opts    Options
	path    string
	w, r    *sql.DB
	ch      chan event
	dropped atomic.Int64

	mu    sync.Mutex
	last  map[string]slotKey  // slot -> the state last recorded
	snaps map[string]snapMark // slot -> its last snapshot
	// held are the snapshots waiting for their slot's SnapshotCoalesce
	// to pass, at most one a slot (snapshot.go).
	held map[string]event
	// configs holds the hash of each node's configuration last recorded.
	configs map[string]string

	cancel context.CancelFunc
	done   chan struct{}
	// enc encodes machine ad snapshots; run's goroutine alone uses it.
	enc adEncoder
}

const schema = `
CREATE TABLE IF NOT EXISTS slot_states (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	at INTEGER NOT NULL,
	slot TEXT NOT NULL,
	machine TEXT NOT NULL,
	state TEXT NOT NULL,
	activity TEXT NOT NULL,
	remote_user TEXT NOT NULL,
	job_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS slot_states_at ON slot_states(at);
CREATE INDEX IF NOT EXISTS slot_states_slot ON slot_states(slot, at);
CREATE TABLE IF NOT EXISTS config_changes (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	at INTEGER NOT NULL,
	node TEXT NOT NULL,
	knob TEXT NOT NULL,
	old TEXT NOT NULL,
	new TEXT NOT NULL,
	who TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS config_changes_at ON config_changes(at);
CREATE TABLE IF NOT EXISTS node_configs (
	node TEXT PRIMARY KEY,
	hash TEXT NOT NULL,
	text TEXT NOT NULL,
	at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS machine_snapshots (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	at INTEGER NOT NULL,
	name TEXT NOT NULL,
	machine TEXT NOT NULL,
	hash TEXT NOT NULL,
	ad BLOB
);
CREATE INDEX IF NOT EXISTS machine_snapshots_at ON machine_snapshots(at);
CREATE INDEX IF NOT EXISTS machine_snapshots_name ON machine_snapshots(name, at);
CREATE TABLE IF NOT EXISTS apply_records (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	at INTEGER NOT NULL,
	time INTEGER NOT NULL,
	serial INTEGER NOT NULL,
	command TEXT NOT NULL,
	user TEXT NOT NULL,
	host TEXT NOT NULL,
	pond_version TEXT NOT NULL,
	subject TEXT NOT NULL,
	adds INTEGER NOT NULL,
	changes_n INTEGER NOT NULL,
	removes INTEGER NOT NULL,
	omitted INTEGER NOT NULL,
	changes TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS apply_records_at ON apply_records(at);
`

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + q.Encode()
}

// orDefault sets *v to def when *v is zero or negative: an option left
// unset.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Open opens (creating if needed) the history database at path and
// starts its writer and pruner; Close stops them.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	orDefault(&opts.Retention, DefaultRetention)
	orDefault(&opts.MaxRows, DefaultMaxRows)
	orDefault(&opts.Queue, DefaultQueue)
	orDefault(&opts.Flush, time.Second)
	orDefault(&opts.SnapshotInterval, DefaultSnapshotInterval)
	if opts.SnapshotCoalesce == 0 {
		opts.SnapshotCoalesce = DefaultSnapshotCoalesce
	}
	orDefault(&opts.SnapshotRetention, DefaultSnapshotRetention)
	orDefault(&opts.SnapshotMaxBytes, DefaultSnapshotMaxBytes)
	orDefault(&opts.Prune, 10*time.Minute)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if _, err := w.ExecContext(ctx, schema); err != nil {
		w.Close()
		return nil, fmt.Errorf("history %s: creating schema: %w", path, err)
	}
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		w.Close()
		return nil, fmt.Errorf("history %s: WAL mode not available (journal_mode %q): %v", path, mode, err)
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	r.SetMaxOpenConns(2)
	s := &Store{opts: opts, path: path, w: w, r: r, ch: make(chan event, opts.Queue), last: map[string]slotKey{}, snaps: map[string]snapMark{}, held: map[string]event{}, configs: map[string]string{}, done: make(chan struct{})}
	// The state each slot was last recorded in, so that a restart records
	// no change that is none.
	rows, err := w.QueryContext(ctx, `SELECT slot, state, activity, remote_user, job_id FROM slot_states
		WHERE id IN (SELECT MAX(id) FROM slot_states GROUP BY slot)`)
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("history %s: reading the last states: %w", path, err)
	}
	for rows.Next() {
		var slot string
		var k slotKey
		if err := rows.Scan(&slot, &k.state, &k.activity, &k.user, &k.job); err != nil {
			rows.Close()
			s.closeDBs()
			return nil, fmt.Errorf("history %s: reading the last states: %w", path, err)
		}
		s.last[slot] = k
	}
	rows.Close()
	if err := s.loadConfigHashes(ctx); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("history %s: reading the nodes' configurations: %w", path, err)
	}
	if err := s.loadSnapMarks(ctx); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("history %s: reading the last snapshots: %w", path, err)
	}
	if err := s.prune(ctx); err != nil {
		opts.Logger.Warn("history: pruning", "path", path, "err", err)
	}
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.run(run)
	return s, nil
}

func (s *Store) closeDBs() {
	s.r.Close()
	s.w.Close()
}

// Close writes what is queued and closes the database.
func (s *Store) Close() error {
	s.cancel()
	<-s.done
	return errors.Join(s.r.Close(), s.w.Close())
}

// Dropped returns how many changes were dropped because the writer was
// behind.
func (s *Store) Dropped() int64 { return s.dropped.Load() }

func (s *Store) send(e event) {
	select {
	case s.ch <- e:
	default:
		if n := s.dropped.Add(1); n == 1 || n%1000 == 0 {
			s.opts.Logger.Warn("history: the writer is behind; changes dropped", "dropped", n)
		}
	}
}

// ObserveSlot records a slot's state if it differs from the state last
// recorded for it. It never blocks.
func (s *Store) ObserveSlot(st SlotState) {
	k := slotKey{st.State, st.Activity, st.RemoteUser, st.JobID}
	s.mu.Lock()
	prev, seen := s.last[st.Slot]
	if seen && prev == k {
		s.mu.Unlock()
		return
	}
	s.last[st.Slot] = k
	s.mu.Unlock()
	if st.At.IsZero() {
		st.At = s.opts.Now()
	}
	s.send(event{slot: &st})
}

// Gone records that a slot's ad left the collector (its machine shut down
// or was lost): it holds no claim from then on.
func (s *Store) Gone(slot, machine string) {
	s.ObserveSlot(SlotState{Slot: slot, Machine: machine, State: "Absent"})
	s.goneSnapshot(slot, machine)
}

// ObserveConfig records the changes of one reconfiguration. It never
// blocks.
func (s *Store) ObserveConfig(changes []ConfigChange) {
	now := s.opts.Now()
	for _, c := range changes {
		if c.At.IsZero() {
			c.At = now
		}
		s.send(event{conf: &c})
	}
}

func (s *Store) run(ctx context.Context) {
	defer close(s.done)
	flush := time.NewTicker(s.opts.Flush)
	defer flush.Stop()
	prune := time.NewTicker(s.opts.Prune)
	defer prune.Stop()
	// The changes wait in the channel between flushes, so the channel's
	// bound is the bound of what waits: one transaction takes them all.
	var batch []event
	write := func() {
		for len(batch) < cap(s.ch) {
			select {
			case e := <-s.ch:
				batch = append(batch, e)
				continue
			default:
			}
			break
		}
		if len(batch) == 0 {
			return
		}
		// A write that fails (a full disk) is logged; the batch is lost
		// rather than held without bound.
		if err := s.write(context.WithoutCancel(ctx), batch); err != nil {
			s.opts.Logger.Error("history: writing", "path", s.path, "rows", len(batch), "err", err)
		}
		batch = batch[:0]
	}
	for {
		select {
		case <-flush.C:
			s.releaseHeld(false)
			write()
		case <-prune.C:
			if err := s.prune(ctx); err != nil {
				s.opts.Logger.Warn("history: pruning", "path", s.path, "err", err)
			}
		case <-ctx.Done():
			// The ads held stood until now: stored before closing.
			s.releaseHeld(true)
			write()
			return
		}
	}
}

func (s *Store) write(ctx context.Context, batch []event) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, e := range batch {
		switch {
		case e.slot != nil:
			st := e.slot
			_, err = tx.ExecContext(ctx, `INSERT INTO slot_states(at, slot, machine, state, activity, remote_user, job_id) VALUES (?,?,?,?,?,?,?)`,
				st.At.UnixMilli(), st.Slot, st.Machine, st.State, st.Activity, st.RemoteUser, st.JobID)
		case e.conf != nil:
			c := e.conf
			_, err = tx.ExecContext(ctx, `INSERT INTO config_changes(at, node, knob, old, new, who) VALUES (?,?,?,?,?,?)`,
				c.At.UnixMilli(), c.Node, c.Knob, c.Old, c.New, c.Who)
		case e.snap != nil:
			err = s.writeSnapshot(ctx, tx, e.snap, e.hash)
		case e.node != nil:
			err = s.writeNodeConfig(ctx, tx, e.node, e)
		case e.apply != nil:
			err = writeApply(ctx, tx, e.apply)
		}
		if err != nil {
			return err
		}
	}
	return tx.Commit()
}

// prune deletes the rows older than the retention and the oldest beyond
// the row cap.
func (s *Store) prune(ctx context.Context) error {
	cut := s.opts.Now().Add(-s.opts.Retention).UnixMilli()
	for _, t := range []string{"slot_states", "config_changes", "apply_records"} {
		if _, err := s.w.ExecContext(ctx, `DELETE FROM `+t+` WHERE at < ?`, cut); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		if _, err := s.w.ExecContext(ctx, `DELETE FROM `+t+` WHERE id <= (SELECT MAX(id) FROM `+t+`) - ?`, s.opts.MaxRows); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
	}
	// A node's last configuration is kept while the node is among the
	// MaxRows most recently changed: it is the base of its next change.
	if _, err := s.w.ExecContext(ctx, `DELETE FROM node_configs WHERE node NOT IN (SELECT node FROM node_configs ORDER BY at DESC LIMIT ?)`, s.opts.MaxRows); err != nil {
		return fmt.Errorf("node_configs: %w", err)
	}
	return s.pruneSnapshots(ctx)
}

// Query returns the history of a period: the slots' states (with the
// state each was in when the period began), the slot time each user held,
// and the configuration changes.
func (s *Store) Query(ctx context.Context, q Query) (*Report, error) {
	if q.Until.IsZero() {
		q.Until = s.opts.Now()
	}
	if q.Limit <= 0 {
		q.Limit = 10_000
	}
	if q.Since.After(q.Until) {
		return nil, fmt.Errorf("history: the period begins (%s) after it ends (%s)", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	if q.Snapshots {
		rep := &Report{Since: q.Since, Until: q.Until, Slots: []SlotState{}, Users: []UserUsage{}, Config: []ConfigChange{}, Applies: []ApplyRecord{},
			Snapshots: []Snapshot{}, Dropped: s.Dropped()}
		if !q.At.IsZero() {
			rep.Since, rep.Until = q.At, q.At
		}
		return rep, s.querySnapshots(ctx, q, rep)
	}
	since, until := q.Since.UnixMilli(), q.Until.UnixMilli()
	// Without Match the database stops at the limit (one row past it
	// says there are more); with it, rows are read until Match kept
	// that many.
	sqlLimit := q.Limit + 1
	if q.Match != nil {
		sqlLimit = -1
	}
	slotLimit := sqlLimit
	if q.ConfigOnly {
		slotLimit = 0
	}
	match := `(? = '' OR machine = ? OR slot = ?)`
	rows, err := s.r.QueryContext(ctx, `SELECT at, slot, machine, state, activity, remote_user, job_id, id FROM slot_states
		WHERE id IN (SELECT MAX(id) FROM slot_states WHERE at < ? GROUP BY slot) AND `+match+`
		UNION ALL
		SELECT at, slot, machine, state, activity, remote_user, job_id, id FROM slot_states
		WHERE at >= ? AND at <= ? AND `+match+`
		ORDER BY 1, 8 LIMIT ?`, since, q.Machine, q.Machine, q.Machine, since, until, q.Machine, q.Machine, q.Machine, slotLimit)
	if err != nil {
		return nil, fmt.Errorf("history: slot states: %w", err)
	}
	rep := &Report{Since: q.Since, Until: q.Until, Slots: []SlotState{}, Config: []ConfigChange{}, Applies: []ApplyRecord{}, Dropped: s.Dropped()}
	for rows.Next() {
		var st SlotState
		var at, id int64
		if err := rows.Scan(&at, &st.Slot, &st.Machine, &st.State, &st.Activity, &st.RemoteUser, &st.JobID, &id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("history: slot states: %w", err)
		}
		st.At = time.UnixMilli(at)
		if q.Match != nil && !q.Match(st.Ad()) {
			continue
		}
		if len(rep.Slots) == q.Limit {
			rep.Truncated = true
			break
		}
		rep.Slots = append(rep.Slots, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: slot states: %w", err)
	}
	rep.Users = Usage(rep.Slots, q.Since, q.Until)
	crow, err := s.r.QueryContext(ctx, `SELECT at, node, knob, old, new, who FROM config_changes
		WHERE at >= ? AND at <= ? AND (? = '' OR node = ?) ORDER BY at, id LIMIT ?`, since, until, q.Machine, q.Machine, sqlLimit)
	if err != nil {
		return nil, fmt.Errorf("history: configuration changes: %w", err)
	}
	defer crow.Close()
	for crow.Next() {
		var c ConfigChange
		var at int64
		if err := crow.Scan(&at, &c.Node, &c.Knob, &c.Old, &c.New, &c.Who); err != nil {
			return nil, fmt.Errorf("history: configuration changes: %w", err)
		}
		c.At = time.UnixMilli(at)
		if q.Match != nil && !q.Match(c.Ad()) {
			continue
		}
		if len(rep.Config) == q.Limit {
			rep.Truncated = true
			break
		}
		rep.Config = append(rep.Config, c)
	}
	if err := crow.Err(); err != nil {
		return nil, fmt.Errorf("history: configuration changes: %w", err)
	}
	// The commands that changed the pool are the pool's, no machine's.
	if q.Machine == "" {
		if err := s.queryApplies(ctx, since, until, sqlLimit, q.Limit, q.Match, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// Usage is the slot time each user held in [since, until]: for each
// slot, every interval from one of its states to its next (or to until)
// in which the slot was Claimed by a RemoteUser, clipped to the period.
// states are in time order; the users come out most slot time first.
func Usage(states []SlotState, since, until time.Time) []UserUsage {
	bySlot := map[string][]SlotState{}
	for _, st := range states {
		bySlot[st.Slot] = append(bySlot[st.Slot], st)
	}
	sum := map[string]float64{}
	for _, tl := range bySlot {
		for i, st := range tl {
			if st.RemoteUser == "" || st.State != "Claimed" {
				continue
			}
			from, to := st.At, until
			if i+1 < len(tl) {
				to = tl[i+1].At
			}
			if from.Before(since) {
				from = since
			}
			if to.After(until) {
				to = until
			}
			if to.After(from) {
				sum[st.RemoteUser] += to.Sub(from).Seconds()
			}
		}
	}
	out := make([]UserUsage, 0, len(sum))
	for u, n := range sum {
		out = append(out, UserUsage{User: u, SlotSeconds: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SlotSeconds != out[j].SlotSeconds {
			return out[i].SlotSeconds > out[j].SlotSeconds
		}
		return out[i].User < out[j].User
	})
	return out
}
