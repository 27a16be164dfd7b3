package jobqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Scan reads the queue scanFirst jobs first, so that the first arrives
// at once, then scanPage jobs at a time.
const (
	scanFirst = 32
	scanPage  = 500
)

// Scan calls fn with each queued job sel picks, in cluster and proc
// order, with the attributes named in attrs (all when attrs is nil). It
// reads the queue a page of jobs at a time and holds no read transaction
// while fn runs, so that neither its memory nor the database's write-ahead
// log grows with the queue however slowly fn consumes (a client reading
// the jobs over the network). The pages are not one snapshot: a job that
// changes during the scan is seen as it was when its page was read. A
// Constraint sees the full ad; the projection applies afterwards. An error
// of fn ends the scan and is returned.
func (q *Queue) Scan(ctx context.Context, sel Selector, attrs []string, fn func(Job) error) error {
	if _, _, err := sel.where("j", false); err != nil {
		return err
	}
	read := attrs
	if sel.Constraint != nil {
		read = nil
	}
	after := JobID{Cluster: -1}
	for limit := scanFirst; ; limit = scanPage {
		if err := ctx.Err(); err != nil {
			return err
		}
		jobs, err := q.page(ctx, sel, read, after, limit)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if sel.Constraint != nil {
				if !sel.Constraint(j) {
					continue
				}
				if attrs != nil {
					proj := Ad{}
					for _, a := range attrs {
						if v, ok := lookup(j.Ad, a); ok {
							proj[a] = v
						}
					}
					j.Ad = proj
				}
			}
			if err := fn(j); err != nil {
				return err
			}
		}
		if len(jobs) < limit {
			return nil
		}
		after = jobs[len(jobs)-1].ID
	}
}

// page reads at most limit jobs sel picks after the job after, with the
// attributes named in attrs (all when nil).
func (q *Queue) page(ctx context.Context, sel Selector, attrs []string, after JobID, limit int) ([]Job, error) {
	return q.pageIn(ctx, q.r, sel, attrs, after, limit)
}

