package jobqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Selector picks jobs as condor_rm/hold/release/q arguments do: all jobs,
// a cluster, one job, or an owner's jobs, optionally narrowed by a
// Constraint (the hook for ClassAd constraint expressions).
type Selector struct {
	All     bool   // every job
	Cluster int    // > 0: this cluster
	Proc    int    // with HasProc: this proc of Cluster
	HasProc bool   // Proc is meaningful
	Owner   string // non-empty: this owner's jobs
	// Statuses, when set, narrows the selection to the jobs in these
	// states (in the database, before any Constraint).
	Statuses []Status
	// Constraint, when set, must also accept the job (with its full ad).
	Constraint func(Job) bool
	// Filter narrows, in the database and through its indexes, the jobs
	// the Constraint is asked about. It must accept every job the
	// Constraint accepts (see Filter); without a Constraint it is
	// ignored, unless Exact.
	Filter Filter
	// Exact says the Filter alone selects: without a Constraint, it picks
	// exactly the jobs wanted, and no job's ad need be read to select it
	// (see Queue.RemoveEach and the other actions). A Constraint, when
	// set as well, must still accept the job.
	Exact bool
}

// AllJobs selects every job.
func AllJobs() Selector { return Selector{All: true} }

// ClusterJobs selects the jobs of a cluster.
func ClusterJobs(cluster int) Selector { return Selector{Cluster: cluster} }

// OneJob selects a single job.
func OneJob(id JobID) Selector { return Selector{Cluster: id.Cluster, Proc: id.Proc, HasProc: true} }

// OwnerJobs selects an owner's jobs.
func OwnerJobs(owner string) Selector { return Selector{Owner: owner} }

// ParseSelector parses a condor_rm-style argument: "cluster",
// "cluster.proc", or an owner name.
func ParseSelector(arg string) (Selector, error) {
	if arg == "" {
		return Selector{}, errors.New("empty job selector")
	}
	if arg[0] >= '0' && arg[0] <= '9' {
		if strings.Contains(arg, ".") {
			id, err := ParseJobID(arg)
			if err != nil {
				return Selector{}, err
			}
			return OneJob(id), nil
		}
		c, err := strconv.Atoi(arg)
		if err != nil || c <= 0 {
			return Selector{}, fmt.Errorf("cluster %q is not a positive integer", arg)
		}
		return ClusterJobs(c), nil
	}
	for _, r := range arg {
		if r == ' ' || r == '\t' || r == '"' {
			return Selector{}, fmt.Errorf("owner %q contains blanks or quotes", arg)
		}
	}
	return OwnerJobs(arg), nil
}

// String describes the selection.
func (s Selector) String() string {
	var parts []string
	if s.All {
		parts = append(parts, "all jobs")
	}
	if s.Cluster > 0 {
		if s.HasProc {
			parts = append(parts, fmt.Sprintf("job %d.%d", s.Cluster, s.Proc))
		} else {
			parts = append(parts, fmt.Sprintf("cluster %d", s.Cluster))
		}
	}
	if s.Owner != "" {
		parts = append(parts, "owner "+s.Owner)
	}
	if len(s.Statuses) > 0 {
		var sts []string
		for _, st := range s.Statuses {
			sts = append(sts, st.String())
		}
		parts = append(parts, "in state "+strings.Join(sts, " or "))
	}
	if s.Constraint != nil || s.Exact && !s.Filter.All() {
		parts = append(parts, "constraint")
	}
	return strings.Join(parts, ", ")
}

// where renders the selector as SQL over table alias t.
func (s Selector) where(t string, allowEmpty bool) (string, []any, error) {
	var conds []string
	var args []any
	if s.Cluster > 0 {
		conds = append(conds, t+".cluster = ?")
		args = append(args, s.Cluster)
		if s.HasProc {
			conds = append(conds, t+".proc = ?")
			args = append(args, s.Proc)
		}
	} else if s.HasProc || s.Cluster < 0 {
		return "", nil, fmt.Errorf("selector: proc %d without a valid cluster", s.Proc)
	}
	if s.Owner != "" {
		conds = append(conds, t+".owner = ?")
		args = append(args, s.Owner)
	}
	if len(s.Statuses) > 0 {
		if len(conds) == 0 && !s.All && !allowEmpty {
			return "", nil, errors.New("selector selects nothing: give a cluster, a job, an owner or all")
		}
		conds = append(conds, t+".status IN ("+strings.TrimSuffix(strings.Repeat("?,", len(s.Statuses)), ",")+")")
		for _, st := range s.Statuses {
			args = append(args, int(st))
		}
	}
	if len(conds) == 0 && !s.All && !allowEmpty {
		return "", nil, errors.New("selector selects nothing: give a cluster, a job, an owner or all")
	}
	if s.Constraint != nil || s.Exact {
		if f, fargs := s.Filter.sql(t); f != "" {
			conds = append(conds, "("+f+")")
			args = append(args, fargs...)
		}
	}
	if len(conds) == 0 {
		return "1", nil, nil
	}
	return strings.Join(conds, " AND "), args, nil
}

