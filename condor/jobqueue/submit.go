package jobqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoCluster is wrapped by the error of a SubmitCluster to a cluster
// that NewCluster did not reserve.
var ErrNoCluster = errors.New("no such cluster")

// ErrClusterCommitted is wrapped by the error of a SubmitCluster to a
// cluster that another submission already committed.
var ErrClusterCommitted = errors.New("cluster already committed")

// volatile attributes are always stored per job, never in the cluster ad,
// so that they can change or vanish per job.
var volatile = map[string]bool{
	"jobstatus": true, "enteredcurrentstatus": true, "holdreason": true, "holdreasoncode": true,
	"holdreasonsubcode": true, "numjobstarts": true, "lastjobstatus": true, "procid": true,
}

// Submit adds jobs as one new cluster in a single transaction and returns
// the cluster id. Each job gets ClusterId, ProcId (its index), JobStatus
// (Idle, or Held if the ad says 5), QDate and EnteredCurrentStatus (now,
// unless given). Every job needs an Owner. Once Submit returns, the
// cluster is committed.
func (q *Queue) Submit(ctx context.Context, jobs []Ad) (int, error) {
	var cluster int
	err := q.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if cluster, err = q.reserve(ctx, tx); err != nil {
			return err
		}
		_, err = q.commit(ctx, tx, cluster, jobs, "")
		return err
	})
	if err != nil {
		return 0, err
	}
	return cluster, nil
}

// NewCluster reserves a new cluster id for SubmitCluster. The reservation
// is durable: no other cluster gets the id, across restarts too. A
// cluster reserved and never committed stays empty, and harmless.
func (q *Queue) NewCluster(ctx context.Context) (int, error) {
	var cluster int
	err := q.tx(ctx, func(tx *sql.Tx) error {
		var err error
		cluster, err = q.reserve(ctx, tx)
		return err
	})
	if err != nil {
		return 0, err
	}
	return cluster, nil
}

// SubmitCluster stores jobs as the cluster NewCluster reserved, in a
// single transaction, as Submit does. submission names the submission
// (say, a digest of the submitter's request): committing a cluster again
// with the submission that committed it is a retry, which changes nothing
// and reports retry true, so that a submitter that lost the answer may
// ask again without queueing its jobs twice. Any other commit of a
// committed cluster, one with an empty submission included, fails with
// ErrClusterCommitted; one of a cluster never reserved fails with
// ErrNoCluster.
func (q *Queue) SubmitCluster(ctx context.Context, cluster int, jobs []Ad, submission string) (retry bool, err error) {
	err = q.tx(ctx, func(tx *sql.Tx) error {
		retry, err = q.commit(ctx, tx, cluster, jobs, submission)
		return err
	})
	return retry, err
}

