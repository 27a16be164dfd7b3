package schedd

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// idleOrder is the order the schedd offers its idle jobs in, and the job
// a claim freed by a finished job takes next.
func idleOrder(t *testing.T, s *Schedd) (string, string) {
	t.Helper()
	resp, err := s.Idle(context.Background(), &wire.IdleRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ac := range resp.Clusters {
		ids = append(ids, ac.IDs...)
	}
	s.mu.Lock()
	next, _ := s.idle.firstFit(func(*idleCluster, *idleJob) bool { return true })
	s.mu.Unlock()
	return strings.Join(ids, " "), next.String()
}

// TestIdleJobPrioOrder: a user's idle jobs are offered, and taken by a
// reused claim, in JobPrio order (higher first), then in submission
// order; a JobPrio changed by condor_qedit/condor_prio (a queue-management
// transaction) takes effect.
func TestIdleJobPrioOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		prios []string // JobPrio of procs 0, 1, ...
		want  string
	}{
		{"none", []string{"", "", ""}, "1.0 1.1 1.2"},
		{"equal", []string{"5", "5", "5"}, "1.0 1.1 1.2"},
		{"higher first", []string{"0", "10", "5", "10"}, "1.1 1.3 1.2 1.0"},
		{"negative after default", []string{"-3", "", "-1"}, "1.1 1.2 1.0"},
		{"expression", []string{"2 * 3", "4"}, "1.0 1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newTestSchedd(t)
			ctx := context.Background()
			nc, err := s.NewCluster(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var jobs []wire.Ad
			for _, p := range tt.prios {
				a := wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "1"}
				if p != "" {
					a["JobPrio"] = p
				}
				jobs = append(jobs, a)
			}
			if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: jobs}); err != nil {
				t.Fatal(err)
			}
			got, next := idleOrder(t, s)
			if got != tt.want {
				t.Errorf("idle order %q, want %q", got, tt.want)
			}
			if first, _, _ := strings.Cut(tt.want, " "); next != first {
				t.Errorf("next job for a freed claim %s, want %s", next, first)
			}
		})
	}

	t.Run("qedit", func(t *testing.T) {
		t.Parallel()
		s := newTestSchedd(t)
		ctx := context.Background()
		nc, err := s.NewCluster(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var jobs []wire.Ad
		for range 3 {
			jobs = append(jobs, wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "1"})
		}
		if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
		// condor_prio -p 7 1.2, then condor_prio -p -1 1.2 again: the
		// job moves up, then below the others.
		for _, step := range []struct{ prio, want string }{{"7", "1.2 1.0 1.1"}, {"-1", "1.0 1.1 1.2"}, {"7", "1.2 1.0 1.1"}} {
			ss := newSession(t, s, "alice", false)
			ss.do(msg(qBeginTransaction))
			if r := ss.do(msg(qSetAttribute, nc.Cluster, 2, step.prio, "JobPrio")); r.rval < 0 {
				t.Fatalf("SetAttribute JobPrio: %+v", r)
			}
			if r := ss.do(msg(qCommitTransaction, 0)); r.rval < 0 {
				t.Fatalf("CommitTransaction: %+v", r)
			}
			got, next := idleOrder(t, s)
			if got != step.want {
				t.Errorf("after JobPrio = %s: idle order %q, want %q", step.prio, got, step.want)
			}
			if first, _, _ := strings.Cut(step.want, " "); next != first {
				t.Errorf("after JobPrio = %s: next job %s, want %s", step.prio, next, first)
			}
		}
		s.mu.Lock()
		n := s.idle.len()
		s.mu.Unlock()
		if n != 3 {
			t.Errorf("%d idle jobs, want 3", n)
		}
	})
}

// TestPrioQueueCompacts: ids left stale by jobs gone or refiled are
// skipped, and a bucket grown with them is compacted, so that a queue of
// many jobs re-prioritized stays bounded.
func TestPrioQueueCompacts(t *testing.T) {
	t.Parallel()
	live := map[jobqueue.JobID]int{}
	var q prioQueue
	valid := func(p int, id jobqueue.JobID) bool { v, ok := live[id]; return ok && v == p }
	for i := range 5000 {
		id := jobqueue.JobID{Cluster: 1, Proc: i}
		live[id] = i % 3
		q.push(i%3, id)
	}
	// Every job refiled at JobPrio 9, then all but the last gone.
	for id := range live {
		live[id] = 9
		q.push(9, id)
	}
	for id := range live {
		if id.Proc != 4999 {
			delete(live, id)
		}
	}
	q.compact(len(live), valid)
	if k := q.first(); !k.ok || k.prio != 9 || k.id.Proc != 4999 {
		t.Fatalf("first %+v, want 1.4999 at JobPrio 9", k)
	}
	total := 0
	q.each(func(int, jobqueue.JobID) bool { total++; return true })
	if total > 2*len(live)+1024 {
		t.Errorf("%d ids kept for %d live jobs", total, len(live))
	}
	if len(q.prios) != 1 {
		t.Errorf("JobPrio buckets %v, want only 9", q.prios)
	}
}

// BenchmarkRefileIdlePrio re-files every idle job of a queue after a
// condor_prio across all of them: POND_BENCH_REFILE_JOBS idle jobs
// (1,000 when unset).
func BenchmarkRefileIdlePrio(b *testing.B) {
	n := 1000
	if v := os.Getenv("POND_BENCH_REFILE_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("POND_BENCH_REFILE_JOBS = %q: want a positive number", v)
		}
	}
	s := newTestSchedd(b)
	ctx := context.Background()
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]wire.Ad, n)
	for i := range jobs {
		jobs[i] = wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "1"}
	}
	if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: jobs}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		edits := make(map[jobqueue.JobID]wire.Ad, n)
		for p := range n {
			edits[jobqueue.JobID{Cluster: nc.Cluster, Proc: p}] = wire.Ad{"JobPrio": strconv.Itoa(i%2 + 1)}
		}
		s.refileIdle(ctx, edits)
	}
	b.StopTimer()
	s.mu.Lock()
	got := s.idle.len()
	s.mu.Unlock()
	if got != n {
		b.Fatalf("%d idle jobs after re-filing, want %d", got, n)
	}
}
