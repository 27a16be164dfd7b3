package schedd_test

import (
	"context"
	"testing"

	"github.com/pond-htc/pond/condor/wire"
)

// TestIdleAutoclusters checks what a negotiator gets of a growing queue:
// one ad per autocluster, at most Limit ids of each, the count of all,
// and autoclusters kept apart by the attributes its slots refer to.
func TestIdleAutoclusters(t *testing.T) {
	t.Parallel()
	n := start(t)
	n.fill(150)
	n.fill(50)
	n.submitFile("bob", idleFile(5))
	ctx := context.Background()
	resp, err := n.c.IdleClusters(ctx, &wire.IdleRequest{Owner: "alice", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Clusters) != 1 {
		t.Fatalf("alice's 200 jobs differ only in Args and ProcId: want 1 autocluster, got %d", len(resp.Clusters))
	}
	ac := resp.Clusters[0]
	if ac.Count != 200 || len(ac.IDs) != 3 || ac.IDs[0] != "1.0" || ac.IDs[2] != "1.2" {
		t.Fatalf("autocluster: count %d, ids %v; want 200 jobs, ids 1.0 1.1 1.2", ac.Count, ac.IDs)
	}
	// A negotiator whose slots look at ProcId keeps every job apart.
	resp, err = n.c.IdleClusters(ctx, &wire.IdleRequest{Owner: "alice", SignificantAttrs: []string{"procid"}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Clusters) != 150 {
		t.Fatalf("with ProcId significant: want 150 autoclusters (one per ProcId), got %d", len(resp.Clusters))
	}
	for _, ac := range resp.Clusters {
		if ac.Count != len(ac.IDs) || ac.Count < 1 || ac.Count > 2 {
			t.Fatalf("autocluster %v: count %d", ac.IDs, ac.Count)
		}
	}
	// All owners: bob's jobs are his own autocluster.
	jobs, err := n.c.Idle(ctx, &wire.IdleRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 205 {
		t.Fatalf("all idle jobs: got %d, want 205", len(jobs))
	}
	// After a restart the jobs are filed again, finer still.
	n.restart()
	resp, err = n.c.IdleClusters(ctx, &wire.IdleRequest{Owner: "bob", SignificantAttrs: []string{"procid"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Clusters) != 5 {
		t.Fatalf("bob's jobs after a restart: want 5 autoclusters, got %d", len(resp.Clusters))
	}
}
