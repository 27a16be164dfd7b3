package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lostPool is a local pool of three agents with two slots each.
const lostPool = `
pool "lost" {
  nodes  = 3
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.lost.central_manager
}
`

const lostSubmit = `
executable = /bin/sh
arguments  = "-c 'sleep 15; echo done $(Process)'"
output     = out.$(Process)
log        = lost.log
queue 6
`

// eventLine matches the header of a job log event: its number and proc.
var eventLine = regexp.MustCompile(`^(\d{3}) \(\d+\.(\d+)\.\d+\) `)

// logEvents counts a job log's events by number and proc.
func logEvents(t testing.TB, path string) map[string]map[int]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	counts := map[string]map[int]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := eventLine.FindStringSubmatch(line); m != nil {
			p, _ := strconv.Atoi(m[2])
			if counts[m[1]] == nil {
				counts[m[1]] = map[int]int{}
			}
			counts[m[1]][p]++
		}
	}
	return counts
}

// TestKilledWorkerJobsCompleteOnce kills -9 an agent running jobs: the
// central manager's schedd, told by the sea that the node failed, requeues
// its jobs once their claim lease ran out, and every job completes exactly
// once. The time from the kill to the requeue is logged.
func TestKilledWorkerJobsCompleteOnce(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", lostPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	w.write("lost.sub", lostSubmit)
	w.expect(0, "condor", "submit", "-pool", cm, "lost.sub")

	// Every job runs; the victim is a worker (not the schedd's node)
	// running some of them.
	var victim string
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-constraint", "JobStatus == 2", "-af", "ProcId", "RemoteHost")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.stdout == "" || len(lines) < 6 {
			return fmt.Errorf("%d of 6 jobs running", len(lines))
		}
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			_, node, _ := strings.Cut(strings.Trim(f[1], `"`), "@")
			if node != "" && node != "lost-0" {
				victim = node
				return nil
			}
		}
		return fmt.Errorf("no job runs on a worker: %s", r.stdout)
	})
	time.Sleep(2 * time.Second)
	killNode(t, w, victim)
	killed := time.Now()
	t.Logf("killed %s", victim)

	logPath := filepath.Join(w.dir, "lost.log")
	eventually(t, 90*time.Second, func() error {
		if n := total(logEvents(t, logPath)["024"]); n == 0 {
			return fmt.Errorf("no job requeued yet")
		}
		return nil
	})
	t.Logf("kill -9 of a worker to the requeue of its jobs: %s", time.Since(killed).Round(time.Millisecond))

	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if left := strings.Count(r.stdout, "\n"); left > 0 {
			return fmt.Errorf("%d jobs still queued", left)
		}
		return nil
	})
	counts := logEvents(t, logPath)
	for p := range 6 {
		if n := counts["005"][p]; n != 1 {
			t.Errorf("job 1.%d has %d terminate events, want 1", p, n)
		}
		if got := readFile(t, filepath.Join(w.dir, fmt.Sprintf("out.%d", p))); got != fmt.Sprintf("done %d\n", p) {
			t.Errorf("out.%d = %q", p, got)
		}
	}
	lost := counts["024"]
	if total(lost) == 0 || total(counts["022"]) < total(lost) {
		t.Errorf("%d disconnected and %d reconnect-failed events, want at least one of each, one disconnected per reconnect failed",
			total(counts["022"]), total(lost))
	}
	t.Logf("%d jobs lost with the node, each completed once elsewhere", total(lost))
}
