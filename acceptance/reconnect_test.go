package acceptance

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reconnectPool is a local pool of two agents: the submit node (the
// central manager, whose schedd runs the jobs) and a worker with two
// slots.
const reconnectPool = `
pool "rc" {
  nodes  = 2
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.rc.central_manager
}
`

// reconnectSubmit queues two jobs of 40 s on the worker; a copy started
// again shows as a second execute event.
func reconnectSubmit(lease string) string {
	return `
executable   = /bin/sh
arguments    = "-c 'sleep 40; echo done $(Process)'"
output       = out.$(Process)
log          = rc.log
requirements = Machine == "rc-1"
` + lease + `
queue 2
`
}

// submitNodeRestart submits reconnectSubmit(lease), kills -9 the submit
// node's agent once both jobs run (and, with workerToo, the worker's a
// few seconds later), brings it back with pondctl apply after down, waits
// for the queue to empty and returns the job log's event counts and the
// worker's agent log.
func submitNodeRestart(t *testing.T, lease string, down time.Duration, workerToo bool) (map[string]map[int]int, string) {
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", reconnectPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	w.write("rc.sub", reconnectSubmit(lease))
	w.expect(0, "condor", "submit", "-pool", cm, "rc.sub")
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-constraint", "JobStatus == 2", "-af", "ProcId")
		if n := len(strings.Fields(r.stdout)); r.code != 0 || n < 2 {
			return fmt.Errorf("%d of 2 jobs running: %s", n, r)
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	killNode(t, w, "rc-0")
	t.Logf("killed the submit node's agent")
	if workerToo {
		time.Sleep(3 * time.Second)
		killNode(t, w, "rc-1")
		t.Logf("killed the worker's agent")
	}
	time.Sleep(down)
	w.expect(0, "apply", "-auto-approve")
	t.Logf("restarted it after %s", down)
	eventually(t, 3*time.Minute, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if left := strings.Count(r.stdout, "\n"); left > 0 {
			return fmt.Errorf("%d jobs still queued", left)
		}
		return nil
	})
	counts := logEvents(t, filepath.Join(w.dir, "rc.log"))
	for p := range 2 {
		if n := counts["005"][p]; n != 1 {
			t.Errorf("job 1.%d has %d terminate events, want 1", p, n)
		}
		out := readFile(t, filepath.Join(w.dir, fmt.Sprintf("out.%d", p)))
		if !strings.HasSuffix(out, fmt.Sprintf("done %d\n", p)) {
			t.Errorf("out.%d = %q", p, out)
		}
	}
	t.Logf("events: 001 %v, 004 %v, 022 %v, 023 %v, 024 %v, 005 %v", counts["001"], counts["004"], counts["022"], counts["023"], counts["024"], counts["005"])
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rc.log:\n%s", readFile(t, filepath.Join(w.dir, "rc.log")))
		}
	})
	return counts, readFile(t, filepath.Join(w.dir, ".pond", "local", "nodes", "rc-1", "agent.log"))
}

// TestSubmitNodeRestartReconnects kills -9 the submit node's agent while
// its jobs run on a worker and brings it back 30 s later, within the
// jobs' lease (JobLeaseDuration, 2400 s by default): the worker keeps the
// jobs running meanwhile, the schedd reconnects to them (023), and each
// completes once, never started again.
func TestSubmitNodeRestartReconnects(t *testing.T) {
	t.Parallel()
	counts, _ := submitNodeRestart(t, "", 30*time.Second, false)
	for p := range 2 {
		if n := counts["001"][p]; n != 1 {
			t.Errorf("job 1.%d has %d execute events, want 1: it started again", p, n)
		}
		if n := counts["023"][p]; n != 1 {
			t.Errorf("job 1.%d has %d reconnected events, want 1", p, n)
		}
		for _, ev := range []string{"004", "024"} {
			if n := counts[ev][p]; n != 0 {
				t.Errorf("job 1.%d has %d %s events, want none", p, n, ev)
			}
		}
	}
}

// TestSubmitNodeDownPastJobLease is TestSubmitNodeRestartReconnects with
// job_lease_duration = 20, shorter than the 30 s the submit node is down:
// the worker kills the jobs when their lease runs out, and the schedd,
// back, runs each again once: two execute events, one termination.
func TestSubmitNodeDownPastJobLease(t *testing.T) {
	t.Parallel()
	counts, workerLog := submitNodeRestart(t, "job_lease_duration = 20", 30*time.Second, false)
	for p := range 2 {
		if n := counts["001"][p]; n != 2 {
			t.Errorf("job 1.%d has %d execute events, want 2: one before the lease ran out, one after", p, n)
		}
		if n := counts["004"][p] + counts["024"][p]; n != 1 {
			t.Errorf("job 1.%d was requeued %d times, want once", p, n)
		}
	}
	if !strings.Contains(workerLog, "killing a job whose job lease ran out") {
		t.Error("the worker's log does not say it killed the jobs for their job lease")
	}
	if !strings.Contains(workerLog, "cannot renew a running job's claim with its schedd") {
		t.Error("the worker's log does not say it kept the jobs while it could not reach the schedd")
	}
}

// TestSubmitNodeRestartWorkerDied is TestSubmitNodeRestartReconnects
// whose worker's agent is killed -9 too while the submit node is down,
// and comes back with it: the restarted schedd requeues the jobs at once
// (024), since the worker does not run them any more, rather than after
// their job lease (2400 s), and each completes once.
func TestSubmitNodeRestartWorkerDied(t *testing.T) {
	t.Parallel()
	counts, _ := submitNodeRestart(t, "", 20*time.Second, true)
	for p := range 2 {
		if n := counts["001"][p]; n != 2 {
			t.Errorf("job 1.%d has %d execute events, want 2", p, n)
		}
		if n := counts["024"][p] + counts["004"][p]; n != 1 {
			t.Errorf("job 1.%d was requeued %d times, want once", p, n)
		}
		if n := counts["023"][p]; n != 0 {
			t.Errorf("job 1.%d has %d reconnected events, want none", p, n)
		}
	}
}
