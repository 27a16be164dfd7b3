package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// PageQuery selects one page of queued jobs, in cluster and proc order,
// for a walk over a large queue that holds one page in memory at a time.
type PageQuery struct {
	// After starts the page after this job (the zero value: at the first
	// job); the next page starts after the last job of this one.
	After JobID
	// Limit is the most jobs the page holds; it must be more than zero.
	Limit int
	// Status keeps only jobs in one of these states (nil: any state).
	Status []Status
	// Carrying keeps only jobs whose own or cluster ad sets one of these
	// attributes to something other than false (nil: every job). Names
	// are compared without regard to case, as ClassAd names are.
	Carrying []string
}

// Page returns the queued jobs pq picks with all their attributes. The
// database does the picking: a queue of many jobs of which few carry the
// attributes asked for costs one page of memory.
func (q *Queue) Page(ctx context.Context, pq PageQuery) ([]Job, error) {
	if pq.Limit <= 0 {
		return nil, errors.New("job queue: page limit must be more than zero")
	}
	query, qargs := pageQuery(pq)
	if query == "" {
		return nil, nil
	}
	// The page's jobs are picked first, then their attributes read.
	rows, err := q.r.QueryContext(ctx, query, qargs...)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	defer rows.Close()
	var ids []JobID
	for rows.Next() {
		var id JobID
		if err := rows.Scan(&id.Cluster, &id.Proc); err != nil {
			return nil, fmt.Errorf("job queue: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	rows.Close()
	// Each job's attributes by its key: reading them for the whole page
	// at once would scan every job's attributes.
	jobs := make([]Job, 0, len(ids))
	for _, id := range ids {
		j, err := load(ctx, q.r, OneJob(id), nil, "")
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j...) // none when it left the queue meanwhile
	}
	return jobs, nil
}

// placeholders returns n comma-separated SQL placeholders.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// periodicNames are the attributes the database indexes by name (in the
// cluster's and in the jobs' own ads, see the schema) when their value is
// not false: the periodic policy's, which condor_submit sets to false in
// every job that has none. periodicNamesSQL (of an alias's name column),
// with the test of the value, is what lets SQLite use those partial
// indexes; both must match their WHERE clause word for word. The names
// are compared one by one, not with IN: SQLite evaluates a partial
// index's WHERE for every row written or deleted, and an IN list there
// costs a temporary table each time (half the time of deleting an
// attribute's row).
var periodicNames = []string{"PeriodicHold", "PeriodicRelease", "PeriodicRemove"}

// periodicNamesSQL is the test of the names of the partial indexes'
// WHERE clause on column col.
func periodicNamesSQL(col string) string {
	return "(" + col + " = 'PeriodicHold' OR " + col + " = 'PeriodicRelease' OR " + col + " = 'PeriodicRemove')"
}

// indexedCarrying reports whether every name is one the database indexes
// (see periodicNames), without regard to case, and none repeats.
func indexedCarrying(names []string) bool {
	seen := map[string]bool{}
	for _, n := range names {
		l := strings.ToLower(n)
		ok := false
		for _, p := range periodicNames {
			ok = ok || strings.ToLower(p) == l
		}
		if !ok || seen[l] {
			return false
		}
		seen[l] = true
	}
	return true
}

// pageQuery returns the query of the ids of the jobs of a page and its
// arguments; "" when it picks none.
func pageQuery(pq PageQuery) (string, []any) {
	after := "(j.cluster, j.proc) > (?, ?)"
	args := []any{pq.After.Cluster, pq.After.Proc}
	joined := after // the jobs reached through an index of attributes
	if len(pq.Status) > 0 {
		after += " AND j.status IN (" + placeholders(len(pq.Status)) + ")"
		// Unary + keeps SQLite from reading the jobs by state, which
		// would lose the order of the attributes' index.
		joined += " AND +j.status IN (" + placeholders(len(pq.Status)) + ")"
		for _, s := range pq.Status {
			args = append(args, int(s))
		}
	}
	var query string
	var qargs []any
	switch {
	case pq.Carrying == nil:
		query = `SELECT j.cluster, j.proc FROM jobs j WHERE ` + after + ` ORDER BY j.cluster, j.proc LIMIT ?`
		qargs = append(args, pq.Limit)
	case len(pq.Carrying) == 0:
		return "", nil
	case indexedCarrying(pq.Carrying):
		// One walk of an index per name and per ad (the cluster's, the
		// job's), each in job order, merged by SQLite, which stops at the
		// page's end: the cost is that of the jobs that carry one, none
		// at all when no job does. The indexes are unique and the joins
		// CROSS (in the order written) so that SQLite knows the order.
		var parts []string
		for _, n := range pq.Carrying {
			lit := "'" + strings.ReplaceAll(n, "'", "''") + "'"
			parts = append(parts,
				`SELECT c.cluster, j.proc FROM cluster_attrs c CROSS JOIN jobs j ON j.cluster = c.cluster WHERE c.name = `+lit+
					` AND `+periodicNamesSQL("c.name")+` AND lower(trim(c.value)) <> 'false' AND c.cluster >= ? AND `+joined,
				`SELECT p.cluster, p.proc FROM proc_attrs p CROSS JOIN jobs j ON j.cluster = p.cluster AND j.proc = p.proc WHERE p.name = `+lit+
					` AND `+periodicNamesSQL("p.name")+` AND lower(trim(p.value)) <> 'false' AND (p.cluster, p.proc) > (?, ?) AND `+joined)
			qargs = append(qargs, pq.After.Cluster)
			qargs = append(qargs, args...)
			qargs = append(qargs, pq.After.Cluster, pq.After.Proc)
			qargs = append(qargs, args...)
		}
		query = strings.Join(parts, " UNION ") + ` ORDER BY 1, 2 LIMIT ?`
		qargs = append(qargs, pq.Limit)
	default:
		in := placeholders(len(pq.Carrying))
		// The clusters that carry one once, then each job's own by key.
		query = `SELECT j.cluster, j.proc FROM jobs j WHERE ` + after +
			` AND (j.cluster IN (SELECT c.cluster FROM cluster_attrs c WHERE c.name IN (` + in + `) AND lower(trim(c.value)) <> 'false')` +
			` OR EXISTS (SELECT 1 FROM proc_attrs p WHERE p.cluster = j.cluster AND p.proc = j.proc AND p.name IN (` + in + `) AND lower(trim(p.value)) <> 'false'))` +
			` ORDER BY j.cluster, j.proc LIMIT ?`
		qargs = args
		for range 2 {
			for _, n := range pq.Carrying {
				qargs = append(qargs, n)
			}
		}
		qargs = append(qargs, pq.Limit)
	}
	return query, qargs
}
