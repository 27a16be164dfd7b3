package acceptance

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// drainPool is a local pool of two agents of one slot each, whose jobs
// have 10 s of retirement and 4 s of vacate time.
const drainPool = `
pool "drn" {
  nodes  = 2
  slots  = 1
  config = {
    NEGOTIATOR_INTERVAL     = "2"
    NEGOTIATOR_MIN_INTERVAL = "1"
    UPDATE_INTERVAL         = "2"
    MAXJOBRETIREMENTTIME    = "10"
    MachineMaxVacateTime    = "4"
  }
}

output "cm" {
  value = pool.drn.central_manager
}
`

// drainJob ignores its soft kill (SIGTERM) and ends well after 20 s.
const drainJob = "#!/bin/sh\ntrap '' TERM\nexec /bin/sleep 20\n"

var clusterEventRE = regexp.MustCompile(`(?m)^(\d{3}) \((\d+)\.000\.000\) (\S+ \S+)`)

// jobEvents returns the codes and times of the events of cluster's job in
// log.
func jobEvents(t *testing.T, log, cluster string) (codes []string, at []time.Time) {
	t.Helper()
	for _, m := range clusterEventRE.FindAllStringSubmatch(readFile(t, log), -1) {
		if strings.TrimLeft(m[2], "0") != cluster {
			continue
		}
		ts, err := time.ParseInLocation("2006-01-02 15:04:05", m[3], time.Local)
		if err != nil {
			t.Fatalf("event time %q: %v", m[3], err)
		}
		codes, at = append(codes, m[1]), append(at, ts)
	}
	return codes, at
}

// runningOn waits until cluster's job runs and returns its machine.
func runningOn(t *testing.T, w *workdir, cm, cluster string, within time.Duration) string {
	t.Helper()
	var host string
	eventually(t, within, func() error {
		r := w.run("condor", "q", "-pool", cm, cluster+".0", "-af", "JobStatus", "RemoteHost")
		f := strings.Fields(r.stdout)
		if len(f) != 2 || f[0] != "2" {
			return fmt.Errorf("job %s does not run: %s", cluster, r)
		}
		_, host, _ = strings.Cut(f[1], "@")
		return nil
	})
	return host
}

// waitDone waits until cluster's job has completed (its terminated event
// in log).
func waitDone(t *testing.T, log, cluster string, within time.Duration) {
	t.Helper()
	eventually(t, within, func() error {
		if codes, _ := jobEvents(t, log, cluster); count(codes, "005") == 0 {
			return fmt.Errorf("job %s has not completed: %v", cluster, codes)
		}
		return nil
	})
}

