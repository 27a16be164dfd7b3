package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/daemon/wire"
	"github.com/pond-htc/pond/condor/submit"
)

// TestForgottenClaimIsReleased checks that a startd releases a claim its
// schedd does not hold, as after the schedd was killed between claiming a
// slot and running a job on it, long before CLAIM_IDLE_TIMEOUT, and keeps
// the claims its schedd holds.
func TestForgottenClaimIsReleased(t *testing.T) {
	knobs := testpool.Knobs{"POOL_PASSWORD": "s3cret", "CLAIM_IDLE_TIMEOUT": "1h"}
	cm := testpool.Start(t, "cm", "", "", nil, knobs, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, SCHEDD"})
	exec := testpool.Start(t, "exec", "", "", nil, knobs, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr, "NUM_SLOTS": "1"})
	ctx := context.Background()
	startd := exec.Client()
	var slots collector.QueryResponse
	testpool.Eventually(t, 20*time.Second, "the slot to be advertised", func() bool {
		return cm.Client().Call(ctx, collector.PathQuery, &collector.QueryRequest{Type: collector.TypeMachine, WithPrivate: true}, &slots) == nil &&
			len(slots.Ads) == 1
	})
	id, err := submit.Unquote(slots.Ads[0]["ClaimId"])
	if err != nil || id == "" {
		t.Fatalf("the slot's private ad carries no claim id: %v", slots.Ads[0])
	}
	// A claim made in the name of cm's schedd, which never heard of it.
	var resp wire.ClaimResponse
	job := wire.Ad{"Owner": `"alice"`, "Requirements": "true", "RequestCpus": "1", "RequestMemory": "1", "RequestDisk": "1"}
	if err := startd.Call(ctx, wire.PathClaim, &wire.ClaimRequest{ClaimID: id, Job: job, Schedd: cm.Addr, ScheddName: "cm"}, &resp); err != nil {
		t.Fatalf("claiming the slot: %v", err)
	}
	info := func() wire.ClaimInfoResponse {
		var ci wire.ClaimInfoResponse
		if err := startd.Call(ctx, wire.PathClaimInfo, &wire.ClaimInfoRequest{ClaimID: resp.ClaimID}, &ci); err != nil {
			t.Fatal(err)
		}
		return ci
	}
	if !info().Exists {
		t.Fatal("the claim does not exist right after claiming")
	}
	testpool.Eventually(t, 30*time.Second, "the forgotten claim to be released", func() bool { return !info().Exists })
}