// NewClusters reserves n new cluster ids for SubmitClusters in one
// transaction, as NewCluster reserves one.
func (q *Queue) NewClusters(ctx context.Context, n int) ([]int, error) {
	if n <= 0 {
		return nil, fmt.Errorf("job queue: reserving %d clusters", n)
	}
	clusters := make([]int, 0, n)
	err := q.tx(ctx, func(tx *sql.Tx) error {
		clusters = clusters[:0]
		for range n {
			c, err := q.reserve(ctx, tx)
			if err != nil {
				return err
			}
			clusters = append(clusters, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return clusters, nil
}

// ClusterSubmit is one cluster of a SubmitClusters: its reserved id, its
// jobs and the submission that names them (see SubmitCluster).
type ClusterSubmit struct {
	Cluster    int
	Jobs       []Ad
	Submission string
}

// SubmitClusters commits several reserved clusters in a single
// transaction: all of them or, when one fails, none. Each cluster is
// committed as SubmitCluster commits it; retry[i] reports that cluster
// i was already committed by the same submission (a repeat of a batch
// whose answer was lost).
func (q *Queue) SubmitClusters(ctx context.Context, cs []ClusterSubmit) (retry []bool, err error) {
	retry = make([]bool, len(cs))
	err = q.tx(ctx, func(tx *sql.Tx) error {
		for i, c := range cs {
			var err error
			if retry[i], err = q.commit(ctx, tx, c.Cluster, c.Jobs, c.Submission); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return retry, nil
}

// reserve allocates the next cluster id and records its reservation.
func (q *Queue) reserve(ctx context.Context, tx *sql.Tx) (int, error) {
	var cluster int
	if err := q.queryRow(ctx, tx, `UPDATE meta SET value = value + 1 WHERE key = 'next_cluster' RETURNING value - 1`).Scan(&cluster); err != nil {
		return 0, fmt.Errorf("job queue: allocating a cluster id: %w", err)
	}
	if _, err := q.exec(ctx, tx, `INSERT INTO clusters(cluster, reserved) VALUES (?, ?)`, cluster, q.now().Unix()); err != nil {
		return 0, fmt.Errorf("job queue: reserving cluster %d: %w", cluster, err)
	}
	return cluster, nil
}

// commit stores the jobs of a reserved cluster and marks it committed by
// submission, or reports a retry of the submission that committed it.
func (q *Queue) commit(ctx context.Context, tx *sql.Tx, cluster int, jobs []Ad, submission string) (retry bool, err error) {
	if retry, err = q.committable(ctx, tx, cluster, submission); err != nil || retry {
		return retry, err
	}
	if len(jobs) == 0 {
		return false, fmt.Errorf("job queue: cluster %d: submit of zero jobs", cluster)
	}
	if err := q.insertCluster(ctx, tx, cluster, jobs); err != nil {
		return false, err
	}
	return false, q.markCommitted(ctx, tx, cluster, submission)
}

// committable reports whether cluster, reserved, may be committed by
// submission (false, nil), was committed by it (true, nil: a retry), or
// neither (an error wrapping ErrNoCluster or ErrClusterCommitted).
func (q *Queue) committable(ctx context.Context, tx *sql.Tx, cluster int, submission string) (retry bool, err error) {
	var committed sql.NullInt64
	var prev string
	err = q.queryRow(ctx, tx, `SELECT committed, submission FROM clusters WHERE cluster = ?`, cluster).Scan(&committed, &prev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("job queue: cluster %d: %w", cluster, ErrNoCluster)
	case err != nil:
		return false, fmt.Errorf("job queue: cluster %d: %w", cluster, err)
	case committed.Valid && submission != "" && submission == prev:
		return true, nil
	case committed.Valid:
		return false, fmt.Errorf("job queue: cluster %d: %w", cluster, ErrClusterCommitted)
	}
	return false, nil
}

// markCommitted marks cluster committed by submission.
func (q *Queue) markCommitted(ctx context.Context, tx *sql.Tx, cluster int, submission string) error {
	if _, err := q.exec(ctx, tx, `UPDATE clusters SET committed = ?, submission = ? WHERE cluster = ?`, q.now().Unix(), submission, cluster); err != nil {
		return fmt.Errorf("job queue: committing cluster %d: %w", cluster, err)
	}
	return nil
}

// insertCluster stores the jobs of a cluster: the attributes all of them
// share once in the cluster ad, the others per job.
func (q *Queue) insertCluster(ctx context.Context, tx *sql.Tx, cluster int, jobs []Ad) error {
	_, err := q.insertProcs(ctx, tx, cluster, 0, jobs, nil)
	return err
}

// EachBatch is how many jobs SubmitClusterEach builds and stores at a
// time: what a submit holds in memory, whatever its size.
const EachBatch = 512

// SubmitClusterEach stores n jobs as the cluster NewCluster reserved,
// building job i (ProcId i) with build(i) as it stores it, EachBatch
// jobs at a time: a cluster of any size costs the memory of one batch.
// It is otherwise SubmitCluster: one transaction, so that a submit that
// fails (an error of build, ctx done, a crash) leaves no job of the
// cluster, and a retry of the submission that committed the cluster
// changes nothing and reports retry true. The cluster ad holds the
// attributes the first batch shares; a later job keeps what differs.
func (q *Queue) SubmitClusterEach(ctx context.Context, cluster, n int, submission string, build func(proc int) (Ad, error)) (retry bool, err error) {
	err = q.tx(ctx, func(tx *sql.Tx) error {
		if retry, err = q.committable(ctx, tx, cluster, submission); err != nil || retry {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("job queue: cluster %d: submit of zero jobs", cluster)
		}
		var clusterAd map[string]kv
		jobs := make([]Ad, 0, min(n, EachBatch))
		for first := 0; first < n; first += EachBatch {
			jobs = jobs[:0]
			for proc := first; proc < min(first+EachBatch, n); proc++ {
				j, err := build(proc)
				if err != nil {
					return fmt.Errorf("job queue: job %d.%d: %w", cluster, proc, err)
				}
				jobs = append(jobs, j)
			}
			if clusterAd, err = q.insertProcs(ctx, tx, cluster, first, jobs, clusterAd); err != nil {
				return err
			}
		}
		clear(jobs)
		return q.markCommitted(ctx, tx, cluster, submission)
	})
	return retry, err
}

type kv struct{ name, value string }

// insertProcs stores jobs as procs first, first+1, ... of cluster. With
// a nil cluster ad (lower-case name -> attribute), the attributes all of
// them share go once to a new cluster ad; with the cluster's ad, each
// job keeps what differs from it, and undefined for what the cluster ad
// has and the job has not (but factory attributes, of the cluster alone).
// It returns the cluster ad the jobs were stored against.
func (q *Queue) insertProcs(ctx context.Context, tx *sql.Tx, cluster, first int, jobs []Ad, clusterAd map[string]kv) (map[string]kv, error) {
	now := q.now().Unix()
	norm := make([]map[string]kv, len(jobs))
	for i, in := range jobs {
		proc := first + i
		m := make(map[string]kv, len(in)+8)
		for k, v := range in {
			if strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("job queue: job %d.%d: attribute %s has no value", cluster, proc, k)
			}
			m[strings.ToLower(k)] = kv{k, v}
		}
		m["clusterid"] = kv{"ClusterId", strconv.Itoa(cluster)}
		m["procid"] = kv{"ProcId", strconv.Itoa(proc)}
		status := Idle
		if v, ok := m["jobstatus"]; ok && strings.TrimSpace(v.value) == "5" {
			status = Held
		}
		m["jobstatus"] = kv{"JobStatus", strconv.Itoa(int(status))}
		if _, ok := m["qdate"]; !ok {
			m["qdate"] = kv{"QDate", strconv.FormatInt(now, 10)}
		}
		if _, ok := m["enteredcurrentstatus"]; !ok {
			m["enteredcurrentstatus"] = kv{"EnteredCurrentStatus", strconv.FormatInt(now, 10)}
		}
		if _, ok := m["numjobstarts"]; !ok {
			m["numjobstarts"] = kv{"NumJobStarts", "0"}
		}
		if _, ok := m["owner"]; !ok {
			return nil, fmt.Errorf("job queue: job %d.%d has no Owner", cluster, proc)
		}
		for k, v := range clusterAd {
			if _, ok := m[k]; !ok && !factoryAttrs[k] {
				m[k] = kv{v.name, "undefined"}
			}
		}
		norm[i] = m
	}
	common := clusterAd
	if common == nil {
		// Attributes equal in every job go to the cluster ad.
		common = map[string]kv{}
		for k, v := range norm[0] {
			if volatile[k] {
				continue
			}
			same := true
			for _, m := range norm[1:] {
				if o, ok := m[k]; !ok || o.value != v.value {
					same = false
					break
				}
			}
			if same {
				common[k] = v
			}
		}
		args := make([]any, 0, 3*len(common))
		for _, v := range common {
			args = append(args, cluster, v.name, v.value)
		}
		if err := q.insertRows(ctx, tx, insertClusterAttrs, args); err != nil {
			return nil, fmt.Errorf("job queue: storing cluster %d's attributes: %w", cluster, err)
		}
		q.clusters.changed(cluster)
	}
	// A few statements of many rows each: a statement's own cost (its
	// binding, its step, the driver's bookkeeping) is most of a row's.
	jobArgs := make([]any, 0, 7*len(norm))
	var attrArgs []any
	for i, m := range norm {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		proc := first + i
		status, _ := strconv.Atoi(m["jobstatus"].value)
		entered, _ := strconv.ParseInt(strings.TrimSpace(m["enteredcurrentstatus"].value), 10, 64)
		qdate, _ := strconv.ParseInt(strings.TrimSpace(m["qdate"].value), 10, 64)
		starts, _ := strconv.Atoi(strings.TrimSpace(m["numjobstarts"].value))
		jobArgs = append(jobArgs, cluster, proc, unquote(m["owner"].value), status, entered, qdate, starts)
		for k, v := range m {
			if c, ok := common[k]; ok && c.value == v.value {
				continue
			}
			attrArgs = append(attrArgs, cluster, proc, v.name, v.value)
		}
	}
	if err := q.insertRows(ctx, tx, insertJobs, jobArgs); err != nil {
		return nil, fmt.Errorf("job queue: storing the jobs of cluster %d from proc %d: %w", cluster, first, err)
	}
	if err := q.insertRows(ctx, tx, insertProcAttrs, attrArgs); err != nil {
		return nil, fmt.Errorf("job queue: storing the attributes of cluster %d's jobs from proc %d: %w", cluster, first, err)
	}
	return common, nil
}

// A table rows are inserted into several at a time by insertRows: the
// statement's head, the values a row has, and what follows the rows.
type rowsInsert struct {
	head  string
	width int
	tail  string
}

var (
	insertClusterAttrs = rowsInsert{`INSERT INTO cluster_attrs(cluster, name, value) VALUES `, 3, ""}
	insertJobs         = rowsInsert{`INSERT INTO jobs(cluster, proc, owner, status, entered, qdate, num_starts) VALUES `, 7, ""}
	insertProcAttrs    = rowsInsert{`INSERT INTO proc_attrs(cluster, proc, name, value) VALUES `, 4, ""}
	// upsertProcAttrs sets job attributes, whether the job has them or not.
	upsertProcAttrs = rowsInsert{insertProcAttrs.head, 4,
		` ON CONFLICT(cluster, proc, name) DO UPDATE SET name = excluded.name, value = excluded.value`}
	// The statements of changeBatch, a row a job (or a job's attribute),
	// run as insertRows runs an insert.
	updateJobStates = rowsInsert{`UPDATE jobs SET status = v.column3, entered = v.column4, num_starts = v.column5, num_holds = v.column6 FROM (VALUES `, 6,
		`) AS v WHERE jobs.cluster = v.column1 AND jobs.proc = v.column2`}
	selectJobStates = rowsInsert{`SELECT cluster, proc, status, num_starts, num_holds, owner FROM jobs WHERE (cluster, proc) IN (VALUES `, 2, `)`}
	// takeHoldReasons deletes jobs' hold reasons and returns them.
	takeHoldReasons = rowsInsert{`DELETE FROM proc_attrs WHERE name IN ('HoldReason', 'HoldReasonCode', 'HoldReasonSubCode') AND (cluster, proc) IN (VALUES `, 2,
		`) RETURNING cluster, proc, name, value`}
	// deleteRemoteHosts deletes the RemoteHost of jobs that stopped
	// running.
	deleteRemoteHosts = rowsInsert{`DELETE FROM proc_attrs WHERE name = 'RemoteHost' AND (cluster, proc) IN (VALUES `, 2, `)`}
	insertOutbox      = rowsInsert{`INSERT INTO outbox(cluster, proc, record) VALUES `, 3, ` RETURNING seq, cluster, proc`}
	deleteOutbox      = rowsInsert{`DELETE FROM outbox WHERE seq IN (VALUES `, 1, `)`}
	// selectOwnAttrs reads jobs' own attributes, one row a job: each
	// attribute as the byte lengths and bytes of its name and value, one
	// after the other ("4:Args3:\"7\"..."; splitOwnAttrs), so that a job
	// costs one row to fetch, not one an attribute.
	selectOwnAttrs = rowsInsert{`SELECT v.column1, v.column2, (SELECT coalesce(group_concat(octet_length(a.name) || ':' || a.name || octet_length(a.value) || ':' || a.value, ''), '') FROM proc_attrs a WHERE a.cluster = v.column1 AND a.proc = v.column2) FROM (VALUES `, 2, `) AS v`}
	// deleteJobAttrs deletes jobs' own attributes.
	deleteJobAttrs = rowsInsert{`DELETE FROM proc_attrs WHERE (cluster, proc) IN (VALUES `, 2, `)`}
	deleteJobRows  = rowsInsert{`DELETE FROM jobs WHERE (cluster, proc) IN (VALUES `, 2, `)`}
	insertHistory  = rowsInsert{`INSERT OR REPLACE INTO history(cluster, proc, owner, status, completed, seq, ad) VALUES `, 7, ""}
)

// rowsPerInsert are the rows of the statements insertRows runs, largest
// first: each is prepared once, at Open, and a run of n rows takes the
// largest that fit, so that n rows cost a few statements and no parsing
// (up to 16 rows, one).
var rowsPerInsert = []int{64, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}

// text is the statement inserting n rows.
func (r rowsInsert) text(n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", r.width), ",") + "),"
	return r.head + strings.TrimSuffix(strings.Repeat(row, n), ",") + r.tail
}

// rowsStatements are the texts of every rowsInsert statement, prepared
// at Open.
func rowsStatements() []string {
	var out []string
	for _, r := range []rowsInsert{insertClusterAttrs, insertJobs, insertProcAttrs, upsertProcAttrs, updateJobStates, selectJobStates, takeHoldReasons, deleteRemoteHosts, selectOwnAttrs, deleteJobAttrs, deleteJobRows, insertHistory, insertOutbox, deleteOutbox} {
		for _, n := range rowsPerInsert {
			out = append(out, r.text(n))
		}
	}
	return out
}

// insertRows inserts the rows of args (len(args)/r.width of them, each
// r.width values) in tx.
func (q *Queue) insertRows(ctx context.Context, tx *sql.Tx, r rowsInsert, args []any) error {
	for _, n := range rowsPerInsert {
		if len(args) < n*r.width {
			continue
		}
		st, err := q.stmt(ctx, tx, r.text(n))
		if err != nil {
			return err
		}
		for len(args) >= n*r.width {
			if _, err := st.ExecContext(ctx, args[:n*r.width]...); err != nil {
				return err
			}
			args = args[n*r.width:]
		}
	}
	return nil
}

// queryRows runs r's statements as insertRows does, statements that
// return rows, and calls scan with each row they return.
func (q *Queue) queryRows(ctx context.Context, tx *sql.Tx, r rowsInsert, args []any, scan func(*sql.Rows) error) error {
	for _, n := range rowsPerInsert {
		if len(args) < n*r.width {
			continue
		}
		st, err := q.stmt(ctx, tx, r.text(n))
		if err != nil {
			return err
		}
		for len(args) >= n*r.width {
			rows, err := st.QueryContext(ctx, args[:n*r.width]...)
			if err != nil {
				return err
			}
			for rows.Next() {
				if err := scan(rows); err != nil {
					rows.Close()
					return err
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			args = args[n*r.width:]
		}
	}
	return nil
}
