package schedd_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pond-htc/pond/condor/wire"
)

// TestFinalReportRepeated sends jobs' final reports again, as a starter
// does when the schedd's answer is late: copies at once while the first is
// applied, and again once it was. Each copy gets the first's answer, and
// changes nothing: one end per job in its log, no second event. A report
// of a job its claim never ran is still refused.
func TestFinalReportRepeated(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	n.running(3)
	report := func(r wire.JobReport) error {
		r.SlotName = "slot1@exec"
		return n.c.JobReport(ctx, &r)
	}
	for _, r := range []wire.JobReport{
		{ClaimID: "claim-0", JobID: "1.0", Kind: wire.ReportExited, ExitCode: 0, WallClock: 1},
		{ClaimID: "claim-1", JobID: "1.1", Kind: wire.ReportHold, HoldReason: "over its memory request", HoldCode: 34},
		{ClaimID: "claim-2", JobID: "1.2", Kind: wire.ReportEvicted, Reason: "the machine is draining"},
	} {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = report(r) })
		}
		wg.Wait()
		errs = append(errs, report(r))
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s report of %s, copy %d: %v", r.Kind, r.JobID, i, err)
			}
		}
	}
	if err := report(wire.JobReport{ClaimID: "claim-0", JobID: "1.1", Kind: wire.ReportExited}); status(err) != 404 {
		t.Errorf("a report of a job its claim did not run: %v, want HTTP 404", err)
	}
	hist, err := n.c.History(ctx, &wire.QueryJobsRequest{Args: []string{"1.0"}})
	if err != nil || len(hist) != 1 || hist[0].Ad["NumJobCompletions"] != "1" {
		t.Errorf("history of 1.0: %v, %v", hist, err)
	}
	if j := n.job("1.1"); j["JobStatus"] != "5" {
		t.Errorf("job 1.1: JobStatus %s, want held", j["JobStatus"])
	}
	if j := n.job("1.2"); j["JobStatus"] != "1" {
		t.Errorf("job 1.2: JobStatus %s, want idle", j["JobStatus"])
	}
	var got []string
	for _, ev := range n.events() {
		if !strings.HasPrefix(ev, "SubmitEvent") && !strings.HasPrefix(ev, "JobReconnectedEvent") {
			got = append(got, ev)
		}
	}
	want := []string{"FileTransferEvent 1.0", "FileTransferEvent 1.0", "JobImageSizeEvent 1.0", "JobTerminatedEvent 1.0",
		"JobHeldEvent 1.1", "JobEvictedEvent 1.2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job log after the submit and reconnect events (-want +got)\n%s", diff)
	}
}
