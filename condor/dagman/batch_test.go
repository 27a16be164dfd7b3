package dagman

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
)

// batchSchedd stands in for the schedd's batch submission: it commits a
// batch's clusters together (or, when told to, none of them) and writes
// each cluster's submit, execute and terminate events to the nodes' log
// as the schedd and its jobs would.
type batchSchedd struct {
	t    *testing.T
	log  *joblog.Writer
	mu   sync.Mutex
	next int
	// fail are the calls (0 first) whose batch is refused.
	fail map[int]bool
	// calls are the sizes of the batches asked for, committed the
	// nodes whose batches were committed, in order.
	calls     []int
	committed []string
}

func (s *batchSchedd) submit(_ context.Context, reqs []SubmitRequest) []SubmitResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := len(s.calls)
	s.calls = append(s.calls, len(reqs))
	res := make([]SubmitResult, len(reqs))
	if s.fail[call] {
		for i := range res {
			res[i].Err = errors.New("the schedd refused the batch: nothing queued")
		}
		return res
	}
	var evs []joblog.Event
	for i, req := range reqs {
		s.next++
		c := s.next
		s.committed = append(s.committed, req.Node)
		res[i].Submitted = Submitted{Cluster: c, Jobs: 1}
		evs = append(evs, joblog.Event{Type: joblog.Submit, Cluster: c, Host: "<127.0.0.1:0>", Notes: "DAG Node: " + req.Node})
	}
	for _, ev := range slices.Clone(evs) {
		evs = append(evs, joblog.Event{Type: joblog.Execute, Cluster: ev.Cluster, Host: "<127.0.0.1:0>"},
			joblog.Event{Type: joblog.Terminated, Cluster: ev.Cluster, TerminatedNormally: true})
	}
	if err := s.log.Write(evs...); err != nil {
		s.t.Error(err)
	}
	return res
}

// writeDAG writes a DAG of n independent nodes N0... of one submit file.
func writeDAG(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "JOB N%d true.sub\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "true.sub"), []byte("executable = /bin/true\nqueue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dag := filepath.Join(dir, "d.dag")
	if err := os.WriteFile(dag, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dag
}

func TestBatches(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		want    [][2]int
	}{
		{0, 10, nil},
		{1, 10, [][2]int{{0, 1}}},
		{10, 10, [][2]int{{0, 10}}},
		{11, 10, [][2]int{{0, 10}, {10, 11}}},
		{5, 2, [][2]int{{0, 2}, {2, 4}, {4, 5}}},
		{3, 0, [][2]int{{0, 1}, {1, 2}, {2, 3}}}, // a size below 1 is 1
	} {
		if got := batches(tc.n, tc.size); !slices.Equal(got, tc.want) {
			t.Errorf("batches(%d, %d) = %v, want %v", tc.n, tc.size, got, tc.want)
		}
	}
}