// exec runs a cached prepared statement in tx.
func (q *Queue) exec(ctx context.Context, tx *sql.Tx, text string, args ...any) (sql.Result, error) {
	st, err := q.stmt(ctx, tx, text)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// queryRow runs a cached prepared query in tx.
func (q *Queue) queryRow(ctx context.Context, tx *sql.Tx, text string, args ...any) *sql.Row {
	st, err := q.stmt(ctx, tx, text)
	if err != nil {
		return tx.QueryRowContext(ctx, text, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// load reads jobs matching sel (from table jobs) with attributes attrs
// (all when nil), ordered by cluster and proc.
func load(ctx context.Context, db querier, sel Selector, attrs []string, extraWhere string, extraArgs ...any) ([]Job, error) {
	w, args, err := sel.where("j", extraWhere != "")
	if err != nil {
		return nil, err
	}
	if extraWhere != "" {
		w = "(" + w + ") AND " + extraWhere
		args = append(args, extraArgs...)
	}
	jobsQ, clusterQ, procQ := loadQueries(w, "")
	rows, err := db.QueryContext(ctx, jobsQ, args...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	var jobs []Job
	index := map[JobID]int{}
	for rows.Next() {
		var j Job
		var entered int64
		if err := rows.Scan(&j.ID.Cluster, &j.ID.Proc, &j.Owner, &j.Status, &entered); err != nil {
			rows.Close()
			return nil, fmt.Errorf("job queue: %w", err)
		}
		j.EnteredStatus = time.Unix(entered, 0)
		j.Ad = Ad{}
		index[j.ID] = len(jobs)
		jobs = append(jobs, j)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	var nameArgs []any
	if attrs != nil {
		if len(attrs) == 0 {
			return jobs, nil
		}
		_, clusterQ, procQ = loadQueries(w, " AND a.name IN ("+strings.TrimSuffix(strings.Repeat("?,", len(attrs)), ",")+")")
		for _, a := range attrs {
			nameArgs = append(nameArgs, a)
		}
	}
	lowers := make([]map[string]string, len(jobs)) // lower-case name -> spelling used
	// The jobs of one cluster, whole (Get, a move to the history): its ad
	// as kept, or read and kept.
	kept, _ := db.(keepsClusterAds)
	if one := jobs[0].ID.Cluster; kept != nil && attrs == nil && jobs[len(jobs)-1].ID.Cluster == one {
		ca, gen := kept.clusterAds().get(one)
		if ca == nil {
			cas, err := readClusterAds(ctx, db, clusterQ, args)
			if err != nil {
				return nil, err
			}
			ca = newClusterAd(cas[one])
			kept.clusterAds().put(one, gen, ca)
		}
		for i := range jobs {
			ca.fill(&jobs[i], &lowers[i])
		}
	} else {
		clusterAds, err := readClusterAds(ctx, db, clusterQ, append(append([]any{}, args...), nameArgs...))
		if err != nil {
			return nil, err
		}
		for i := range jobs {
			lowers[i] = map[string]string{}
			for _, kv := range clusterAds[jobs[i].ID.Cluster] {
				jobs[i].Ad[kv[0]] = kv[1]
				lowers[i][strings.ToLower(kv[0])] = kv[0]
			}
		}
	}
	// Job ads override.
	rows, err = db.QueryContext(ctx, procQ, append(append([]any{}, args...), nameArgs...)...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	if err := overrideAttrs(rows, jobs, index, lowers); err != nil {
		return nil, err
	}
	return jobs, nil
}

// readClusterAds runs load's query of cluster ads, q with args: each
// cluster's attributes in the order read.
func readClusterAds(ctx context.Context, db querier, q string, args []any) (map[int][][2]string, error) {
	clusterAds := map[int][][2]string{}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c int
		var n, v string
		if err := rows.Scan(&c, &n, &v); err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		clusterAds[c] = append(clusterAds[c], [2]string{n, v})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	return clusterAds, nil
}

// keepsClusterAds is a querier of a queue's that keeps its cluster ads
// (see clusterAds): load uses them for the jobs of one cluster.
type keepsClusterAds interface {
	clusterAds() *clusterAds
}

func (p preparedReads) clusterAds() *clusterAds { return &p.q.clusters }
func (t txReads) clusterAds() *clusterAds       { return &t.q.clusters }

// loadQueries are load's three queries for the jobs where w holds: the
// jobs, their clusters' attributes and their own, the attributes' names
// restricted by nameCond.
func loadQueries(w, nameCond string) (jobs, cluster, proc string) {
	return `SELECT j.cluster, j.proc, j.owner, j.status, j.entered FROM jobs j WHERE ` + w + ` ORDER BY j.cluster, j.proc`,
		`SELECT a.cluster, a.name, a.value FROM cluster_attrs a WHERE a.cluster IN (SELECT DISTINCT j.cluster FROM jobs j WHERE ` + w + `)` + nameCond,
		`SELECT a.cluster, a.proc, a.name, a.value FROM proc_attrs a JOIN jobs j ON j.cluster = a.cluster AND j.proc = a.proc WHERE ` + w + nameCond
}

// oneJobQueries are load's queries of one job with all its attributes
// (the same text for every job).
func oneJobQueries() ([]string, error) {
	w, _, err := OneJob(JobID{Cluster: 1}).where("j", false)
	if err != nil {
		return nil, err
	}
	jobs, cluster, proc := loadQueries(w, "")
	return []string{jobs, cluster, proc}, nil
}

// txReads runs load's queries in tx, those prepared at Open (oneJobQueries
// among them) without preparing them again.
type txReads struct {
	q  *Queue
	tx *sql.Tx
}

// QueryContext runs text with args in the transaction.
func (t txReads) QueryContext(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	st, err := t.q.stmt(ctx, t.tx, text)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func filter(jobs []Job, sel Selector) []Job {
	if sel.Constraint == nil {
		return jobs
	}
	out := jobs[:0]
	for _, j := range jobs {
		if sel.Constraint(j) {
			out = append(out, j)
		}
	}
	return out
}

// Query returns the queued jobs sel picks, with the attributes named in
// attrs (all attributes when attrs is nil), ordered by cluster and proc.
// A Constraint sees the full ad; the projection applies afterwards.
func (q *Queue) Query(ctx context.Context, sel Selector, attrs []string) ([]Job, error) {
	if sel.Constraint == nil {
		return load(ctx, q.r, sel, attrs, "")
	}
	jobs, err := load(ctx, q.r, sel, nil, "")
	if err != nil {
		return nil, err
	}
	jobs = filter(jobs, sel)
	if attrs != nil {
		for i := range jobs {
			proj := Ad{}
			for _, a := range attrs {
				if v, ok := lookup(jobs[i].Ad, a); ok {
					proj[a] = v
				}
			}
			jobs[i].Ad = proj
		}
	}
	return jobs, nil
}

// Get returns one queued job with all its attributes; the error wraps
// ErrNotFound when it is not in the queue.
func (q *Queue) Get(ctx context.Context, id JobID) (Job, error) {
	jobs, err := load(ctx, preparedReads{q}, OneJob(id), nil, "")
	if err != nil {
		return Job{}, err
	}
	if len(jobs) == 0 {
		return Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return jobs[0], nil
}

// Idle returns every idle job with its full ad, oldest cluster first, for
// the negotiator.
func (q *Queue) Idle(ctx context.Context) ([]Job, error) {
	return load(ctx, q.r, Selector{}, nil, "j.status = ?", int(Idle))
}

// IdleClusters returns the clusters that have idle jobs, in order.
func (q *Queue) IdleClusters(ctx context.Context) ([]int, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT DISTINCT cluster FROM jobs WHERE status = ? ORDER BY cluster`, int(Idle))
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var c int
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CountsByOwner returns the number of queued jobs of each owner in each
// state, from the counts the database keeps (a row per cluster, owner
// and state, not per job).
func (q *Queue) CountsByOwner(ctx context.Context) (map[string]map[Status]int, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT owner, status, SUM(n) FROM job_counts GROUP BY owner, status`)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	defer rows.Close()
	out := map[string]map[Status]int{}
	for rows.Next() {
		var o string
		var s Status
		var n int
		if err := rows.Scan(&o, &s, &n); err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		if out[o] == nil {
			out[o] = map[Status]int{}
		}
		out[o][s] = n
	}
	return out, rows.Err()
}

// Counts returns the number of queued jobs in each state.
func (q *Queue) Counts(ctx context.Context) (map[Status]int, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT status, SUM(n) FROM job_counts GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	defer rows.Close()
	out := map[Status]int{}
	for rows.Next() {
		var s Status
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		out[s] = n
	}
	return out, rows.Err()
}

// Change is one state change for Apply.
type Change struct {
	ID    JobID
	To    Status
	Attrs Ad // attributes set in the same transaction (e.g. ExitCode, RemoteHost)
	// Keep leaves a job that completes in the queue, in state Completed,
	// instead of moving it to the history (the job's LeaveJobInQueue);
	// Retire moves it later.
	Keep bool
}

// protected attributes cannot be set through SetAttrs or Change.Attrs.
var protected = map[string]bool{"clusterid": true, "procid": true, "jobstatus": true, "owner": true}

// Transition moves a job to state to, setting attrs in the same
// transaction. It refuses changes HTCondor does not make (a
// *TransitionError) and jobs not in the queue (ErrNotFound). It maintains
// JobStatus, LastJobStatus, EnteredCurrentStatus, NumJobStarts,
// JobStartDate, JobCurrentStartDate, CompletionDate, NumHolds and the hold
// reason attributes; Completed and Removed jobs move to the history.
func (q *Queue) Transition(ctx context.Context, id JobID, to Status, attrs Ad) error {
	return q.Apply(ctx, []Change{{ID: id, To: to, Attrs: attrs}})
}

// Apply makes several state changes at once: all or none. The changes
// are a unit of the commit group (group.go): changes applied from many
// goroutines at once (jobs ending and starting) share a commit.
func (q *Queue) Apply(ctx context.Context, changes []Change) error {
	return q.grouped(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, c := range changes {
			if _, err := q.change(ctx, tx, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// change makes one state change in tx; other reports a job moved to the
// history with an OtherJobRemoveRequirements.
func (q *Queue) change(ctx context.Context, tx *sql.Tx, c Change) (other bool, err error) {
	var from Status
	var starts, holds int
	err = q.queryRow(ctx, tx, `SELECT status, num_starts, num_holds FROM jobs WHERE cluster = ? AND proc = ?`, c.ID.Cluster, c.ID.Proc).Scan(&from, &starts, &holds)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("job %s: %w", c.ID, ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("job queue: job %s: %w", c.ID, err)
	}
	if !CanTransition(from, c.To) {
		return false, &TransitionError{ID: c.ID, From: from, To: c.To}
	}
	for k := range c.Attrs {
		if protected[strings.ToLower(k)] {
			return false, fmt.Errorf("job %s: attribute %s cannot be set directly", c.ID, k)
		}
	}
	now := q.now().Unix()
	var held Ad
	if from == Held {
		// Keep the last hold's reason under Last*, as HTCondor does.
		st, err := q.stmt(ctx, tx, holdAttrsSQL)
		if err != nil {
			return false, err
		}
		rows, err := st.QueryContext(ctx, c.ID.Cluster, c.ID.Proc)
		if err != nil {
			return false, fmt.Errorf("job queue: job %s: %w", c.ID, err)
		}
		held = Ad{}
		for rows.Next() {
			var n, v string
			if err := rows.Scan(&n, &v); err != nil {
				rows.Close()
				return false, fmt.Errorf("job queue: job %s: %w", c.ID, err)
			}
			held[n] = v
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return false, fmt.Errorf("job queue: job %s: %w", c.ID, err)
		}
	}
	set, del, starts, holds := transitionAttrs(c, from, starts, holds, held, now)
	if _, err := q.exec(ctx, tx, `UPDATE jobs SET status = ?, entered = ?, num_starts = ?, num_holds = ? WHERE cluster = ? AND proc = ?`,
		int(c.To), now, starts, holds, c.ID.Cluster, c.ID.Proc); err != nil {
		return false, fmt.Errorf("job queue: job %s: %w", c.ID, err)
	}
	for _, n := range del {
		if _, err := q.exec(ctx, tx, deleteAttrSQL, c.ID.Cluster, c.ID.Proc, n); err != nil {
			return false, fmt.Errorf("job queue: job %s: %w", c.ID, err)
		}
	}
	if err := q.upsertAttrs(ctx, tx, c.ID, set); err != nil {
		return false, err
	}
	if err := q.record(ctx, tx, c.ID, from, c.To); err != nil {
		return false, err
	}
	if c.To.Terminal() && !(c.Keep && c.To == Completed) {
		return q.toHistory(ctx, tx, c.ID, c.To, now)
	}
	return false, nil
}

// transitionAttrs returns what a job's change c from state from sets
// (set) and deletes (del) among its own attributes, and its new counts of
// starts and holds: the state attributes HTCondor maintains, those of a
// hold, the last hold's reason under Last* when it leaves Held (held: its
// own HoldReason, HoldReasonCode and HoldReasonSubCode), and c.Attrs.
func transitionAttrs(c Change, from Status, starts, holds int, held Ad, now int64) (set Ad, del []string, _, _ int) {
	nowS := strconv.FormatInt(now, 10)
	set = Ad{
		"JobStatus":            strconv.Itoa(int(c.To)),
		"LastJobStatus":        strconv.Itoa(int(from)),
		"EnteredCurrentStatus": nowS,
	}
	switch c.To {
	case Running:
		if from != Suspended {
			starts++
			set["NumJobStarts"] = strconv.Itoa(starts)
			set["JobRunCount"] = strconv.Itoa(starts)
			set["JobCurrentStartDate"] = nowS
			if starts == 1 {
				set["JobStartDate"] = nowS
			}
		}
	case Completed:
		set["CompletionDate"] = nowS
	case Held:
		holds++
		set["NumHolds"] = strconv.Itoa(holds)
		if _, ok := lookup(c.Attrs, "HoldReason"); !ok {
			set["HoldReason"] = quote("Unspecified")
		}
		if _, ok := lookup(c.Attrs, "HoldReasonCode"); !ok {
			set["HoldReasonCode"] = "0"
		}
		if _, ok := lookup(c.Attrs, "HoldReasonSubCode"); !ok {
			set["HoldReasonSubCode"] = "0"
		}
	}
	if from == Held {
		for n, v := range held {
			set["Last"+canonicalHold(n)] = v
		}
		del = append(del, "HoldReason", "HoldReasonCode", "HoldReasonSubCode")
	}
	if (from == Running || from == Suspended) && (c.To == Idle || c.To == Held) {
		// As HTCondor's schedd: a job that runs nowhere has no
		// RemoteHost; LastRemoteHost says where it last ran.
		del = append(del, "RemoteHost")
	}
	for k, v := range c.Attrs {
		setAttr(set, k, v)
	}
	return set, del, starts, holds
}

func canonicalHold(n string) string {
	switch strings.ToLower(n) {
	case "holdreasoncode":
		return "HoldReasonCode"
	case "holdreasonsubcode":
		return "HoldReasonSubCode"
	}
	return "HoldReason"
}

func (q *Queue) upsertAttrs(ctx context.Context, tx *sql.Tx, id JobID, attrs Ad) error {
	if len(attrs) == 0 {
		return nil
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	// A few statements of many rows set them, in the order of their
	// names, as one statement each would.
	args := make([]any, 0, 4*len(names))
	for _, k := range names {
		args = append(args, id.Cluster, id.Proc, k, attrs[k])
	}
	if err := q.insertRows(ctx, tx, upsertProcAttrs, args); err != nil {
		return fmt.Errorf("job queue: job %s attributes %s to %s: %w", id, names[0], names[len(names)-1], err)
	}
	return nil
}

// toHistory moves a job's merged ad to the history table; other reports
// that the ad has an OtherJobRemoveRequirements.
func (q *Queue) toHistory(ctx context.Context, tx *sql.Tx, id JobID, status Status, now int64) (other bool, err error) {
	job, err := q.loadOne(ctx, tx, id)
	if err != nil {
		return false, err
	}
	return q.moveToHistory(ctx, tx, job, status, now)
}

// loadOne reads job id in tx, all its attributes.
func (q *Queue) loadOne(ctx context.Context, tx *sql.Tx, id JobID) (*Job, error) {
	jobs, err := load(ctx, txReads{q, tx}, OneJob(id), nil, "")
	if err != nil {
		return nil, err
	}
	if len(jobs) != 1 {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return &jobs[0], nil
}

// moveToHistory is toHistory of a job read in tx.
func (q *Queue) moveToHistory(ctx context.Context, tx *sql.Tx, job *Job, status Status, now int64) (other bool, err error) {
	id := job.ID
	ad, err := json.Marshal(job.Ad)
	if err != nil {
		return false, fmt.Errorf("job queue: job %s: %w", id, err)
	}
	var seq int64
	if err := q.queryRow(ctx, tx, `UPDATE meta SET value = value + 1 WHERE key = 'history_seq' RETURNING value`).Scan(&seq); err != nil {
		return false, fmt.Errorf("job queue: %w", err)
	}
	if _, err := q.exec(ctx, tx, `INSERT OR REPLACE INTO history(cluster, proc, owner, status, completed, seq, ad) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		id.Cluster, id.Proc, job.Owner, int(status), now, seq, string(ad)); err != nil {
		return false, fmt.Errorf("job queue: job %s to history: %w", id, err)
	}
	for _, stmt := range []string{
		`DELETE FROM proc_attrs WHERE cluster = ? AND proc = ?`,
		`DELETE FROM jobs WHERE cluster = ? AND proc = ?`,
	} {
		if _, err := q.exec(ctx, tx, stmt, id.Cluster, id.Proc); err != nil {
			return false, fmt.Errorf("job queue: job %s: %w", id, err)
		}
	}
	res, err := q.exec(ctx, tx, `DELETE FROM cluster_attrs WHERE cluster = ? AND NOT EXISTS (SELECT 1 FROM jobs WHERE cluster = ?)`, id.Cluster, id.Cluster)
	if err != nil {
		return false, fmt.Errorf("job queue: cluster %d: %w", id.Cluster, err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		q.clusters.changed(id.Cluster)
	}
	_, other = lookup(job.Ad, "OtherJobRemoveRequirements")
	return other, nil
}

// SetAttrs sets attributes of a queued job in one transaction; an empty
// value deletes the job's own value (falling back to the cluster's, if
// any). ClusterId, ProcId, JobStatus and Owner cannot be set this way.
func (q *Queue) SetAttrs(ctx context.Context, id JobID, attrs Ad) error {
	for k := range attrs {
		if protected[strings.ToLower(k)] {
			return fmt.Errorf("job %s: attribute %s cannot be set directly (use Transition for JobStatus)", id, k)
		}
		if k == "" || strings.ContainsAny(k, " \t\n=") {
			return fmt.Errorf("job %s: invalid attribute name %q", id, k)
		}
	}
	return q.tx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE cluster = ? AND proc = ?`, id.Cluster, id.Proc).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %s: %w", id, ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("job queue: job %s: %w", id, err)
		}
		set := Ad{}
		for k, v := range attrs {
			if strings.TrimSpace(v) == "" {
				if _, err := tx.ExecContext(ctx, `DELETE FROM proc_attrs WHERE cluster = ? AND proc = ? AND name = ?`, id.Cluster, id.Proc, k); err != nil {
					return fmt.Errorf("job queue: job %s: %w", id, err)
				}
				continue
			}
			set[k] = v
		}
		return q.upsertAttrs(ctx, tx, id, set)
	})
}

// Changed reports a job an action changed and the state it was in.
type Changed struct {
	ID   JobID
	From Status
	// OtherRemove is set when the job, removed, has an
	// OtherJobRemoveRequirements: the caller removes the jobs it selects.
	OtherRemove bool
	// Ad is, for a job the action moved to the history, its ad as the
	// history keeps it, or only its attributes the Outbox's Attrs names
	// (set by the Each forms, for a batch's events; nil otherwise).
	Ad Ad
}

// ActBatch is how many jobs an action on many jobs (Remove, Hold,
// Release, and their Each forms) changes in one transaction: each batch
// commits by itself, so that neither memory nor the write-ahead log grows
// with the number of jobs acted on.
const ActBatch = 1000

// act applies to to every job sel picks whose state allows it and
// returns them all: actEach, collected.
func (q *Queue) act(ctx context.Context, sel Selector, to Status, attrs func(Job) Ad) ([]Changed, error) {
	var out []Changed
	err := q.actEach(ctx, sel, to, attrs, ActBatch, func(batch []Changed) error {
		for _, c := range batch {
			c.Ad = nil // memory that grows with the jobs acted on
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// actEach applies to to every job sel picks whose state allows it, a
// batch of at most size jobs sel picks per transaction, in cluster and
// proc order, and calls done with each batch's changes once it
// committed (an error of done ends the action). Jobs already in state to
// are skipped. Each batch is whole by itself: a job is changed with its
// outbox record and its history, or not at all, as HTCondor's schedd
// acts job by job; an action that fails midway leaves the batches before
// done. The error wraps ErrNotFound when sel picks no job at all.
func (q *Queue) actEach(ctx context.Context, sel Selector, to Status, attrs func(Job) Ad, size int, done func([]Changed) error) error {
	if size <= 0 {
		size = ActBatch
	}
	if _, _, err := sel.where("j", false); err != nil {
		return err
	}
	var proj []string
	if sel.Constraint == nil {
		proj = []string{}
	}
	after := JobID{Cluster: -1}
	found := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var out []Changed
		var last JobID
		n := 0
		err := q.tx(ctx, func(tx *sql.Tx) error {
			out = out[:0]
			jobs, err := q.pageIn(ctx, tx, sel, proj, after, size)
			if err != nil {
				return err
			}
			n = len(jobs)
			if n == 0 {
				return nil
			}
			last = jobs[n-1].ID
			var cs []Change
			for _, j := range filter(jobs, sel) {
				found = true
				if j.Status == to || !CanTransition(j.Status, to) {
					continue
				}
				cs = append(cs, Change{ID: j.ID, To: to, Attrs: attrs(j)})
			}
			out, err = q.changeBatch(ctx, tx, cs)
			return err
		})
		if err != nil {
			return err
		}
		if len(out) > 0 {
			if err := done(out); err != nil {
				return err
			}
		}
		if n < size {
			break
		}
		after = last
	}
	if !found {
		return fmt.Errorf("%s: %w", sel, ErrNotFound)
	}
	return nil
}

// Remove removes the jobs sel picks (moving them to the history with
// RemoveReason) and returns them with their previous state; the caller
// stops those that were running.
func (q *Queue) Remove(ctx context.Context, sel Selector, reason string) ([]Changed, error) {
	return q.act(ctx, sel, Removed, removeAttrs(reason))
}

// RemoveEach is Remove a batch at a time (see ActBatch): done is called
// with each batch's changes once it committed.
func (q *Queue) RemoveEach(ctx context.Context, sel Selector, reason string, done func([]Changed) error) error {
	return q.actEach(ctx, sel, Removed, removeAttrs(reason), ActBatch, done)
}

func removeAttrs(reason string) func(Job) Ad {
	return func(Job) Ad { return Ad{"RemoveReason": quote(reason)} }
}

// Hold puts the jobs sel picks on hold with the given reason and codes
// (HTCondor's HoldReasonCode, e.g. 1 for a user hold) and returns those it
// changed; the caller vacates those that were running.
func (q *Queue) Hold(ctx context.Context, sel Selector, reason string, code, subcode int) ([]Changed, error) {
	return q.act(ctx, sel, Held, holdAttrs(reason, code, subcode))
}

// HoldEach is Hold a batch at a time (see ActBatch).
func (q *Queue) HoldEach(ctx context.Context, sel Selector, reason string, code, subcode int, done func([]Changed) error) error {
	return q.actEach(ctx, sel, Held, holdAttrs(reason, code, subcode), ActBatch, done)
}

// HoldWith holds job id with reason, code and subcode, setting attrs in
// the same transaction: a job that ran to its end and that its
// OnExitHold holds keeps how it exited (ExitCode, ExitBySignal, ...), for
// its policies (periodic_release) and its owner to read.
func (q *Queue) HoldWith(ctx context.Context, id JobID, reason string, code, subcode int, attrs Ad) error {
	set := holdAttrs(reason, code, subcode)(Job{})
	for k, v := range attrs {
		if _, ok := lookup(set, k); !ok {
			set[k] = v
		}
	}
	return q.Transition(ctx, id, Held, set)
}

func holdAttrs(reason string, code, subcode int) func(Job) Ad {
	return func(Job) Ad {
		return Ad{"HoldReason": quote(reason), "HoldReasonCode": strconv.Itoa(code), "HoldReasonSubCode": strconv.Itoa(subcode)}
	}
}

// Release returns the held jobs sel picks to Idle.
func (q *Queue) Release(ctx context.Context, sel Selector, reason string) ([]Changed, error) {
	return q.act(ctx, sel, Idle, releaseAttrs(reason))
}

// ReleaseEach is Release a batch at a time (see ActBatch).
func (q *Queue) ReleaseEach(ctx context.Context, sel Selector, reason string, done func([]Changed) error) error {
	return q.actEach(ctx, sel, Idle, releaseAttrs(reason), ActBatch, done)
}

func releaseAttrs(reason string) func(Job) Ad {
	return func(j Job) Ad {
		if j.Status != Held {
			return nil
		}
		return Ad{"ReleaseReason": quote(reason)}
	}
}

// HistoryQuery selects finished jobs.
type HistoryQuery struct {
	Sel    Selector // zero value: all finished jobs
	Limit  int      // at most this many (0: no limit)
	Oldest bool     // oldest first (default: most recent first, as condor_history)
	Attrs  []string // projection (nil: all attributes)
}

// History returns completed and removed jobs (see ScanHistory).
func (q *Queue) History(ctx context.Context, hq HistoryQuery) ([]Job, error) {
	var out []Job
	err := q.ScanHistory(ctx, hq, func(j Job) error {
		out = append(out, j)
		return nil
	})
	return out, err
}

// historyPage is how many finished jobs ScanHistory reads at a time,
// after the first scanFirst.
const historyPage = 500

// ScanHistory calls fn with each finished job hq selects, most recent
// first (or oldest first), with the attributes hq names, at most hq.Limit
// of them. It reads the history a page at a time and holds no read of the
// database while fn runs, so that neither its memory nor the write-ahead
// log grows with the history however slowly fn consumes. An error of fn
// ends the scan and is returned.
func (q *Queue) ScanHistory(ctx context.Context, hq HistoryQuery, fn func(Job) error) error {
	w, args, err := hq.Sel.where("h", true)
	if err != nil {
		return err
	}
	order, after := "DESC", "<"
	if hq.Oldest {
		order, after = "ASC", ">"
	}
	sent := 0
	var last *[2]int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page := historyPage
		if last == nil {
			// The first few at once, as Scan reads the queue.
			page = scanFirst
		}
		if hq.Limit > 0 && hq.Sel.Constraint == nil {
			page = min(page, hq.Limit-sent)
		}
		cond, cargs := w, args
		if last != nil {
			cond = "(" + w + ") AND (h.completed, h.seq) " + after + " (?, ?)"
			cargs = append(append([]any(nil), args...), last[0], last[1])
		}
		query := `SELECT h.cluster, h.proc, h.owner, h.status, h.completed, h.seq, h.ad FROM history h WHERE ` + cond +
			` ORDER BY h.completed ` + order + `, h.seq ` + order + ` LIMIT ` + strconv.Itoa(page)
		jobs, seqs, err := q.historyPage(ctx, query, cargs)
		if err != nil {
			return err
		}
		for i, j := range jobs {
			last = &[2]int64{j.EnteredStatus.Unix(), seqs[i]}
			if hq.Sel.Constraint != nil && !hq.Sel.Constraint(j) {
				continue
			}
			if hq.Attrs != nil {
				proj := Ad{}
				for _, a := range hq.Attrs {
					if v, ok := lookup(j.Ad, a); ok {
						proj[a] = v
					}
				}
				j.Ad = proj
			}
			if err := fn(j); err != nil {
				return err
			}
			if sent++; hq.Limit > 0 && sent >= hq.Limit {
				return nil
			}
		}
		if len(jobs) < page {
			return nil
		}
	}
}

// historyPage reads one page of ScanHistory, and the jobs' places in the
// history's order.
func (q *Queue) historyPage(ctx context.Context, query string, args []any) ([]Job, []int64, error) {
	rows, err := q.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("job queue: history: %w", err)
	}
	defer rows.Close()
	var jobs []Job
	var seqs []int64
	for rows.Next() {
		var j Job
		var completed, seq int64
		var ad string
		if err := rows.Scan(&j.ID.Cluster, &j.ID.Proc, &j.Owner, &j.Status, &completed, &seq, &ad); err != nil {
			return nil, nil, fmt.Errorf("job queue: history: %w", err)
		}
		j.EnteredStatus = time.Unix(completed, 0)
		if err := json.Unmarshal([]byte(ad), &j.Ad); err != nil {
			return nil, nil, fmt.Errorf("job queue: history of %s: %w", j.ID, err)
		}
		jobs = append(jobs, j)
		seqs = append(seqs, seq)
	}
	return jobs, seqs, rows.Err()
}

// PruneHistory deletes all but the keep most recently finished jobs from
// the history (as MAX_HISTORY_LOG bounds HTCondor's history file) and
// returns how many it deleted.
func (q *Queue) PruneHistory(ctx context.Context, keep int) (int, error) {
	if keep < 0 {
		return 0, fmt.Errorf("job queue: keep %d must not be negative", keep)
	}
	var n int64
	err := q.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM history WHERE (cluster, proc) NOT IN
			(SELECT cluster, proc FROM history ORDER BY completed DESC, seq DESC LIMIT ?)`, keep)
		if err != nil {
			return fmt.Errorf("job queue: pruning history: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// historyPruneBatch bounds the rows one transaction of PruneHistoryBytes
// deletes, so that the writers of the queue wait for it only briefly.
const historyPruneBatch = 2000

// HistoryMoves returns how many jobs have left the queue for the history
// since the queue was made: it changes only when one does.
func (q *Queue) HistoryMoves(ctx context.Context) (int64, error) {
	var n int64
	if err := q.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'history_seq'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("job queue: reading the history's sequence: %w", err)
	}
	return n, nil
}

// HistoryBytes returns the rows of the history and the bytes of their ads.
func (q *Queue) HistoryBytes(ctx context.Context) (rows, bytes int64, err error) {
	err = q.r.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(size), 0) FROM history_sizes INDEXED BY history_sizes_order`).Scan(&rows, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("job queue: measuring the history: %w", err)
	}
	return rows, bytes, nil
}

// PruneHistoryBytes deletes the least recently finished jobs from the
// history until the ads of those left take at most maxBytes, as
// MAX_HISTORY_LOG and MAX_HISTORY_ROTATIONS bound HTCondor's history
// files, and returns how many it deleted. It deletes in transactions of
// a few thousand rows.
func (q *Queue) PruneHistoryBytes(ctx context.Context, maxBytes int64) (int, error) {
	if maxBytes < 0 {
		return 0, fmt.Errorf("job queue: a history of %d bytes: want 0 or more", maxBytes)
	}
	// The newest row that does not fit: it and every older one go.
	var completed, seq int64
	err := q.r.QueryRowContext(ctx, `SELECT completed, seq FROM (
		SELECT completed, seq, sum(size) OVER (ORDER BY completed DESC, seq DESC ROWS UNBOUNDED PRECEDING) AS kept
		FROM history_sizes INDEXED BY history_sizes_order) WHERE kept > ? LIMIT 1`, maxBytes).Scan(&completed, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("job queue: pruning the history: %w", err)
	}
	total := 0
	for {
		var n int64
		err := q.tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM history WHERE (cluster, proc) IN (
				SELECT cluster, proc FROM history_sizes WHERE (completed, seq) <= (?, ?) ORDER BY completed, seq LIMIT ?)`,
				completed, seq, historyPruneBatch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("job queue: pruning the history: %w", err)
		}
		total += int(n)
		if n < historyPruneBatch {
			return total, nil
		}
	}
}

// overrideAttrs reads rows of (cluster, proc, name, value), the jobs' own
// attributes, over the cluster attributes jobs already hold: index finds a
// job by its ID, lowers[i] maps job i's attribute names in lower case to
// the spelling its ad uses, so that a job's own spelling replaces its
// cluster's. It closes rows.
func overrideAttrs(rows *sql.Rows, jobs []Job, index map[JobID]int, lowers []map[string]string) error {
	defer rows.Close()
	for rows.Next() {
		var id JobID
		var n, v string
		if err := rows.Scan(&id.Cluster, &id.Proc, &n, &v); err != nil {
			return fmt.Errorf("job queue: %w", err)
		}
		i, ok := index[id]
		if !ok {
			continue
		}
		ln := strings.ToLower(n)
		if old, ok := lowers[i][ln]; ok && old != n {
			delete(jobs[i].Ad, old)
		}
		lowers[i][ln] = n
		jobs[i].Ad[n] = v
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	return nil
}

// JobsOf returns the jobs ids name with all their attributes, each from
// the queue or, once it left, from the history; those in neither are
// missing from the map. It reads them in a few queries, for the events of
// a batch of changes (ActBatch), not one job at a time.
func (q *Queue) JobsOf(ctx context.Context, ids []JobID) (map[JobID]Job, error) {
	out := make(map[JobID]Job, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), 400)
		part := ids[:n]
		ids = ids[n:]
		args := make([]any, 0, 2*n)
		for _, id := range part {
			args = append(args, id.Cluster, id.Proc)
		}
		values := strings.TrimSuffix(strings.Repeat("(?,?),", n), ",")
		jobs, err := load(ctx, q.r, Selector{}, nil, "(j.cluster, j.proc) IN (VALUES "+values+")", args...)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			out[j.ID] = j
		}
		if len(jobs) == len(part) {
			continue
		}
		if err := q.historyOf(ctx, values, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// historyOf adds to out the history's jobs among the (cluster, proc)
// pairs of values and args that out does not have.
func (q *Queue) historyOf(ctx context.Context, values string, args []any, out map[JobID]Job) error {
	rows, err := q.r.QueryContext(ctx, `SELECT h.cluster, h.proc, h.owner, h.status, h.completed, h.ad FROM history h WHERE (h.cluster, h.proc) IN (VALUES `+values+`)`, args...)
	if err != nil {
		return fmt.Errorf("job queue: history: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var j Job
		var completed int64
		var ad string
		if err := rows.Scan(&j.ID.Cluster, &j.ID.Proc, &j.Owner, &j.Status, &completed, &ad); err != nil {
			return fmt.Errorf("job queue: history: %w", err)
		}
		if _, ok := out[j.ID]; ok {
			continue
		}
		j.EnteredStatus = time.Unix(completed, 0)
		if err := json.Unmarshal([]byte(ad), &j.Ad); err != nil {
			return fmt.Errorf("job queue: history of %s: %w", j.ID, err)
		}
		out[j.ID] = j
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("job queue: history: %w", err)
	}
	return nil
}
