package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/wire"
)

// TestForgottenClaimIsReleased checks that a startd releases a claim its
// schedd does not hold, as after the schedd was killed between claiming a
// slot and running a job on it, long before CLAIM_IDLE_TIMEOUT, and keeps
// the claims its schedd holds.
func TestForgottenClaimIsReleased(t *testing.T) {
	t.Parallel()
	knobs := testpool.Knobs{"CLAIM_IDLE_TIMEOUT": "1h"}
	cm := testpool.Start(t, "cm", "", "", nil, knobs, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, SCHEDD"})
	exec := testpool.Start(t, "exec", "", "", nil, knobs, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr, "NUM_SLOTS": "1"})
	ctx := context.Background()
	startd := exec.Client().Startd()
	for _, tt := range []struct {
		name   string
		schedd string
	}{
		{"schedd that never heard of it", cm.Addr},
		{"schedd that is gone", "127.0.0.1:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var slots []wire.Ad
			testpool.Eventually(t, 20*time.Second, "the slot to be unclaimed", func() bool {
				var err error
				slots, err = cm.Client().Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, WithPrivate: true,
					Constraint: `State == "Unclaimed"`})
				return err == nil && len(slots) == 1
			})
			id, err := classad.UnquoteString(slots[0]["ClaimId"])
			if err != nil || id == "" {
				t.Fatalf("the slot's private ad carries no claim id: %v", slots[0])
			}
			job := wire.Ad{"Owner": `"alice"`, "Requirements": "true", "RequestCpus": "1", "RequestMemory": "1", "RequestDisk": "1"}
			resp, err := startd.Claim(ctx, &wire.ClaimRequest{ClaimID: id, Job: job, Schedd: tt.schedd, ScheddName: "cm"})
			if err != nil {
				t.Fatalf("claiming the slot: %v", err)
			}
			info := func() *wire.ClaimInfoResponse {
				ci, err := startd.ClaimInfo(ctx, &wire.ClaimInfoRequest{ClaimID: resp.ClaimID})
				if err != nil {
					t.Fatal(err)
				}
				return ci
			}
			if !info().Exists {
				t.Fatal("the claim does not exist right after claiming")
			}
			testpool.Eventually(t, 30*time.Second, "the forgotten claim to be released", func() bool { return !info().Exists })
		})
	}
}

// TestScheddRestartedElsewhereGetsReports kills a schedd with SIGKILL while
// its jobs run and restarts it on the same queue at another address: the
// startd sends the reports of the jobs that were running, those that ended
// while the schedd was down included, to the new address (the schedd tells
// it when it reconnects to the claims), so every job completes long before
// JOB_LEASE_DURATION, with its output.
func TestScheddRestartedElsewhereGetsReports(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cm, dir := scheddTestPool(t)
	start := func(addr string) *exec.Cmd { return startChildSchedd(t, addr, dir, cm) }
	first := freeAddr(t)
	child := start(first)
	c := wire.NewSchedd(first, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	// Jobs 0 and 2 end while the schedd is down, 1 and 3 after it is back.
	sub := "executable = /bin/sh\narguments = \"-c 'case $(Process) in 0|2) sleep 0.5;; *) sleep 3;; esac; echo done $(Process)'\"\n" +
		"output = out.$(Process)\nqueue 4\n"
	submitText(t, c, jobDir, jobOwner(t), sub)
	testpool.Eventually(t, 30*time.Second, "jobs to run", func() bool {
		running, _ := c.Queue(context.Background(), &wire.QueryJobsRequest{Constraint: "JobStatus == 2"})
		return len(running) == 4
	})
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	time.Sleep(time.Second) // down long enough for jobs 0 and 2 to end
	second := freeAddr(t)
	t.Logf("schedd restarted at %s, was at %s", second, first)
	start(second)
	c = wire.NewSchedd(second, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	testpool.Eventually(t, 60*time.Second, "every job to complete", func() bool {
		done, err := c.History(context.Background(), &wire.QueryJobsRequest{})
		return err == nil && len(done) == 4
	})
	for p := range 4 {
		b, err := os.ReadFile(filepath.Join(jobDir, fmt.Sprintf("out.%d", p)))
		if err != nil || string(b) != fmt.Sprintf("done %d\n", p) {
			t.Errorf("out.%d = %q, %v", p, b, err)
		}
	}
}
