package dagman

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
)

func TestRemovedWithDAG(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   bool
	}{
		{"removed because OtherJobRemoveRequirements = DAGManJobId =?= 7 fired when job 7.0 was removed", true},
		// HTCondor's schedd's words.
		{"removed because <OtherJobRemoveRequirements = DAGManJobId =?= 7> fired when job (7.0) was removed", true},
		{"removed because OtherJobRemoveRequirements = DAGManJobId =?= 70 fired when job 70.0 was removed", false},
		{"removed because OtherJobRemoveRequirements = DAGManJobId =?= 8 fired when job 8.0 was removed", false},
		{"via condor_rm (by user alice)", false},
		{"", false},
	} {
		m := &Manager{opts: Options{DAGManJobID: 7}}
		if got := m.removedWithDAG(tc.reason); got != tc.want {
			t.Errorf("removedWithDAG(%q) = %v, want %v", tc.reason, got, tc.want)
		}
	}
	if (&Manager{}).removedWithDAG("removed because OtherJobRemoveRequirements = DAGManJobId =?= 0 fired when job 0.0 was removed") {
		t.Error("a DAG manager run without a job of its own took a removal for its DAG's")
	}
}

// TestNodeRemovedWithTheDAG runs the DAG A -> B whose node A's job the
// schedd removes: removed with the DAG manager's own job (its
// OtherJobRemoveRequirements), which the schedd's signal has not told
// yet, the DAG is removed (its nodes' jobs removed, exit code 1) and A
// has not failed; removed by a user on its own, A fails. B is never
// submitted, and a rescue DAG is written either way.
func TestNodeRemovedWithTheDAG(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		wantOut      string
		notOut       string
	}{
		{"with the DAG", "removed because OtherJobRemoveRequirements = DAGManJobId =?= 7 fired when job 7.0 was removed",
			"The DAG manager's job was removed: removing the nodes' jobs", "Node A failed"},
		{"by a user", "via condor_rm (by user alice)", "Node A failed", "removing the nodes' jobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dag := filepath.Join(dir, "r.dag")
			if err := os.WriteFile(filepath.Join(dir, "n.sub"), []byte("executable = /bin/true\nqueue\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dag, []byte("JOB A n.sub\nJOB B n.sub\nPARENT A CHILD B\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			log := joblog.NewWriter(nodesLog(dag), joblog.WriterOptions{})
			var mu sync.Mutex
			var submitted []string
			submit := func(_ context.Context, reqs []SubmitRequest) []SubmitResult {
				mu.Lock()
				defer mu.Unlock()
				res := make([]SubmitResult, len(reqs))
				for i, req := range reqs {
					c := 100 + len(submitted)
					submitted = append(submitted, req.Node)
					res[i].Submitted = Submitted{Cluster: c, Jobs: 1}
					if err := log.Write(joblog.Event{Type: joblog.Submit, Cluster: c, Host: "<127.0.0.1:0>", Notes: "DAG Node: " + req.Node},
						joblog.Event{Type: joblog.Execute, Cluster: c, Host: "<127.0.0.1:0>"},
						joblog.Event{Type: joblog.Aborted, Cluster: c, Message: tc.reason}); err != nil {
						t.Error(err)
					}
				}
				return res
			}
			var out strings.Builder
			code, err := Run(context.Background(), dag, Options{SubmitBatch: submit, DAGManJobID: 7, Poll: 10 * time.Millisecond, Out: &out,
				Remove: func(context.Context, int) error { return nil }})
			if err != nil || code != 1 {
				t.Fatalf("Run: code %d, %v, want 1:\n%s", code, err, out.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) || strings.Contains(out.String(), tc.notOut) {
				t.Errorf("dagman.out says %q, want %q and not %q", out.String(), tc.wantOut, tc.notOut)
			}
			if fmt.Sprint(submitted) != "[A]" {
				t.Errorf("submitted %v, want only A", submitted)
			}
			if _, err := os.Stat(rescuePath(dag, 1)); err != nil {
				t.Errorf("no rescue DAG: %v", err)
			}
		})
	}
}
