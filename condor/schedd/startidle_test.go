package schedd_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// TestStartDoesNotWaitForIdleJobs restarts a schedd over a queue of many
// idle jobs: it starts without reading them (its start takes far less
// than their filing), and once it runs it offers every one of them, each
// once, to the negotiator. An agent whose schedd read a large queue before
// it started served nothing meanwhile, its collector included.
func TestStartDoesNotWaitForIdleJobs(t *testing.T) {
	const n = 10000
	node := start(t)
	ctx := context.Background()
	jobs := make([]jobqueue.Ad, n)
	for i := range jobs {
		jobs[i] = jobqueue.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "Arguments": strconv.Quote(strconv.Itoa(i)),
			"Requirements": `TARGET.Memory >= RequestMemory && TARGET.Arch == "X86_64"`, "RequestMemory": "128",
			"RequestCpus": "1", "Iwd": `"/tmp"`, "JobUniverse": "5"}
	}
	if _, err := node.s.Queue().Submit(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	node.stop()
	began := time.Now()
	node.open()
	opened := time.Since(began)

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	began = time.Now()
	go func() { done <- node.s.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	idle := func() (int, error) {
		resp, err := node.c.IdleClusters(ctx, &wire.IdleRequest{Peek: true, Limit: 1})
		if err != nil {
			return 0, err
		}
		total := 0
		for _, ac := range resp.Clusters {
			total += ac.Count
		}
		return total, nil
	}
	var got int
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if got, err = idle(); err != nil {
			t.Fatal(err)
		}
		if got >= n || time.Now().After(deadline) {
			break
		}
	}
	filed := time.Since(began)
	if got != n {
		t.Fatalf("the schedd offers %d idle jobs after its restart, want %d", got, n)
	}
	t.Logf("start %v, idle jobs filed %v later", opened, filed)
	if opened > filed/2 {
		t.Errorf("the schedd took %v to start over %d idle jobs, and %v more to file them: its start waits for them", opened, n, filed)
	}
	// Every job once: the ids offered are distinct.
	resp, err := node.c.IdleClusters(ctx, &wire.IdleRequest{Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ac := range resp.Clusters {
		for _, id := range ac.IDs {
			if seen[id] {
				t.Fatalf("job %s offered twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct idle jobs offered, want %d", len(seen), n)
	}
	if !seen[fmt.Sprintf("1.%d", n-1)] {
		t.Errorf("the last job, 1.%d, is not offered", n-1)
	}
}
