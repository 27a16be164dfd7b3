package jobqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// factorySchema holds the job factories of late-materialized clusters
// (HTCondor's max_materialize and max_idle): each cluster's digest,
// the number of procs it makes, the next one to make, and its limits.
// A factory is deleted when its last proc is made, or when the cluster
// is removed.
const factorySchema = `
CREATE TABLE IF NOT EXISTS factories (
	cluster  INTEGER PRIMARY KEY,
	owner    TEXT    NOT NULL,
	digest   BLOB    NOT NULL,
	total    INTEGER NOT NULL,
	next     INTEGER NOT NULL,
	lim      INTEGER NOT NULL,
	max_idle INTEGER NOT NULL,
	paused   INTEGER NOT NULL DEFAULT 0
);
`

// Attributes of a factory's cluster ad, as HTCondor names them.
const (
	AttrMaterializeLimit   = "JobMaterializeLimit"
	AttrMaterializeMaxIdle = "JobMaterializeMaxIdle"
	AttrMaterializeNext    = "JobMaterializeNextProcId"
	AttrMaterializePaused  = "JobMaterializePaused"
	AttrTotalSubmitProcs   = "TotalSubmitProcs"
)

// factoryAttrs are the attributes of a factory's cluster ad that no job
// of it has (lower case).
var factoryAttrs = map[string]bool{
	"jobmaterializelimit": true, "jobmaterializemaxidle": true, "jobmaterializenextprocid": true,
	"jobmaterializepaused": true, "totalsubmitprocs": true,
}

// Factory is the durable state of a cluster's job factory.
type Factory struct {
	Cluster int
	Owner   string
	Digest  []byte
	// Total procs the factory makes; Next is the ProcId it makes next.
	Total, Next int
	// Limit bounds the cluster's procs in the queue and not done
	// (max_materialize), MaxIdle its idle ones (max_idle); 0: no bound.
	Limit, MaxIdle int
	// Paused is HTCondor's JobMaterializePaused: 0 running, 1 held
	// (condor hold of the cluster), -1 stopped by an error (HTCondor's
	// mmHold and mmInvalid).
	Paused int
}

// Factory pause states (JobMaterializePaused).
const (
	FactoryRunning = 0
	FactoryHeld    = 1
	FactoryError   = -1
)

// ErrFactoryDone is wrapped by Materialize's error for a cluster with no
// factory (never had one, made all its procs, or was removed).
var ErrFactoryDone = errors.New("no job factory")

