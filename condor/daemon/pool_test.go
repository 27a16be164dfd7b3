package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
)

// pool starts a central manager (collector, negotiator, schedd) and n
// execute nodes reporting to it.
func pool(t *testing.T, n int, knobs testpool.Knobs) (*testpool.Node, []*testpool.Node) {
	t.Helper()
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"}, knobs)
	var execs []*testpool.Node
	for i := 0; i < n; i++ {
		execs = append(execs, testpool.Start(t, fmt.Sprintf("exec%d", i+1), "", "", nil,
			testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr}, knobs))
	}
	return cm, execs
}

func submitFile(t *testing.T, cm *testpool.Node, dir, text string) int {
	t.Helper()
	return submitText(t, cm.Client().Schedd(), dir, jobOwner(t), text).Cluster
}

// jobOwner is the owner of the tests' jobs: the test's own user, whose
// files a schedd running as root reads and writes as it.
func jobOwner(tb testing.TB) string {
	tb.Helper()
	u, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	return u.Username
}

// submitText submits the text of a submit file in dir to the schedd sc as
// owner, presenting owner's token, as condor_submit does.
func submitText(tb testing.TB, sc *wire.Schedd, dir, owner, text string) *wire.SubmitResponse {
	tb.Helper()
	sc = wire.NewSchedd(sc.Addr(), testpool.Token(tb, owner, auth.Write))
	f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte(text))
	if err != nil {
		tb.Fatal(err)
	}
	env := []string{"USER=" + owner}
	resp, err := tools.SubmitFile(context.Background(), sc, f, submit.Options{Owner: owner, SubmitDir: dir, Env: env,
		LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		tb.Fatalf("submit: %v", err)
	}
	return resp
}

func waitDone(t *testing.T, cm *testpool.Node, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		jobs, err := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			// Say which jobs are left, and in what state, to tell a slow
			// machine from a lost job.
			b, _ := json.Marshal(jobs)
			if len(b) > 4000 {
				b = append(b[:4000], "..."...)
			}
			t.Fatalf("timed out after %s waiting for the queue to drain: %d jobs left: %s", timeout, len(jobs), b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPoolRunsHundredJobs(t *testing.T) {
	t.Parallel()
	cm, _ := pool(t, 2, nil)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("payload\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := `
universe = vanilla
executable = /bin/sh
arguments = "-c 'echo job $(Process); cat in.txt > out-$(Process).txt; echo extra >> out-$(Process).txt; sleep 0.$(Process)'"
transfer_input_files = in.txt
should_transfer_files = YES
output = stdout.$(Process)
error = stderr.$(Process)
log = job.log
request_memory = 32
request_cpus = 1
queue 100
`
	cluster := submitFile(t, cm, dir, sub)
	waitDone(t, cm, 3*time.Minute)
	for p := 0; p < 100; p++ {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("stdout.%d", p)))
		if err != nil || string(got) != fmt.Sprintf("job %d\n", p) {
			t.Errorf("stdout of %d.%d = %q, %v", cluster, p, got, err)
		}
		out, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out-%d.txt", p)))
		if err != nil || string(out) != "payload\nextra\n" {
			t.Errorf("output file of %d.%d = %q, %v", cluster, p, out, err)
		}
	}
	hist, err := cm.Client().Schedd().History(context.Background(), &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 100 {
		t.Fatalf("history has %d jobs, want 100", len(hist))
	}
	for _, j := range hist {
		if j.Ad["JobStatus"] != fmt.Sprint(int(jobqueue.Completed)) || j.Ad["ExitCode"] != "0" {
			t.Errorf("job %s: JobStatus %s ExitCode %s", j.ID, j.Ad["JobStatus"], j.Ad["ExitCode"])
		}
	}
	logText, err := os.ReadFile(filepath.Join(dir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"Job submitted from host", "Job executing on host", "Job terminated."} {
		if n := strings.Count(string(logText), ev); n != 100 {
			t.Errorf("job log has %d %q events, want 100", n, ev)
		}
	}
	if t.Failed() {
		// Why a job ran again: the events of a run that did not end.
		var why []string
		for _, line := range strings.Split(string(logText), "\n") {
			if strings.Contains(line, "Shadow exception") || strings.Contains(line, "REFUSED") || strings.Contains(line, "evicted") ||
				strings.Contains(line, "disconnected") || strings.Contains(line, "reconnect") {
				why = append(why, strings.TrimSpace(line))
			}
		}
		t.Logf("%d lines of the job log about runs that did not end, the first: %q", len(why), why[:min(len(why), 6)])
	}
}

// TestInputNameWithSpace runs a job whose input file's name holds a space:
// the schedd sends it whole, and the job finds it under that name.
func TestInputNameWithSpace(t *testing.T) {
	t.Parallel()
	cm, _ := pool(t, 1, nil)
	dir := t.TempDir()
	for name, data := range map[string]string{"my file.txt": "spaced\n", "b.txt": "plain\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	submitFile(t, cm, dir, `
executable = /bin/sh
arguments = "-c 'cat ''my file.txt'' b.txt'"
transfer_input_files = my file.txt, b.txt
should_transfer_files = YES
output = out.txt
request_memory = 16
queue
`)
	waitDone(t, cm, time.Minute)
	got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil || string(got) != "spaced\nplain\n" {
		t.Fatalf("job output %q, %v; want both files", got, err)
	}
}
