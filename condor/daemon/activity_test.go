package daemon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/wire"
)

// TestClaimReuseAdvertisesActivityAtMostOnceASecond runs short jobs one
// after another on a claim of the one slot of a startd: the slot goes Busy
// and Idle for each, which the negotiator needs not know, so the startd
// updates the collector at most about once a second for it rather than
// once or twice a job; and a slot's Activity alone still reaches the
// collector soon (Busy, with the claim's next job, which runs a while).
func TestClaimReuseAdvertisesActivityAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	knobs := testpool.Knobs{"NUM_CPUS": "1", "NUM_SLOTS": "1", "MEMORY": "1024", "CLAIM_IDLE_TIMEOUT": "60", "UPDATE_INTERVAL": "300"}
	cm, _ := pool(t, 1, knobs)
	testpool.Eventually(t, 10*time.Second, "the slot to be advertised", func() bool { return slotNames(t, cm) == "slot1@exec1" })
	reg := prometheus.NewRegistry()
	reg.MustRegister(cm.Master)
	const jobs = 40
	before := machineUpdates(t, reg)
	start := time.Now()
	dir := t.TempDir()
	submitFile(t, cm, dir, "executable = /bin/true\ntransfer_executable = false\nrequest_memory = 16\nqueue 40\n")
	// Then, on the same claim, a job that runs a while: its slot is
	// advertised Busy, though nothing but the slot's Activity changed
	// since the claim's update.
	long := submitFile(t, cm, dir, "executable = /bin/sleep\narguments = 8\ntransfer_executable = false\nrequest_memory = 16\nqueue\n")
	testpool.Eventually(t, 2*time.Minute, "the short jobs to be done and the long one to run", func() bool {
		jobs, err := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{Projection: []string{"JobStatus"}})
		return err == nil && len(jobs) == 1 && jobs[0].ID == fmt.Sprintf("%d.0", long) && jobs[0].Ad["JobStatus"] == "2"
	})
	elapsed := time.Since(start)
	updates := machineUpdates(t, reg) - before
	// One an activityUpdate (1 s), the claim's and a few more.
	if limit := elapsed.Seconds() + 5; updates > limit {
		t.Errorf("%d jobs on one claim in %s: %.0f updates of the slot's ad, want at most %.0f", jobs, elapsed.Round(time.Millisecond), updates, limit)
	}
	t.Logf("%d jobs in %s: %.0f updates of the slot's ad", jobs, elapsed.Round(time.Millisecond), updates)
	testpool.Eventually(t, 3*time.Second, "the slot to be advertised Busy", func() bool {
		ads, err := cm.Client().Collector().Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine,
			Projection: []string{"State", "Activity", "JobId"}})
		return err == nil && len(ads) == 1 && ads[0]["State"] == `"Claimed"` && ads[0]["Activity"] == `"Busy"` &&
			ads[0]["JobId"] == fmt.Sprintf(`"%d.0"`, long)
	})
	waitDone(t, cm, time.Minute)
}

// machineUpdates is how many updates of machine (slot) ads the collector
// registered in reg took so far.
func machineUpdates(t testing.TB, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "pond_collector_updates_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == wire.TypeMachine {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