// pageIn is page, read through db (the read pool, or a transaction).
func (q *Queue) pageIn(ctx context.Context, db querier, sel Selector, attrs []string, after JobID, limit int) ([]Job, error) {
	w, args, err := sel.where("j", false)
	if err != nil {
		return nil, err
	}
	w = "(" + w + ") AND (j.cluster, j.proc) > (?, ?)"
	args = append(args, after.Cluster, after.Proc)
	rows, err := db.QueryContext(ctx, `SELECT j.cluster, j.proc, j.owner, j.status, j.entered FROM jobs j WHERE `+w+
		` ORDER BY j.cluster, j.proc LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	var jobs []Job
	index := map[JobID]int{}
	var clusters []any
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
		if n := len(jobs); n == 0 || jobs[n-1].ID.Cluster != j.ID.Cluster {
			clusters = append(clusters, j.ID.Cluster)
		}
		jobs = append(jobs, j)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	if len(jobs) == 0 || attrs != nil && len(attrs) == 0 {
		return jobs, nil
	}
	nameCond := ""
	var nameArgs []any
	if attrs != nil {
		nameCond = " AND a.name IN (" + strings.TrimSuffix(strings.Repeat("?,", len(attrs)), ",") + ")"
		for _, a := range attrs {
			nameArgs = append(nameArgs, a)
		}
	}
	first, last := jobs[0].ID, jobs[len(jobs)-1].ID
	clusterAds := map[int][][2]string{}
	rows, err = db.QueryContext(ctx, `SELECT a.cluster, a.name, a.value FROM cluster_attrs a WHERE a.cluster IN (`+
		strings.TrimSuffix(strings.Repeat("?,", len(clusters)), ",")+`)`+nameCond, append(clusters, nameArgs...)...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	for rows.Next() {
		var c int
		var n, v string
		if err := rows.Scan(&c, &n, &v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("job queue: %w", err)
		}
		clusterAds[c] = append(clusterAds[c], [2]string{n, v})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	lowers := make([]map[string]string, len(jobs)) // lower-case name -> spelling used
	for i := range jobs {
		lowers[i] = map[string]string{}
		for _, kv := range clusterAds[jobs[i].ID.Cluster] {
			jobs[i].Ad[kv[0]] = kv[1]
			lowers[i][strings.ToLower(kv[0])] = kv[0]
		}
	}
	// Job ads override. The page's jobs are a range of the key: read
	// them through the jobs it selects (CROSS JOIN keeps jobs the outer
	// loop, whose key range SQLite uses; the other order would read
	// every attribute of the range's clusters, a whole 10,000-job
	// cluster for each page).
	pw := w + " AND (j.cluster, j.proc) <= (?, ?)"
	pargs := append(append([]any{}, args[:len(args)-2]...), first.Cluster, first.Proc-1, last.Cluster, last.Proc)
	rows, err = db.QueryContext(ctx, `SELECT a.cluster, a.proc, a.name, a.value FROM jobs j CROSS JOIN proc_attrs a ON a.cluster = j.cluster AND a.proc = j.proc WHERE `+
		pw+nameCond, append(pargs, nameArgs...)...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	if err := overrideAttrs(rows, jobs, index, lowers); err != nil {
		return nil, err
	}
	return jobs, nil
}

// ClusterCount counts the queued jobs of one cluster in one state.
type ClusterCount struct {
	Cluster int
	Owner   string
	// BatchName is the jobs' JobBatchName as stored (ClassAd text), ""
	// when they have none.
	BatchName           string
	Status              Status
	Jobs                int
	FirstProc, LastProc int
	QDate               int64 // when the first of them was queued
}

// ClusterCounts counts the queued jobs sel picks by cluster, owner, batch
// name and state: what condor q's summary shows, without reading the
// jobs' ads. sel must have no Constraint. The counts are kept by the
// database as jobs come, change and go (job_counts), so that the cost is
// that of the groups, not of the jobs: a few index lookups per group for
// its first and last job. A cluster some of whose jobs have a batch name
// of their own (batch_overrides), a single job, or a selection of many
// small clusters is counted from its jobs instead.
func (q *Queue) ClusterCounts(ctx context.Context, sel Selector) ([]ClusterCount, error) {
	if sel.Constraint != nil || sel.Exact && !sel.Filter.All() {
		return nil, fmt.Errorf("job queue: counting jobs by a constraint (%s): scan them", sel)
	}
	if sel.HasProc {
		return q.countJobs(ctx, sel)
	}
	w, args, err := sel.where("j", false)
	if err != nil {
		return nil, err
	}
	rows, err := q.r.QueryContext(ctx, `SELECT j.cluster, j.owner, j.status, j.n FROM job_counts j WHERE `+w+` ORDER BY j.cluster, j.owner, j.status`, args...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	var groups []ClusterCount
	jobs := 0
	for rows.Next() {
		var c ClusterCount
		if err := rows.Scan(&c.Cluster, &c.Owner, &c.Status, &c.Jobs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("job queue: %w", err)
		}
		jobs += c.Jobs
		groups = append(groups, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	if jobs < 8*len(groups) {
		// Small clusters: one pass over the jobs costs less than the
		// lookups of each group.
		return q.countJobs(ctx, sel)
	}
	overridden := map[int]bool{}
	rows, err = q.r.QueryContext(ctx, `SELECT cluster FROM batch_overrides WHERE n > 0`)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	for rows.Next() {
		var c int
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return nil, fmt.Errorf("job queue: %w", err)
		}
		overridden[c] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	var out []ClusterCount
	batch := map[int]string{}
	for i, g := range groups {
		if overridden[g.Cluster] {
			if i == 0 || groups[i-1].Cluster != g.Cluster {
				exact, err := q.countJobs(ctx, Selector{Cluster: g.Cluster, Owner: sel.Owner, Statuses: sel.Statuses})
				if err != nil {
					return nil, err
				}
				out = append(out, exact...)
			}
			continue
		}
		name, ok := batch[g.Cluster]
		if !ok {
			err := q.r.QueryRowContext(ctx, `SELECT value FROM cluster_attrs WHERE cluster = ? AND name = 'JobBatchName'`, g.Cluster).Scan(&name)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("job queue: %w", err)
			}
			batch[g.Cluster] = name
		}
		g.BatchName = name
		const first = `SELECT proc, qdate FROM jobs WHERE status = ? AND cluster = ? AND owner = ? ORDER BY proc LIMIT 1`
		if err := q.r.QueryRowContext(ctx, first, int(g.Status), g.Cluster, g.Owner).Scan(&g.FirstProc, &g.QDate); err != nil {
			return nil, fmt.Errorf("job queue: the first job of cluster %d: %w", g.Cluster, err)
		}
		const last = `SELECT proc FROM jobs WHERE status = ? AND cluster = ? AND owner = ? ORDER BY proc DESC LIMIT 1`
		if err := q.r.QueryRowContext(ctx, last, int(g.Status), g.Cluster, g.Owner).Scan(&g.LastProc); err != nil {
			return nil, fmt.Errorf("job queue: the last job of cluster %d: %w", g.Cluster, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// countJobs counts the jobs sel picks as ClusterCounts does, from the
// jobs themselves.
func (q *Queue) countJobs(ctx context.Context, sel Selector) ([]ClusterCount, error) {
	w, args, err := sel.where("j", false)
	if err != nil {
		return nil, err
	}
	rows, err := q.r.QueryContext(ctx, `SELECT j.cluster, j.owner, COALESCE(p.value, c.value, ''), j.status, COUNT(*), MIN(j.proc), MAX(j.proc), MIN(j.qdate)
FROM jobs j
LEFT JOIN proc_attrs p ON p.cluster = j.cluster AND p.proc = j.proc AND p.name = 'JobBatchName'
LEFT JOIN cluster_attrs c ON c.cluster = j.cluster AND c.name = 'JobBatchName'
WHERE `+w+`
GROUP BY j.cluster, j.owner, 3, j.status
ORDER BY j.cluster, MIN(j.proc)`, args...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	defer rows.Close()
	var out []ClusterCount
	for rows.Next() {
		var c ClusterCount
		if err := rows.Scan(&c.Cluster, &c.Owner, &c.BatchName, &c.Status, &c.Jobs, &c.FirstProc, &c.LastProc, &c.QDate); err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	return out, nil
}
