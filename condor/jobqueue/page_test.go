package jobqueue

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPage walks a queue page by page and picks, in the database, only
// the jobs that carry an attribute other than false.
func TestPage(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	// Cluster 1: ten jobs, every third with PeriodicRemove set.
	jobs := ads(10, "alice")
	for i := range jobs {
		jobs[i]["PeriodicRemove"] = "false"
		if i%3 == 0 {
			jobs[i]["PeriodicRemove"] = "(time() - QDate) > " + strconv.Itoa(i)
		}
	}
	if _, err := q.Submit(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	// Cluster 2: all its jobs share a PeriodicHold, spelled in another case.
	shared := ads(3, "bob")
	for i := range shared {
		shared[i]["periodichold"] = "JobStatus == 2"
	}
	if _, err := q.Submit(ctx, shared); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Hold(ctx, OneJob(JobID{1, 3}), "test", 1, 0); err != nil {
		t.Fatal(err)
	}
	walk := func(pq PageQuery) []string {
		t.Helper()
		var got []string
		for {
			page, err := q.Page(ctx, pq)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > pq.Limit {
				t.Fatalf("page of %d jobs, limit %d", len(page), pq.Limit)
			}
			if len(page) == 0 {
				return got
			}
			for _, j := range page {
				if j.Ad["Cmd"] == "" {
					t.Fatalf("job %s without its attributes: %v", j.ID, j.Ad)
				}
				got = append(got, j.ID.String())
			}
			pq.After = page[len(page)-1].ID
		}
	}
	for _, tc := range []struct {
		name string
		pq   PageQuery
		want string
	}{
		{"all", PageQuery{Limit: 4}, "1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7 1.8 1.9 2.0 2.1 2.2"},
		{"carrying", PageQuery{Limit: 2, Carrying: []string{"PeriodicHold", "PeriodicRemove"}}, "1.0 1.3 1.6 1.9 2.0 2.1 2.2"},
		{"carrying one", PageQuery{Limit: 1, Carrying: []string{"PERIODICREMOVE"}}, "1.0 1.3 1.6 1.9"},
		{"held", PageQuery{Limit: 5, Status: []Status{Held}}, "1.3"},
		{"idle carrying", PageQuery{Limit: 5, Status: []Status{Idle}, Carrying: []string{"PeriodicRemove"}}, "1.0 1.6 1.9"},
		{"after", PageQuery{Limit: 100, After: JobID{1, 8}}, "1.9 2.0 2.1 2.2"},
		{"carrying nothing", PageQuery{Limit: 5, Carrying: []string{}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			for i, id := range walk(tc.pq) {
				if i > 0 {
					got += " "
				}
				got += id
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := q.Page(ctx, PageQuery{}); err == nil {
		t.Error("a page without a limit was accepted")
	}
}

// BenchmarkPageFew walks a queue of 100,000 jobs of which 10 carry a
// periodic expression: one pass reads only those 10.
func BenchmarkPageFew(b *testing.B) {
	ctx := context.Background()
	q := benchQueue(b, "NORMAL")
	for c := range 10 {
		jobs := expandFile(b, "executable = /bin/true\nlog = job.log\nqueue 10000\n", c+1)
		jobs[c*7]["PeriodicRemove"] = "(time() - QDate) > 120"
		if _, err := q.Submit(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		pq := PageQuery{Limit: 500, Status: []Status{Idle, Running, Held}, Carrying: []string{"PeriodicHold", "PeriodicRelease", "PeriodicRemove"}}
		page, err := q.Page(ctx, pq)
		if err != nil || len(page) != 10 {
			b.Fatalf("%d jobs, %v", len(page), err)
		}
	}
}

// TestPagePeriodicPlan checks that the database finds the jobs carrying a
// periodic expression through their index, without reading every job or
// sorting: the periodic policy pass costs nothing when no job has one.
func TestPagePeriodicPlan(t *testing.T) {
	ctx := context.Background()
	q := openT(t)
	if _, err := q.Submit(ctx, ads(3, "alice")); err != nil {
		t.Fatal(err)
	}
	query, args := pageQuery(PageQuery{After: JobID{1, 0}, Limit: 500, Status: []Status{Idle, Running, Held},
		Carrying: []string{"PeriodicHold", "PeriodicRelease", "PeriodicRemove"}})
	rows, err := q.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(plan, "\n")
	for _, bad := range []string{"SCAN", "TEMP B-TREE"} {
		if strings.Contains(joined, bad) {
			t.Errorf("plan has %s:\n%s", bad, joined)
		}
	}
	for _, idx := range []string{"cluster_attrs_policy", "proc_attrs_policy"} {
		if !strings.Contains(joined, idx) {
			t.Errorf("plan does not use %s:\n%s", idx, joined)
		}
	}
}

// TestPeriodicIndexesUpgraded opens a queue made with the partial indexes
// of before (their names compared with IN): they are dropped and the
// indexes of now made in their stead, which hold the jobs of the policy
// attributes already queued.
func TestPeriodicIndexesUpgraded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(ctx, []Ad{{"Owner": `"alice"`, "PeriodicHold": "true", "Cmd": `"/bin/true"`}}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`DROP INDEX cluster_attrs_policy`, `DROP INDEX proc_attrs_policy`,
		`CREATE UNIQUE INDEX cluster_attrs_periodic ON cluster_attrs(name, cluster) WHERE name IN ('PeriodicHold', 'PeriodicRelease', 'PeriodicRemove') AND lower(trim(value)) <> 'false'`,
		`CREATE UNIQUE INDEX proc_attrs_periodic ON proc_attrs(name, cluster, proc) WHERE name IN ('PeriodicHold', 'PeriodicRelease', 'PeriodicRemove') AND lower(trim(value)) <> 'false'`,
	} {
		if _, err := q.w.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	q.Close()
	if q, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var names []string
	rows, err := q.r.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE '%attrs_p%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	if got := strings.Join(names, " "); got != "cluster_attrs_policy proc_attrs_policy" {
		t.Errorf("indexes after the upgrade: %s", got)
	}
	var n int
	if err := q.r.QueryRowContext(ctx, `SELECT count(*) FROM cluster_attrs INDEXED BY cluster_attrs_policy WHERE `+periodicNamesSQL("name")+` AND lower(trim(value)) <> 'false'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the cluster's PeriodicHold in the new index: %d, %v", n, err)
	}
}
