package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/wire"
)

// leaseKnobs make a short claim lease: renewed every half second, lost
// after three seconds without a renewal (short, yet more than a machine
// loaded by the race detector and other tests may delay a renewal).
var leaseKnobs = testpool.Knobs{"ALIVE_INTERVAL": "0.5s", "MAX_CLAIM_ALIVES_MISSED": "6"}

// startChildStartd runs a startd node named name in a child process,
// reporting to cm, and waits until it answers; the test can kill it with
// SIGKILL.
func startChildStartd(t *testing.T, name, cm string) *exec.Cmd {
	return startChildStartdWith(t, name, cm, leaseKnobs)
}

// startChildStartdWith is startChildStartd with other knobs than
// leaseKnobs.
func startChildStartdWith(t *testing.T, name, cm string, extra testpool.Knobs) *exec.Cmd {
	t.Helper()
	addr := freeAddr(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	knobs := []string{"DAEMON_LIST=MASTER STARTD"}
	for k, v := range extra {
		knobs = append(knobs, k+"="+v)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name+"|"+addr+"|"+dir+"|"+cm+"|"+strings.Join(knobs, ","))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := wire.NewMaster(addr, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	testpool.Eventually(t, 20*time.Second, "the startd to start", func() bool {
		_, err := c.Info(context.Background())
		return err == nil
	})
	return cmd
}

// TestStartdKilledJobsRequeuedOnce kills -9 the node running two jobs.
// The schedd, told the node is gone, writes the disconnected event, and
// once the claim lease has run out the reconnect-failed event; the job
// then runs again elsewhere and completes exactly once, while the job that
// allows no retry is held.
func TestStartdKilledJobsRequeuedOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"}, leaseKnobs)
	child := startChildStartd(t, "doomed", cm.Addr)
	sc := cm.Client().Schedd()
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	// On the doomed node the jobs run until it is killed, however long
	// starting the spare node takes; elsewhere they end in a second.
	const script = `-c 'grep -q doomed $_CONDOR_MACHINE_AD && exec sleep 300; sleep 1; echo done'`
	submitText(t, sc, jobDir, jobOwner(t),
		"executable = /bin/sh\narguments = \""+script+"\"\noutput = again.out\nlog = again.log\nqueue\n")
	once := submitText(t, sc, jobDir, jobOwner(t),
		"executable = /bin/sh\narguments = \""+script+"\"\noutput = once.out\nlog = once.log\n+JobMaxRetries = 0\nqueue\n").Cluster
	testpool.Eventually(t, 30*time.Second, "both jobs to run on the doomed node", func() bool {
		running, _ := sc.Queue(context.Background(), &wire.QueryJobsRequest{Constraint: `JobStatus == 2`})
		return len(running) == 2
	})
	// Another node to run the requeued job.
	testpool.Start(t, "spare", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}, leaseKnobs)
	time.Sleep(time.Second) // running for a while, its lease renewed
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	killed := time.Now()
	cm.Master.NodeLost(context.Background(), "doomed")

	readLog := func(name string) []joblog.Event {
		f, err := os.Open(filepath.Join(jobDir, name))
		if err != nil {
			return nil
		}
		defer f.Close()
		evs, _ := joblog.ReadAll(f, time.Local)
		return evs
	}
	count := func(evs []joblog.Event, typ joblog.EventType) int {
		n := 0
		for _, ev := range evs {
			if ev.Type == typ {
				n++
			}
		}
		return n
	}
	var requeued time.Duration
	testpool.Eventually(t, 60*time.Second, "the lost job to be requeued", func() bool {
		if count(readLog("again.log"), joblog.JobReconnectFailed) == 0 {
			return false
		}
		requeued = time.Since(killed)
		return true
	})
	// The schedd waits for the lease (3 s) and one renewal interval after
	// its last contact, at most that after the kill; the margin covers the
	// one-second sweep and a slow machine.
	t.Logf("kill -9 to requeue: %v", requeued.Round(time.Millisecond))
	if limit := 3500*time.Millisecond + 5*time.Second; requeued > limit {
		t.Errorf("requeued %v after the kill, want within the claim lease (%v with margin)", requeued, limit)
	}
	defer func() {
		if t.Failed() {
			jobs, _ := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
			for _, j := range jobs {
				t.Logf("job %s: status %s hold %s starts %s", j.ID, j.Ad["JobStatus"], j.Ad["HoldReason"], j.Ad["NumJobStarts"])
			}
			b, _ := os.ReadFile(filepath.Join(jobDir, "again.log"))
			t.Logf("again.log:\n%s", b)
		}
	}()
	// The job leaves the queue when its end is committed, and its
	// terminated event, stored with it, reaches its log just after.
	testpool.Eventually(t, 60*time.Second, "the requeued job to complete and its log to say so", func() bool {
		hist, _ := sc.History(context.Background(), &wire.QueryJobsRequest{})
		return len(hist) == 1 && count(readLog("again.log"), joblog.Terminated) > 0
	})
	hist, err := sc.History(context.Background(), &wire.QueryJobsRequest{})
	if err != nil || len(hist) != 1 {
		t.Fatalf("history: %v, %v", hist, err)
	}
	if got := hist[0].Ad["NumJobStarts"]; got != "2" {
		t.Errorf("NumJobStarts = %s, want 2", got)
	}
	if got := hist[0].Ad["NumJobsLost"]; got != "1" {
		t.Errorf("NumJobsLost = %s, want 1", got)
	}
	evs := readLog("again.log")
	want := map[joblog.EventType]int{joblog.Execute: 2, joblog.JobDisconnected: 1, joblog.JobReconnectFailed: 1, joblog.Terminated: 1}
	for typ, n := range want {
		if got := count(evs, typ); got != n {
			t.Errorf("again.log has %d %v events, want %d", got, typ, n)
		}
	}
	if b, err := os.ReadFile(filepath.Join(jobDir, "again.out")); err != nil || string(b) != "done\n" {
		t.Errorf("again.out = %q, %v", b, err)
	}

	held, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{Constraint: "JobStatus == 5"})
	if err != nil || len(held) != 1 || held[0].ID != fmt.Sprintf("%d.0", once) {
		t.Fatalf("held jobs = %+v, %v; want job %d.0", held, err, once)
	}
	if reason := held[0].Ad["HoldReason"]; !strings.Contains(reason, "JobMaxRetries") {
		t.Errorf("HoldReason = %s, want one naming JobMaxRetries", reason)
	}
	if evs := readLog("once.log"); count(evs, joblog.Held) != 1 || count(evs, joblog.Terminated) != 0 {
		t.Errorf("once.log: %d held and %d terminated events, want 1 and 0", count(evs, joblog.Held), count(evs, joblog.Terminated))
	}
}

