package schedd_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// TestOutputArrivingHoldsTheLease: a job's output that takes longer to
// arrive than the claim's lease does not get the job requeued: the claim
// is alive while its output arrives, the output lands once the final
// report comes, and the job completes once, with no disconnection in its
// log.
func TestOutputArrivingHoldsTheLease(t *testing.T) {
	// A claim lease of 0.2 s (and one renewal interval more).
	n := startWith(t, "ALIVE_INTERVAL = 0.1\nMAX_CLAIM_ALIVES_MISSED = 2\n")
	n.running(1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// Keep the claim alive until the output starts, as the starter does.
	if err := n.c.JobReport(ctx, &wire.JobReport{ClaimID: "claim-0", JobID: "1.0", Kind: wire.ReportUpdate}); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("o"), wire.ChunkSize)
	info, err := n.c.SendOutput(ctx, wire.TransferHeader{ClaimID: "claim-0", JobID: "1.0", Stream: wire.StreamStdout},
		func(tw *wire.TransferWriter) error {
			for range 3 {
				if _, err := tw.Write(chunk); err != nil {
					return err
				}
				// Longer than the lease, and than the schedd's sweep.
				time.Sleep(1500 * time.Millisecond)
			}
			_, err := tw.End()
			return err
		})
	if err != nil {
		t.Fatalf("sending the output, slowly: %v", err)
	}
	if err := n.c.JobReport(ctx, &wire.JobReport{ClaimID: "claim-0", JobID: "1.0", Kind: wire.ReportExited, Outputs: []wire.FileInfo{*info}}); err != nil {
		t.Fatalf("the final report: %v", err)
	}
	hist, err := n.c.History(ctx, &wire.QueryJobsRequest{Args: []string{"1.0"}})
	if err != nil || len(hist) != 1 || hist[0].Ad["JobStatus"] != "4" {
		t.Fatalf("history of 1.0: %v, %v", hist, err)
	}
	if b, err := os.ReadFile(filepath.Join(n.jobs, "out.0")); err != nil || len(b) != 3*wire.ChunkSize {
		t.Errorf("out.0: %d bytes, %v", len(b), err)
	}
	evs := n.events()
	for _, bad := range []string{"JobDisconnectedEvent 1.0", "JobReconnectFailedEvent 1.0", "JobEvictedEvent 1.0"} {
		if slices.Contains(evs, bad) {
			t.Errorf("the job log has %s: %v", bad, evs)
		}
	}
}
