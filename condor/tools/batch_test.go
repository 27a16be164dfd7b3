package tools_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/tools"
)

// TestBatcherJobsAreTheCallersOwn checks that the jobs a Batcher finds
// (a DAG manager's recovery adopts them as its nodes) are the caller's
// own: another user's jobs claiming the same DAG are left out.
func TestBatcherJobsAreTheCallersOwn(t *testing.T) {
	p := startPool(t)
	nodesLog := filepath.Join(p.dir, "diamond.dag.nodes.log")
	sub := "executable = /bin/true\nrequirements = false\n+DAGManNodesLog = \"" + nodesLog + "\"\n+DAGNodeName = \"A\"\nqueue\n"
	if err := os.WriteFile(filepath.Join(p.dir, "job.sub"), []byte(sub), 0o644); err != nil {
		t.Fatal(err)
	}
	// Bob, with a WRITE token of his own, queues a job naming alice's DAG.
	alice := p.env
	p.env = append(slices.Clone(alice), "POND_TOKEN="+testpool.Token(t, "bob", auth.Write), "USER=bob")
	p.must("submit", "job.sub")
	p.env = alice

	ctx := context.Background()
	b, err := tools.NewBatcher(nil, p.env)
	if err != nil {
		t.Fatal(err)
	}
	con := "DAGManNodesLog == " + `"` + nodesLog + `"`
	proj := []string{"ClusterId", "ProcId", "Owner", "DAGNodeName"}
	// Before alice submits anything, the Batcher asks who she is.
	if queue, _, err := b.Jobs(ctx, con, proj, false, 10); err != nil || len(queue) != 0 {
		t.Fatalf("alice's Batcher found %v (%v), want none of bob's jobs", queue, err)
	}
	res := b.Submit(ctx, []tools.BatchSpec{{SubmitFile: "job.sub", Dir: p.dir}, {SubmitFile: "job.sub", Dir: p.dir}}, io.Discard)
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, b := range []*tools.Batcher{b, mustBatcher(t, p.env)} {
		queue, _, err := b.Jobs(ctx, con, proj, true, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(queue) != 2 {
			t.Fatalf("alice's Batcher found %d jobs (%v), want her 2", len(queue), queue)
		}
		for _, j := range queue {
			if owner := strings.Trim(j.Ad["Owner"], `"`); owner != "alice" {
				t.Fatalf("alice's Batcher found job %s of %s", j.ID, owner)
			}
		}
	}
	if out := p.must("q", "-af", "Owner"); strings.Count(out, "bob") != 1 || strings.Count(out, "alice") != 2 {
		t.Fatalf("the queue's owners: %q, want bob's job and alice's 2", out)
	}
}

func mustBatcher(t *testing.T, env []string) *tools.Batcher {
	t.Helper()
	b, err := tools.NewBatcher(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBatcherRefusedBatch checks that a batch one of whose clusters the
// schedd refuses (a job naming another Owner) queues nothing, and that
// each cluster's error says which cluster it was, so that the one the
// schedd names is told from the others.
func TestBatcherRefusedBatch(t *testing.T) {
	p := startPool(t)
	for name, text := range map[string]string{
		"ok.sub":  "executable = /bin/true\nrequirements = false\nqueue\n",
		"bob.sub": "executable = /bin/true\nrequirements = false\n+Owner = \"bob\"\nqueue\n",
	} {
		if err := os.WriteFile(filepath.Join(p.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := mustBatcher(t, p.env)
	res := b.Submit(context.Background(), []tools.BatchSpec{{SubmitFile: "ok.sub", Dir: p.dir},
		{SubmitFile: "bob.sub", Dir: p.dir}, {SubmitFile: "ok.sub", Dir: p.dir}}, io.Discard)
	var bobs string
	for i, r := range res {
		if r.Err == nil {
			t.Fatalf("cluster %d of a refused batch queued: %+v", i, r.Resp)
		}
		if !strings.Contains(r.Err.Error(), `names Owner "bob" but the caller is "alice"`) {
			t.Fatalf("cluster %d: %v, want the schedd's reason", i, r.Err)
		}
		if i == 1 {
			bobs = r.Err.Error()
		}
	}
	// The schedd names bob's job "C.0"; its cluster's error starts with C.
	var c int
	if _, err := fmt.Sscanf(bobs, "cluster %d not committed:", &c); err != nil || !strings.Contains(bobs, fmt.Sprintf("job %d.0 names", c)) {
		t.Fatalf("bob's cluster's error %q does not name its cluster as the schedd's reason does", bobs)
	}
	if out := p.must("q", "-af", "Owner"); strings.TrimSpace(out) != "" {
		t.Fatalf("a refused batch queued jobs of %q", out)
	}
}
