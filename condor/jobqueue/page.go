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
	conds := []string{"(j.cluster > ? OR (j.cluster = ? AND j.proc > ?))"}
	args := []any{pq.After.Cluster, pq.After.Cluster, pq.After.Proc}
	if len(pq.Status) > 0 {
		conds = append(conds, "j.status IN ("+placeholders(len(pq.Status))+")")
		for _, s := range pq.Status {
			args = append(args, int(s))
		}
	}
	if pq.Carrying != nil {
		if len(pq.Carrying) == 0 {
			return nil, nil
		}
		in := placeholders(len(pq.Carrying))
		// The clusters that carry one once, then each job's own by key.
		conds = append(conds, `(j.cluster IN (SELECT c.cluster FROM cluster_attrs c WHERE c.name IN (`+in+`) AND lower(trim(c.value)) <> 'false')`+
			` OR EXISTS (SELECT 1 FROM proc_attrs p WHERE p.cluster = j.cluster AND p.proc = j.proc AND p.name IN (`+in+`) AND lower(trim(p.value)) <> 'false'))`)
		for range 2 {
			for _, n := range pq.Carrying {
				args = append(args, n)
			}
		}
	}
	// The page's jobs are picked first, then their attributes read.
	args = append(args, pq.Limit)
	rows, err := q.r.QueryContext(ctx, `SELECT j.cluster, j.proc FROM jobs j WHERE `+strings.Join(conds, " AND ")+
		` ORDER BY j.cluster, j.proc LIMIT ?`, args...)
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
