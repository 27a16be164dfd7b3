package acceptance

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBigSubmitAllOrNothing submits clusters of tens of thousands of
// jobs to a one-node pool with MAX_JOBS_PER_SUBMISSION = 50000: one over
// the limit is refused whole; one killed mid-commit (the agent and
// pondctl both killed with SIGKILL while the schedd stores its jobs)
// leaves no job of its cluster after the agent is brought back; and the
// pool then takes a submit as before.
func TestBigSubmitAllOrNothing(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(limitsPool("big", `MAX_JOBS_PER_SUBMISSION = "50000"`))
	sub := func(n int) string {
		name := fmt.Sprintf("idle%d.sub", n)
		w.write(name, fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n))
		return name
	}
	total := func() string {
		t.Helper()
		r := w.expect(0, "condor", "q", "-pool", cm, "-totals")
		return r.stdout
	}

	// Over the limit: refused before anything is stored.
	r := w.expect(1, "condor", "submit", "-pool", cm, sub(50001))
	if !strings.Contains(r.stderr, "MAX_JOBS_PER_SUBMISSION") || !strings.Contains(r.stderr, "queued none of its jobs") {
		t.Fatalf("a submit over MAX_JOBS_PER_SUBMISSION:\n%s", r)
	}
	if got := total(); !strings.Contains(got, " 0 jobs;") {
		t.Fatalf("after a refused submit the queue says:\n%s", got)
	}

	// Killed mid-commit: the job queue's write-ahead log grows while the
	// schedd stores the jobs in one transaction.
	wal := filepath.Join(w.dir, ".pond", "local", "nodes", "big-0", "condor", "spool", "job_queue.db-wal")
	walSize := func() int64 {
		st, err := os.Stat(wal)
		if err != nil {
			return 0
		}
		return st.Size()
	}
	before := walSize()
	cmd := exec.Command(pondBin, "condor", "submit", "-pool", cm, sub(50000))
	cmd.Dir, cmd.Env = w.dir, w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once the log grew by 4 MiB (of about 14 for the whole
	// transaction), or once the queue shows jobs of the submit still under
	// way (which it must not). The queue is asked aside: a condor q of a
	// loaded machine can take seconds, long enough for the commit to win.
	early, stopAsking, asked := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(asked)
		for {
			select {
			case <-stopAsking:
				return
			case <-time.After(500 * time.Millisecond):
			}
			q := exec.Command(pondBin, "condor", "q", "-pool", cm, "-totals")
			q.Dir, q.Env = w.dir, w.env
			if got, err := q.Output(); err == nil && !strings.Contains(string(got), " 0 jobs;") {
				close(early)
				return
			}
		}
	}()
	stopped := func() {
		close(stopAsking)
		<-asked
	}
	deadline := time.Now().Add(60 * time.Second)
wait:
	for walSize() < before+4<<20 {
		if time.Now().After(deadline) {
			stopped()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the job queue's log did not grow by 4 MiB in 60 s (%d bytes); pondctl said:\n%s", walSize(), out.String())
		}
		select {
		case <-early:
			t.Logf("jobs of the submit are queued before it finished")
			break wait
		case <-time.After(5 * time.Millisecond):
		}
	}
	killNode(t, w, "big-0")
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	stopped()
	if strings.Contains(out.String(), "submitted to cluster") {
		t.Fatalf("the submit finished before the kill; pondctl said:\n%s", out.String())
	}
	w.expect(0, "apply", "-auto-approve")
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-totals")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if !strings.Contains(r.stdout, " 0 jobs;") {
			return fmt.Errorf("after the kill the queue says:\n%s", r.stdout)
		}
		return nil
	})
	r = w.expect(0, "condor", "q", "-pool", cm, "-constraint", "ClusterId == 2", "-af", "ProcId")
	if strings.TrimSpace(r.stdout) != "" {
		t.Fatalf("jobs of the killed cluster are queued:\n%s", r)
	}

	// The pool takes a submit as before, under a new cluster id.
	r = w.expect(0, "condor", "submit", "-pool", cm, sub(1500))
	if !strings.Contains(r.stdout, "1500 job(s) submitted to cluster 3.") {
		t.Fatalf("submit after the kill:\n%s", r)
	}
	if got := total(); !strings.Contains(got, " 1500 jobs;") {
		t.Fatalf("after a submit of 1,500 the queue says:\n%s", got)
	}
	w.expect(0, "destroy", "-auto-approve")
}