// TestSubmitBatches runs DAGs whose ready nodes are submitted in batches:
// each batch is one call of SubmitBatch, bounded by BatchSize and the
// throttles; a refused batch is submitted again (none of its nodes lost,
// none queued twice).
func TestSubmitBatches(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodes     int
		size      int
		maxJobs   int
		fail      map[int]bool
		wantCalls []int
		// resubmitted: the nodes of the refused batch are submitted
		// again after wantCalls, in batches of at most size whose split
		// depends on when each node's retry comes due.
		resubmitted int
	}{
		{name: "one batch", nodes: 3, wantCalls: []int{3}},
		{name: "batch boundaries", nodes: 5, size: 2, wantCalls: []int{2, 2, 1}},
		{name: "exactly full", nodes: 4, size: 4, wantCalls: []int{4}},
		{name: "throttled by maxjobs", nodes: 5, maxJobs: 3, wantCalls: []int{3, 2}},
		{name: "a refused batch", nodes: 3, size: 2, fail: map[int]bool{0: true}, wantCalls: []int{2, 1}, resubmitted: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dag := writeDAG(t, tc.nodes)
			s := &batchSchedd{t: t, log: joblog.NewWriter(nodesLog(dag), joblog.WriterOptions{}), fail: tc.fail}
			code, err := Run(context.Background(), dag, Options{SubmitBatch: s.submit, BatchSize: tc.size, MaxJobs: tc.maxJobs,
				Poll: 10 * time.Millisecond, Out: io.Discard})
			if err != nil || code != 0 {
				t.Fatalf("Run: code %d, %v", code, err)
			}
			calls := s.calls
			if tc.resubmitted > 0 && len(calls) > len(tc.wantCalls) {
				again := 0
				for _, c := range calls[len(tc.wantCalls):] {
					if c > tc.size {
						t.Errorf("batches of %v: one over the size %d", s.calls, tc.size)
					}
					again += c
				}
				if again != tc.resubmitted {
					t.Errorf("batches of %v: %d nodes submitted again, want %d", s.calls, again, tc.resubmitted)
				}
				calls = calls[:len(tc.wantCalls)]
			}
			if !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("batches of %v, want %v then %d nodes again", s.calls, tc.wantCalls, tc.resubmitted)
			}
			got := slices.Clone(s.committed)
			slices.Sort(got)
			var want []string
			for i := range tc.nodes {
				want = append(want, fmt.Sprintf("N%d", i))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("nodes queued %v, want each of %v once", got, want)
			}
		})
	}
}

// TestRecoverCommittedBatch: a DAG manager stopped after the schedd
// committed a batch but before the batch's submit events reached the
// nodes' log (one node's job even ran and ended meanwhile) recovers the
// batch's nodes from the schedd and queues none of them again.
func TestRecoverCommittedBatch(t *testing.T) {
	dag := writeDAG(t, 3)
	log := joblog.NewWriter(nodesLog(dag), joblog.WriterOptions{})
	// Cluster 101 (N0) ran and ended: its events are in the log, but
	// not its submit event. Cluster 102 (N1) is still queued.
	if err := log.Write(joblog.Event{Type: joblog.Execute, Cluster: 101, Host: "<127.0.0.1:0>"}); err != nil {
		t.Fatal(err)
	}
	// The lock of a DAG manager that is gone, from byte 0 of the log.
	dead := exec1(t)
	if err := os.WriteFile(lockPath(dag), fmt.Appendf(nil, "%d 0\n", dead), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &batchSchedd{t: t, log: log, next: 200}
	var asked []int
	queued := func(_ context.Context, nodesLog string, history []int) ([]QueuedNode, error) {
		asked = slices.Clone(history)
		// N0's job ends; N1's job runs and ends once the DAG manager
		// asked.
		if err := log.Write(
			joblog.Event{Type: joblog.Terminated, Cluster: 101, TerminatedNormally: true},
			joblog.Event{Type: joblog.Execute, Cluster: 102, Host: "<127.0.0.1:0>"},
			joblog.Event{Type: joblog.Terminated, Cluster: 102, TerminatedNormally: true}); err != nil {
			t.Error(err)
		}
		return []QueuedNode{{Node: "N0", Cluster: 101, Jobs: 1}, {Node: "N1", Cluster: 102, Jobs: 1}}, nil
	}
	code, err := Run(context.Background(), dag, Options{SubmitBatch: s.submit, Queued: queued,
		Poll: 10 * time.Millisecond, Out: io.Discard})
	if err != nil || code != 0 {
		t.Fatalf("Run: code %d, %v", code, err)
	}
	if !slices.Equal(asked, []int{101}) {
		t.Errorf("asked the schedd's history of clusters %v, want [101]", asked)
	}
	if !slices.Equal(s.committed, []string{"N2"}) {
		t.Errorf("nodes queued again %v, want only N2 (N0 and N1 were queued by the batch)", s.committed)
	}
}

// exec1 returns the pid of a process that has exited.
func exec1(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}
