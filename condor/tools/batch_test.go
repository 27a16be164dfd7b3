package tools_test

import (
	"context"
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