// Factories returns the queue's job factories, in cluster order,
// without their digests (FactoryDigest).
func (q *Queue) Factories(ctx context.Context) ([]Factory, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT cluster, owner, total, next, lim, max_idle, paused FROM factories ORDER BY cluster`)
	if err != nil {
		return nil, fmt.Errorf("job queue: reading job factories: %w", err)
	}
	defer rows.Close()
	var out []Factory
	for rows.Next() {
		var f Factory
		if err := rows.Scan(&f.Cluster, &f.Owner, &f.Total, &f.Next, &f.Limit, &f.MaxIdle, &f.Paused); err != nil {
			return nil, fmt.Errorf("job queue: reading job factories: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// FactoryDigest returns the digest of cluster's job factory.
func (q *Queue) FactoryDigest(ctx context.Context, cluster int) ([]byte, error) {
	var d []byte
	err := q.r.QueryRowContext(ctx, `SELECT digest FROM factories WHERE cluster = ?`, cluster).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job queue: cluster %d: %w", cluster, ErrFactoryDone)
	}
	if err != nil {
		return nil, fmt.Errorf("job queue: the job factory of cluster %d: %w", cluster, err)
	}
	return d, nil
}

// SubmitFactory commits a reserved cluster as the job factory f, and
// materializes its first procs in the same transaction, as Materialize
// does (at most room of them; build makes each). submission names the
// submit, as for SubmitCluster: a retry of a committed submission
// changes nothing and reports retry true.
func (q *Queue) SubmitFactory(ctx context.Context, f Factory, submission string, room int, build func(proc int) (Ad, error)) (retry bool, made []JobID, err error) {
	if f.Total <= 0 || f.Owner == "" {
		return false, nil, errors.New("job queue: a job factory of no jobs or no owner")
	}
	err = q.tx(ctx, func(tx *sql.Tx) error {
		var committed sql.NullInt64
		var prev string
		err := q.queryRow(ctx, tx, `SELECT committed, submission FROM clusters WHERE cluster = ?`, f.Cluster).Scan(&committed, &prev)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("job queue: cluster %d: %w", f.Cluster, ErrNoCluster)
		case err != nil:
			return fmt.Errorf("job queue: cluster %d: %w", f.Cluster, err)
		case committed.Valid && submission != "" && submission == prev:
			retry = true
			return nil
		case committed.Valid:
			return fmt.Errorf("job queue: cluster %d: %w", f.Cluster, ErrClusterCommitted)
		}
		if _, err := q.exec(ctx, tx, `INSERT INTO factories(cluster, owner, digest, total, next, lim, max_idle, paused) VALUES (?, ?, ?, ?, ?, ?, ?, 0)`,
			f.Cluster, f.Owner, f.Digest, f.Total, f.Next, f.Limit, f.MaxIdle); err != nil {
			return fmt.Errorf("job queue: storing the job factory of cluster %d: %w", f.Cluster, err)
		}
		if _, err := q.exec(ctx, tx, `UPDATE clusters SET committed = ?, submission = ? WHERE cluster = ?`, q.now().Unix(), submission, f.Cluster); err != nil {
			return fmt.Errorf("job queue: committing cluster %d: %w", f.Cluster, err)
		}
		made, err = q.materialize(ctx, tx, f.Cluster, room, build)
		return err
	})
	if err != nil {
		return false, nil, err
	}
	return retry, made, nil
}

// Materialize makes the next procs of cluster's factory, in ProcId
// order, as many as its limits let (procs of the cluster in the queue
// and not done, idle ones) and at most room, in one transaction with
// the factory's counter: a crash leaves every proc made once or not at
// all. build makes each proc's ad; its error makes none and is
// returned. A factory that made its last proc is deleted. A paused
// factory makes nothing.
func (q *Queue) Materialize(ctx context.Context, cluster, room int, build func(proc int) (Ad, error)) (made []JobID, err error) {
	err = q.tx(ctx, func(tx *sql.Tx) error {
		made, err = q.materialize(ctx, tx, cluster, room, build)
		return err
	})
	return made, err
}

func (q *Queue) materialize(ctx context.Context, tx *sql.Tx, cluster, room int, build func(proc int) (Ad, error)) ([]JobID, error) {
	var f Factory
	err := q.queryRow(ctx, tx, `SELECT total, next, lim, max_idle, paused FROM factories WHERE cluster = ?`, cluster).
		Scan(&f.Total, &f.Next, &f.Limit, &f.MaxIdle, &f.Paused)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job queue: cluster %d: %w", cluster, ErrFactoryDone)
	}
	if err != nil {
		return nil, fmt.Errorf("job queue: the job factory of cluster %d: %w", cluster, err)
	}
	var present, idle int
	if err := q.queryRow(ctx, tx, `SELECT COALESCE(SUM(CASE WHEN status NOT IN (?, ?) THEN n END), 0),
		COALESCE(SUM(CASE WHEN status = ? THEN n END), 0) FROM job_counts WHERE cluster = ?`,
		int(Removed), int(Completed), int(Idle), cluster).Scan(&present, &idle); err != nil {
		return nil, fmt.Errorf("job queue: counting the jobs of cluster %d: %w", cluster, err)
	}
	n := FactoryRoom(f, present, idle, room)
	if n <= 0 {
		return nil, nil
	}
	jobs := make([]Ad, n)
	for i := range jobs {
		if jobs[i], err = build(f.Next + i); err != nil {
			return nil, fmt.Errorf("job queue: materializing job %d.%d: %w", cluster, f.Next+i, err)
		}
	}
	clusterAd, err := q.clusterAd(ctx, tx, cluster)
	if err != nil {
		return nil, err
	}
	if _, err := q.insertProcs(ctx, tx, cluster, f.Next, jobs, clusterAd); err != nil {
		return nil, err
	}
	next := f.Next + n
	if next >= f.Total {
		_, err = q.exec(ctx, tx, `DELETE FROM factories WHERE cluster = ?`, cluster)
	} else {
		_, err = q.exec(ctx, tx, `UPDATE factories SET next = ? WHERE cluster = ?`, next, cluster)
	}
	if err != nil {
		return nil, fmt.Errorf("job queue: the job factory of cluster %d: %w", cluster, err)
	}
	f.Next = next
	if err := q.factoryAttrs(ctx, tx, cluster, f); err != nil {
		return nil, err
	}
	made := make([]JobID, n)
	for i := range made {
		made[i] = JobID{Cluster: cluster, Proc: f.Next - n + i}
	}
	return made, nil
}

// FactoryRoom is the number of procs factory f may make now, its
// cluster holding present procs not done, idle of them idle, and the
// queue room more jobs.
func FactoryRoom(f Factory, present, idle, room int) int {
	if f.Paused != FactoryRunning {
		return 0
	}
	n := min(f.Total-f.Next, room)
	if f.Limit > 0 {
		n = min(n, f.Limit-present)
	}
	if f.MaxIdle > 0 {
		n = min(n, f.MaxIdle-idle)
	}
	return max(n, 0)
}

// clusterAd returns the stored cluster ad of cluster, nil when it has none.
func (q *Queue) clusterAd(ctx context.Context, tx *sql.Tx, cluster int) (map[string]kv, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, value FROM cluster_attrs WHERE cluster = ?`, cluster)
	if err != nil {
		return nil, fmt.Errorf("job queue: reading cluster %d: %w", cluster, err)
	}
	defer rows.Close()
	var ad map[string]kv
	for rows.Next() {
		var v kv
		if err := rows.Scan(&v.name, &v.value); err != nil {
			return nil, fmt.Errorf("job queue: reading cluster %d: %w", cluster, err)
		}
		if ad == nil {
			ad = map[string]kv{}
		}
		ad[strings.ToLower(v.name)] = v
	}
	return ad, rows.Err()
}

