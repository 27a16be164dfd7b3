package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/wire"
)

// TestStartdAddressChangesUnderRunningJob moves an execute node to
// another address while it runs the first of two jobs that share its
// one slot, as a worker whose relay restarted on other ports: the old
// address stops answering at once. The schedd follows the startd's new
// address from its reports: the first job completes where it runs and the
// second runs on the same claim at the new address, each exactly once,
// with no disconnection or requeue; the jobs' PondStartd and the
// collector's slot ad name the new address.
func TestStartdAddressChangesUnderRunningJob(t *testing.T) {
	t.Parallel()
	knobs := testpool.Knobs{"NUM_CPUS": "1", "ALIVE_INTERVAL": "0.5s", "MAX_CLAIM_ALIVES_MISSED": "8"}
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"}, knobs)
	exec := testpool.Start(t, "mover", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}, knobs)
	sc := cm.Client().Schedd()
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	submitText(t, sc, jobDir, jobOwner(t),
		"executable = /bin/sh\narguments = \"-c 'sleep 3; echo done $(Process)'\"\noutput = out.$(Process)\nlog = job.log\nqueue 2\n")
	testpool.Eventually(t, 30*time.Second, "the first job to run", func() bool {
		running, _ := sc.Queue(context.Background(), &wire.QueryJobsRequest{Constraint: `JobStatus == 2`})
		return len(running) == 1
	})
	old := exec.Addr
	time.Sleep(time.Second)
	if err := exec.MoveTo("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Logf("the execute node moved from %s to %s", old, exec.Addr)
	testpool.Eventually(t, 60*time.Second, "both jobs to complete", func() bool {
		hist, _ := sc.History(context.Background(), &wire.QueryJobsRequest{})
		return len(hist) == 2
	})
	hist, _ := sc.History(context.Background(), &wire.QueryJobsRequest{})
	for _, j := range hist {
		if got := j.Ad["PondStartd"]; got != strconv.Quote(exec.Addr) {
			t.Errorf("job %s ran at PondStartd %s, want %q", j.ID, got, exec.Addr)
		}
		if got := j.Ad["NumJobStarts"]; got != "1" {
			t.Errorf("job %s: NumJobStarts = %s, want 1", j.ID, got)
		}
		if lost := j.Ad["NumJobsLost"]; lost != "" && lost != "0" {
			t.Errorf("job %s: NumJobsLost = %s", j.ID, lost)
		}
	}
	f, err := os.Open(filepath.Join(jobDir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := joblog.ReadAll(f, time.Local)
	f.Close()
	count := map[string]map[joblog.EventType]int{}
	for _, ev := range evs {
		id := fmt.Sprintf("%d.%d", ev.Cluster, ev.Proc)
		if count[id] == nil {
			count[id] = map[joblog.EventType]int{}
		}
		count[id][ev.Type]++
	}
	for id, c := range count {
		if c[joblog.Execute] != 1 || c[joblog.Terminated] != 1 || c[joblog.JobDisconnected] != 0 || c[joblog.JobReconnectFailed] != 0 || c[joblog.ShadowException] != 0 {
			b, _ := os.ReadFile(filepath.Join(jobDir, "job.log"))
			t.Errorf("job %s: events %v, want one execute and one terminate, no disconnection or exception; log:\n%s", id, c, b)
		}
	}
	for p := range 2 {
		if b, err := os.ReadFile(filepath.Join(jobDir, fmt.Sprintf("out.%d", p))); err != nil || string(b) != fmt.Sprintf("done %d\n", p) {
			t.Errorf("out.%d = %q, %v", p, b, err)
		}
	}
	ads, err := cm.Client().Collector().Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine})
	if err != nil {
		t.Fatal(err)
	}
	for _, ad := range ads {
		if got := ad["MyAddress"]; got != strconv.Quote("<"+exec.Addr+">") {
			t.Errorf("slot ad %s has MyAddress %s, want <%s>", ad["Name"], got, exec.Addr)
		}
	}
}

// TestRecoveredClaimOfMovedStartd restarts a schedd while its job runs on
// a node that moves meanwhile, another machine's startd taking the node's
// old address (a relay that gave the port to another worker): the
// restarted schedd, asking at the old address about the claim it
// recovered, finds the other machine there and does not take the claim
// for lost; the moved startd's next report brings it to the new address,
// and the job completes once.
func TestRecoveredClaimOfMovedStartd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	m := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR"})
	// The startd renews its claim every 4 s: after the schedd restarts,
	// it asks about the claim before the first report arrives.
	knobs := testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": m.Addr, "NUM_CPUS": "1",
		"ALIVE_INTERVAL": "4", "MAX_CLAIM_ALIVES_MISSED": "6"}
	mover := testpool.Start(t, "mover", "", "", nil, knobs)
	dir, err := os.MkdirTemp("", "pond-schedd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	addr := freeAddr(t)
	child := startChildSchedd(t, addr, dir, m.Addr)
	c := wire.NewSchedd(addr, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	submitText(t, c, jobDir, jobOwner(t),
		"executable = /bin/sh\narguments = \"-c 'sleep 10; echo done'\"\noutput = out\nlog = job.log\nrequirements = Machine == \"mover\"\nqueue\n")
	// Running on the startd, not only in the queue: the schedd marks a
	// job running before it sends the inputs and activates the claim, and
	// a schedd killed before that leaves a claim no job ever ran on.
	testpool.Eventually(t, 30*time.Second, "the job to run on the startd", func() bool {
		sd := mover.Master.Startd()
		if sd == nil {
			return false
		}
		for _, ad := range sd.Slots() {
			if a, _ := ad.EvalAttr("Activity").StringValue(); a == "Busy" {
				return true
			}
		}
		return false
	})
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	old := mover.Addr
	if err := mover.MoveTo("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	testpool.Start(t, "other", old, "", nil, knobs)
	startChildSchedd(t, addr, dir, m.Addr)
	testpool.Eventually(t, 60*time.Second, "the job to complete", func() bool {
		done, err := c.History(context.Background(), &wire.QueryJobsRequest{})
		return err == nil && len(done) == 1
	})
	done, _ := c.History(context.Background(), &wire.QueryJobsRequest{})
	if got := done[0].Ad["NumJobStarts"]; got != "1" {
		t.Errorf("NumJobStarts = %s, want 1", got)
	}
	if got := done[0].Ad["PondStartd"]; got != strconv.Quote(mover.Addr) {
		t.Errorf("PondStartd = %s, want %q", got, mover.Addr)
	}
	if b, err := os.ReadFile(filepath.Join(jobDir, "out")); err != nil || string(b) != "done\n" {
		t.Errorf("out = %q, %v", b, err)
	}
	f, err := os.Open(filepath.Join(jobDir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := joblog.ReadAll(f, time.Local)
	f.Close()
	for _, ev := range evs {
		if ev.Type == joblog.Evicted || ev.Type == joblog.JobReconnectFailed {
			b, _ := os.ReadFile(filepath.Join(jobDir, "job.log"))
			t.Fatalf("the job was taken for lost:\n%s", b)
		}
	}
}