// TestCondorDrain drains a node with pondctl condor drain. -graceful: the
// node's job, which ignores its soft kill, retires for its 10 s of
// retirement and is vacated (and killed) when it ends; it runs again on
// the other node and completes there once; the drained node takes no new
// job, though one waits, until -cancel, after which it runs that job.
// -fast: the job is evicted at once and completes on the other node, once.
func TestCondorDrain(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(drainPool)
	w.writeExec("stubborn.sh", drainJob)
	w.write("a.sub", "executable = stubborn.sh\nlog = jobs.log\nqueue\n")
	w.write("b.sub", "executable = /bin/sleep\narguments = 3\nlog = jobs.log\nqueue\n")
	log := filepath.Join(w.dir, "jobs.log")

	// -graceful: the job retires, then is vacated.
	w.expect(0, "condor", "submit", "-pool", cm, "a.sub")
	x := runningOn(t, w, cm, "1", 60*time.Second)
	r := w.expect(0, "condor", "drain", "-pool", cm, "-graceful", "-reason", "kernel update", x)
	if !strings.Contains(r.stdout, "Sent request to drain "+x+" (graceful") {
		t.Errorf("condor drain printed:\n%s", r.stdout)
	}
	eventually(t, 20*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-constraint", fmt.Sprintf("Machine == %q", x),
			"-af", "State", "Activity", "Draining", "DrainReason")
		if got := strings.TrimSpace(r.stdout); got != "Claimed Retiring true kernel update" {
			return fmt.Errorf("the drained node's slot is %q: %s", got, r)
		}
		return nil
	})
	eventually(t, 40*time.Second, func() error {
		if codes, _ := jobEvents(t, log, "1"); count(codes, "004") == 0 {
			return fmt.Errorf("the job was not evicted: %v", codes)
		}
		return nil
	})
	codes, at := jobEvents(t, log, "1")
	var started, evicted time.Time
	for i, c := range codes {
		if c == "001" && started.IsZero() {
			started = at[i]
		}
		if c == "004" && evicted.IsZero() {
			evicted = at[i]
		}
	}
	// The log's times are whole seconds.
	if d := evicted.Sub(started); d < 9*time.Second || d > 13*time.Second {
		t.Fatalf("the job was evicted %v after it started; want at the end of its 10 s of retirement:\n%s", d, readFile(t, log))
	}
	t.Logf("-graceful: the job was evicted %v after it started (10 s of retirement)", evicted.Sub(started))
	y := runningOn(t, w, cm, "1", 30*time.Second)
	if y == x {
		t.Fatalf("the evicted job runs again on the drained node %s", x)
	}

	// The drained node takes no new job while another waits.
	w.expect(0, "condor", "submit", "-pool", cm, "b.sub")
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		r := w.run("condor", "q", "-pool", cm, "2.0", "-af", "JobStatus")
		if strings.TrimSpace(r.stdout) != "1" {
			t.Fatalf("a job does not wait while the only free node is drained: %s", r)
		}
	}
	r = w.expect(0, "condor", "status", "-pool", cm, "-constraint", fmt.Sprintf("Machine == %q", x), "-af", "State", "Activity")
	if got := strings.TrimSpace(r.stdout); got != "Drained Idle" {
		t.Errorf("the drained node with no job is %q; want Drained Idle", got)
	}
	r = w.expect(0, "condor", "drain", "-pool", cm, "-cancel", x)
	if !strings.Contains(r.stdout, "Sent request to cancel draining on "+x) {
		t.Errorf("condor drain -cancel printed:\n%s", r.stdout)
	}
	if on := runningOn(t, w, cm, "2", 30*time.Second); on != x {
		t.Errorf("after the cancel, the waiting job runs on %s; want the node that was drained, %s", on, x)
	}
	waitDone(t, log, "1", 60*time.Second)
	waitDone(t, log, "2", 60*time.Second)
	if codes, _ := jobEvents(t, log, "1"); count(codes, "001") != 2 || count(codes, "004") != 1 || count(codes, "005") != 1 {
		t.Errorf("the drained job's events are %v; want it started twice, evicted once, completed once", codes)
	}

	// -fast: the job is killed at once and runs elsewhere.
	w.expect(0, "condor", "submit", "-pool", cm, "a.sub")
	h := runningOn(t, w, cm, "3", 60*time.Second)
	drained := time.Now()
	w.expect(0, "condor", "drain", "-pool", cm, "-fast", h)
	eventually(t, 20*time.Second, func() error {
		if codes, _ := jobEvents(t, log, "3"); count(codes, "004") == 0 {
			return fmt.Errorf("the job was not evicted: %v", codes)
		}
		return nil
	})
	t.Logf("-fast: the job was evicted (its log says so) %v after condor drain was called", time.Since(drained).Round(100*time.Millisecond))
	if d := time.Since(drained); d > 5*time.Second {
		t.Errorf("condor drain -fast evicted the job %v after it was called; want at once", d)
	}
	if on := runningOn(t, w, cm, "3", 30*time.Second); on == h {
		t.Fatalf("the evicted job runs again on the drained node %s", h)
	}
	waitDone(t, log, "3", 60*time.Second)
	if codes, _ := jobEvents(t, log, "3"); count(codes, "001") != 2 || count(codes, "004") != 1 || count(codes, "005") != 1 {
		t.Errorf("the fast-drained job's events are %v; want it started twice, evicted once, completed once", codes)
	}
	w.expect(0, "condor", "drain", "-pool", cm, "-cancel", h)
}
