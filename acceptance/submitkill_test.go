package acceptance

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const submitKillPool = `
pool "sk" {
  nodes = 1
}

output "cm" {
  value = pool.sk.central_manager
}
`

var (
	submittedRe    = regexp.MustCompile(`(\d+) job\(s\) submitted to cluster (\d+)\.`)
	notCommittedRe = regexp.MustCompile(`cluster (\d+) not committed`)
)

// TestSubmitSurvivesScheddKill submits a large cluster, kills the agent
// running the schedd (SIGKILL) while the submit is under way and brings
// it back with pondctl apply some seconds later, a few times at different moments: what
// condor submit reports (exit code and message) always matches what the
// queue holds: a cluster reported submitted holds every job once, one
// reported not committed holds none, and nothing is queued that no
// submit reported.
func TestSubmitSurvivesScheddKill(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", submitKillPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	const n = 15000
	// Held jobs stay in the queue, where they can be counted.
	w.write("big.sub", fmt.Sprintf("executable = /bin/true\nhold = true\nqueue %d\n", n))

	want := map[int]int{} // jobs by cluster, as the submits reported
	during := 0
	for round, delay := range []time.Duration{1500 * time.Millisecond, 3 * time.Second, 5 * time.Second} {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		cmd := exec.CommandContext(ctx, pondBin, "condor", "submit", "-pool", cm, "big.sub")
		cmd.Dir, cmd.Env = w.dir, w.env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
			// Nothing to kill it in: the queue must hold what it said.
			t.Logf("round %d: the submit ended before the kill at %s", round, delay)
		case <-time.After(delay):
			during++
			killNode(t, w, "sk-0")
			// The operator notices and repairs it, some seconds later:
			// longer than a few quick retries.
			time.Sleep(8 * time.Second)
			w.expect(0, "apply", "-auto-approve")
			err = <-done
		}
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("round %d: the submit did not end within 4 minutes", round)
		}
		if _, exited := err.(*exec.ExitError); err != nil && !exited {
			t.Fatalf("round %d: condor submit: %v", round, err)
		}
		if len(agentPIDs(w.dir)) == 0 {
			w.expect(0, "apply", "-auto-approve")
		}
		code := cmd.ProcessState.ExitCode()
		stderr := errb.String()
		switch m, nc := submittedRe.FindStringSubmatch(out.String()), notCommittedRe.FindStringSubmatch(stderr); {
		case code == 0 && m != nil:
			jobs, _ := strconv.Atoi(m[1])
			cluster, _ := strconv.Atoi(m[2])
			want[cluster] += jobs
			t.Logf("round %d (kill at %s): cluster %d submitted", round, delay, cluster)
		case code == 1 && nc != nil:
			cluster, _ := strconv.Atoi(nc[1])
			want[cluster] += 0
			t.Logf("round %d (kill at %s): cluster %d not committed", round, delay, cluster)
		case code == 1 && strings.Contains(stderr, "reserving a cluster"):
			t.Logf("round %d (kill at %s): no cluster reserved", round, delay)
		default:
			t.Fatalf("round %d (kill at %s): condor submit exit %d, neither a submitted cluster nor one not committed:\n%s", round, delay, code, stderr)
		}
		// The queue holds what the submits reported, no more, no less.
		got := map[int]int{}
		r := w.expect(0, "condor", "q", "-pool", cm, "-af", "ClusterId")
		for _, f := range strings.Fields(r.stdout) {
			c, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("condor q -af ClusterId: %q", f)
			}
			got[c]++
		}
		for c, jobs := range want {
			if got[c] != jobs {
				t.Errorf("round %d: cluster %d holds %d jobs, the submit reported %d", round, c, got[c], jobs)
			}
		}
		for c, jobs := range got {
			if _, ok := want[c]; !ok {
				t.Errorf("round %d: cluster %d holds %d jobs that no submit reported", round, c, jobs)
			}
		}
		if t.Failed() {
			t.Fatalf("submit output:\n%s", stderr)
		}
	}
	if during == 0 {
		t.Fatal("no kill landed during a submit")
	}
}