// TestStartdKillsJobOfUnreachableSchedd is the other side of the lease: a
// startd that cannot renew a running job's claim, its schedd killed -9,
// keeps the job past the claim lease (3 s), the schedd may come back, and
// kills it when its job lease (job_lease_duration, 7 s) runs out, so that
// the job never runs twice once a schedd requeues it.
func TestStartdKillsJobOfUnreachableSchedd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR"}, leaseKnobs)
	// The job's heartbeat goes to the host's /tmp, not a private one.
	testpool.Start(t, "exec1", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr, "MOUNT_UNDER_SCRATCH": ""}, leaseKnobs)
	addr := freeAddr(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	knobs := []string{"DAEMON_LIST=MASTER SCHEDD"}
	for k, v := range leaseKnobs {
		knobs = append(knobs, k+"="+v)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=submit|"+addr+"|"+dir+"|"+cm.Addr+"|"+strings.Join(knobs, ","))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	sc := wire.NewSchedd(addr, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	testpool.Eventually(t, 20*time.Second, "the schedd to start", func() bool {
		_, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
		return err == nil
	})
	// The job, which may run as another user (and sees pids of its own
	// PID namespace), writes a heartbeat here.
	jobDir := sharedDir(t, "pond-lease-")
	beat := filepath.Join(jobDir, "beat")
	script := "#!/bin/sh\nwhile :; do date +%s%N > " + beat + "; sleep 0.1; done\n"
	if err := os.WriteFile(filepath.Join(jobDir, "job.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	submitText(t, sc, jobDir, jobOwner(t), "executable = job.sh\njob_lease_duration = 7\nqueue\n")
	testpool.Eventually(t, 30*time.Second, "the job to run", func() bool {
		_, err := os.Stat(beat)
		return err == nil
	})
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	killed := time.Now()
	beats := func() bool {
		before, _ := os.ReadFile(beat)
		time.Sleep(500 * time.Millisecond)
		after, _ := os.ReadFile(beat)
		return string(before) != string(after)
	}
	// Past the claim lease (3 s), within the job lease (7 s from the last
	// renewal, up to half a second before the kill).
	time.Sleep(4500 * time.Millisecond)
	if !beats() {
		t.Fatalf("the startd killed the job %v after its schedd, within the job lease", time.Since(killed).Round(time.Millisecond))
	}
	// The margin covers the poll and a slow machine.
	testpool.Eventually(t, 7*time.Second+8*time.Second, "the startd to kill the job", func() bool { return !beats() })
	took := time.Since(killed)
	t.Logf("job killed %v after its schedd", took.Round(time.Millisecond))
	if took < 6*time.Second {
		t.Errorf("job killed %v after its schedd, before its job lease (7 s) ran out", took.Round(time.Millisecond))
	}
}

// TestFrozenNodeJobsWaitForJobLease freezes (SIGSTOP) a node running a
// job, as a partition cuts it off: the sea declares it failed, but it does
// not refuse connections, so it may still run the job. The schedd does not
// requeue the job at the claim lease (3 s) but after its job lease
// (job_lease_duration, 8 s); the node, thawed after that, has killed its
// copy, and the job completes once, elsewhere.
func TestFrozenNodeJobsWaitForJobLease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"}, leaseKnobs)
	child := startChildStartd(t, "frozen", cm.Addr)
	sc := cm.Client().Schedd()
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	submitText(t, sc, jobDir, jobOwner(t),
		"executable = /bin/sh\narguments = \"-c 'sleep 6; echo done'\"\noutput = job.out\nlog = job.log\njob_lease_duration = 8\nqueue\n")
	testpool.Eventually(t, 30*time.Second, "the job to run on the frozen node", func() bool {
		running, _ := sc.Queue(context.Background(), &wire.QueryJobsRequest{Constraint: `JobStatus == 2`})
		return len(running) == 1
	})
	testpool.Start(t, "spare", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}, leaseKnobs)
	time.Sleep(time.Second)
	child.Process.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	cm.Master.NodeLost(context.Background(), "frozen")
	count := func(typ joblog.EventType) int {
		f, err := os.Open(filepath.Join(jobDir, "job.log"))
		if err != nil {
			return 0
		}
		defer f.Close()
		evs, _ := joblog.ReadAll(f, time.Local)
		n := 0
		for _, ev := range evs {
			if ev.Type == typ {
				n++
			}
		}
		return n
	}
	var requeued time.Duration
	testpool.Eventually(t, 60*time.Second, "the job to be requeued", func() bool {
		if count(joblog.JobReconnectFailed) == 0 {
			return false
		}
		requeued = time.Since(frozen)
		return true
	})
	child.Process.Signal(syscall.SIGCONT)
	t.Logf("freeze to requeue: %v", requeued.Round(time.Millisecond))
	if requeued < 7500*time.Millisecond {
		t.Errorf("requeued %v after the freeze, before the job lease (8 s) ran out on the node", requeued.Round(time.Millisecond))
	}
	// Its terminated event reaches its log just after it leaves the queue.
	testpool.Eventually(t, 60*time.Second, "the requeued job to complete and its log to say so", func() bool {
		hist, _ := sc.History(context.Background(), &wire.QueryJobsRequest{})
		return len(hist) == 1 && count(joblog.Terminated) > 0
	})
	if n := count(joblog.Terminated); n != 1 {
		t.Errorf("%d terminated events, want 1", n)
	}
	if n := count(joblog.Execute); n != 2 {
		t.Errorf("%d execute events, want 2", n)
	}
}