// factoryAttrs writes a factory's attributes into its cluster's ad.
func (q *Queue) factoryAttrs(ctx context.Context, tx *sql.Tx, cluster int, f Factory) error {
	defer q.clusters.changed(cluster)
	for _, a := range [][2]string{
		{AttrMaterializeLimit, strconv.Itoa(f.Limit)}, {AttrMaterializeMaxIdle, strconv.Itoa(f.MaxIdle)},
		{AttrMaterializeNext, strconv.Itoa(f.Next)}, {AttrTotalSubmitProcs, strconv.Itoa(f.Total)},
		{AttrMaterializePaused, strconv.Itoa(f.Paused)},
	} {
		if _, err := q.exec(ctx, tx, `INSERT INTO cluster_attrs(cluster, name, value) VALUES (?, ?, ?)
			ON CONFLICT(cluster, name) DO UPDATE SET value = excluded.value`, cluster, a[0], a[1]); err != nil {
			return fmt.Errorf("job queue: cluster %d attribute %s: %w", cluster, a[0], err)
		}
	}
	return nil
}

// PauseFactory sets the pause state of cluster's factory (FactoryHeld,
// FactoryError, or FactoryRunning to resume it). It reports false when
// the cluster has no factory.
func (q *Queue) PauseFactory(ctx context.Context, cluster, state int) (bool, error) {
	var found bool
	err := q.tx(ctx, func(tx *sql.Tx) error {
		res, err := q.exec(ctx, tx, `UPDATE factories SET paused = ? WHERE cluster = ?`, state, cluster)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		if found = n > 0; !found {
			return nil
		}
		ad, err := q.clusterAd(ctx, tx, cluster)
		if err != nil || ad == nil {
			return err
		}
		_, err = q.exec(ctx, tx, `UPDATE cluster_attrs SET value = ? WHERE cluster = ? AND name = ?`, strconv.Itoa(state), cluster, AttrMaterializePaused)
		q.clusters.changed(cluster)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("job queue: pausing the job factory of cluster %d: %w", cluster, err)
	}
	return found, nil
}

// RemoveFactory deletes cluster's factory: it makes no more procs. It
// reports false when the cluster had none.
func (q *Queue) RemoveFactory(ctx context.Context, cluster int) (bool, error) {
	var found bool
	err := q.tx(ctx, func(tx *sql.Tx) error {
		res, err := q.exec(ctx, tx, `DELETE FROM factories WHERE cluster = ?`, cluster)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		found = n > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("job queue: removing the job factory of cluster %d: %w", cluster, err)
	}
	return found, nil
}
