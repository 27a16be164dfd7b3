package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/condor/wire"
)

// TestSubmitAdsAndUnprivilegedJobs submits ready job ads (as an agent or a
// program would, without a submit file) and checks that a startd running as
// root runs jobs as a slot user.
func TestSubmitAdsAndUnprivilegedJobs(t *testing.T) {
	t.Parallel()
	cm, _ := pool(t, 1, nil)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	ad := wire.Ad{"Owner": strconv.Quote(jobOwner(t)), "Cmd": `"/usr/bin/id"`, "Arguments": `"-u"`, "TransferExecutable": "false",
		"Iwd": strconv.Quote(dir), "Out": `"uid"`, "Err": `"/dev/null"`, "RequestMemory": "16", "RequestCpus": "1",
		"RequestDisk": "1024", "Requirements": "true", "JobUniverse": "5"}
	sc := cm.Client().Schedd()
	nc, err := sc.NewCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := sc.Submit(context.Background(), &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{ad}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Jobs != 1 {
		t.Fatalf("submitted %d jobs", resp.Jobs)
	}
	waitDone(t, cm, 30*time.Second)
	b, err := os.ReadFile(filepath.Join(dir, "uid"))
	if err != nil {
		t.Fatal(err)
	}
	uid := strings.TrimSpace(string(b))
	if os.Geteuid() == 0 {
		if n, err := strconv.Atoi(uid); err != nil || n < 60600 || n > 61183 {
			t.Errorf("job ran as uid %s, want a slot user of STARTER_SLOT_UIDS (%s)", uid, startd.DefaultSlotUIDs)
		}
	} else if uid != strconv.Itoa(os.Geteuid()) {
		t.Errorf("job ran as uid %s, want %d", uid, os.Geteuid())
	}
}

// TestPreemptPolicyEvictsJob: a startd whose PREEMPT policy fires vacates the
// job, which the schedd requeues with an evicted event.
func TestPreemptPolicyEvictsJob(t *testing.T) {
	t.Parallel()
	cm, _ := pool(t, 1, map[string]string{"PREEMPT": "TARGET.Owner == " + strconv.Quote(jobOwner(t))})
	dir := t.TempDir()
	submitFile(t, cm, dir, "executable = /bin/sleep\narguments = 600\ntransfer_executable = false\nlog = job.log\nqueue\n")
	testpool.Eventually(t, 30*time.Second, "an eviction", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "job.log"))
		return strings.Contains(string(b), "Job was evicted.")
	})
	act(t, cm, "remove", 1)
}