// TestLostNodeBackInTimeReconnects declares a node lost while it is only
// frozen (SIGSTOP), as a failure detector may: the schedd writes the
// disconnected event, and when the node answers again within the claim
// lease the reconnected event (023), and the job goes on there and
// completes once, without a reconnect-failed event or a second start.
func TestLostNodeBackInTimeReconnects(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	// A lease of 6 s, renewed every half second.
	knobs := testpool.Knobs{"ALIVE_INTERVAL": "0.5s", "MAX_CLAIM_ALIVES_MISSED": "12"}
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"}, knobs)
	child := startChildStartdWith(t, "frozen", cm.Addr, knobs)
	sc := cm.Client().Schedd()
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	submitText(t, sc, jobDir, jobOwner(t),
		"executable = /bin/sh\narguments = \"-c 'sleep 4; echo done'\"\noutput = job.out\nlog = job.log\nqueue\n")
	testpool.Eventually(t, 30*time.Second, "the job to run on the frozen node", func() bool {
		running, _ := sc.Queue(context.Background(), &wire.QueryJobsRequest{Constraint: `JobStatus == 2`})
		return len(running) == 1
	})
	time.Sleep(500 * time.Millisecond)
	child.Process.Signal(syscall.SIGSTOP)
	cm.Master.NodeLost(context.Background(), "frozen")
	time.Sleep(1500 * time.Millisecond)
	child.Process.Signal(syscall.SIGCONT)

	readLog := func() []joblog.Event {
		f, err := os.Open(filepath.Join(jobDir, "job.log"))
		if err != nil {
			return nil
		}
		defer f.Close()
		evs, _ := joblog.ReadAll(f, time.Local)
		return evs
	}
	testpool.Eventually(t, 60*time.Second, "the job to complete", func() bool {
		hist, _ := sc.History(context.Background(), &wire.QueryJobsRequest{})
		return len(hist) == 1
	})
	hist, _ := sc.History(context.Background(), &wire.QueryJobsRequest{})
	if got := hist[0].Ad["NumJobStarts"]; got != "1" {
		t.Errorf("NumJobStarts = %s, want 1", got)
	}
	if got := hist[0].Ad["NumJobReconnects"]; got != "1" {
		t.Errorf("NumJobReconnects = %s, want 1", got)
	}
	var types []joblog.EventType
	for _, ev := range readLog() {
		if ev.Type != joblog.ImageSize {
			types = append(types, ev.Type)
		}
	}
	// The input transfer (started, finished) comes before the execute
	// event, the output transfer before the end.
	ft := joblog.FileTransfer
	want := []joblog.EventType{joblog.Submit, ft, ft, joblog.Execute, joblog.JobDisconnected, joblog.JobReconnected, ft, ft, joblog.Terminated}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		b, _ := os.ReadFile(filepath.Join(jobDir, "job.log"))
		t.Errorf("events %v, want %v; log:\n%s", types, want, b)
	}
	for _, ev := range readLog() {
		if ev.Type == joblog.JobReconnected && (ev.SlotName == "" || !strings.Contains(ev.SlotName, "frozen") || ev.Host == "") {
			t.Errorf("reconnected event names slot %q host %q, want the frozen node's", ev.SlotName, ev.Host)
		}
	}
	if b, err := os.ReadFile(filepath.Join(jobDir, "job.out")); err != nil || string(b) != "done\n" {
		t.Errorf("job.out = %q, %v", b, err)
	}
}

// startLeaseSchedd runs a schedd node with leaseKnobs in a child process
// at addr, on the queue in dir, reporting to cm, and waits until it
// answers; the test can kill it with SIGKILL.
func startLeaseSchedd(t *testing.T, addr, dir, cm string) *exec.Cmd {
	t.Helper()
	knobs := []string{"DAEMON_LIST=MASTER SCHEDD"}
	for k, v := range leaseKnobs {
		knobs = append(knobs, k+"="+v)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=submit|"+addr+"|"+dir+"|"+cm+"|"+strings.Join(knobs, ","))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := wire.NewSchedd(addr, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	testpool.Eventually(t, 20*time.Second, "the schedd to start", func() bool {
		_, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
		return err == nil
	})
	return cmd
}

// TestRecoveredJobOfDeadWorkerRequeued kills -9 a schedd running a job,
// then the job's worker, and starts the schedd again, on its queue, while
// the worker stays dead: nothing listens at the worker's address, so the
// job died with its agent, and the schedd requeues it at once (024)
// rather than after its job lease (2400 s); it completes once elsewhere.
func TestRecoveredJobOfDeadWorkerRequeued(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR"}, leaseKnobs)
	doomed := startChildStartd(t, "doomed", cm.Addr)
	addr := freeAddr(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	schedd := startLeaseSchedd(t, addr, dir, cm.Addr)
	sc := wire.NewSchedd(addr, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	submitText(t, sc, jobDir, jobOwner(t),
		"executable = /bin/sh\narguments = \"-c 'sleep 5; echo done'\"\noutput = job.out\nlog = job.log\nqueue\n")
	testpool.Eventually(t, 30*time.Second, "the job to run on the doomed node", func() bool {
		running, _ := sc.Queue(context.Background(), &wire.QueryJobsRequest{Constraint: `JobStatus == 2`})
		return len(running) == 1
	})
	time.Sleep(time.Second)
	schedd.Process.Signal(syscall.SIGKILL)
	schedd.Wait()
	doomed.Process.Signal(syscall.SIGKILL)
	doomed.Wait()
	// The sea tells the manager (whose collector drops the node's slots),
	// not the schedd, down then.
	cm.Master.NodeLost(context.Background(), "doomed")
	testpool.Start(t, "spare", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}, leaseKnobs)
	startLeaseSchedd(t, addr, dir, cm.Addr)
	restarted := time.Now()
	count := func(typ joblog.EventType) int {
		f, err := os.Open(filepath.Join(jobDir, "job.log"))
		if err != nil {
			return 0
		}
		defer f.Close()
		evs, _ := joblog.ReadAll(f, time.Local)
		n := 0
		for _, ev := range evs {
			if ev.Type == typ {
				n++
			}
		}
		return n
	}
	testpool.Eventually(t, 60*time.Second, "the recovered job to be requeued", func() bool { return count(joblog.JobReconnectFailed) > 0 })
	t.Logf("restart to requeue: %v", time.Since(restarted).Round(time.Millisecond))
	defer func() {
		if t.Failed() {
			jobs, _ := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
			for _, j := range jobs {
				t.Logf("job %s: status %s hold %s starts %s remote %s", j.ID, j.Ad["JobStatus"], j.Ad["HoldReason"], j.Ad["NumJobStarts"], j.Ad["RemoteHost"])
			}
			b, _ := os.ReadFile(filepath.Join(jobDir, "job.log"))
			t.Logf("job.log:\n%s", b)
		}
	}()
	// Its terminated event reaches its log just after it leaves the queue.
	testpool.Eventually(t, 60*time.Second, "the requeued job to complete and its log to say so", func() bool {
		hist, _ := sc.History(context.Background(), &wire.QueryJobsRequest{})
		return len(hist) == 1 && count(joblog.Terminated) > 0
	})
	if n := count(joblog.Terminated); n != 1 {
		t.Errorf("%d terminated events, want 1", n)
	}
	if n := count(joblog.Execute); n != 2 {
		t.Errorf("%d execute events, want 2", n)
	}
}
