package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// blackholePool is a local pool of three agents with two slots each, that
// quarantines a node after three jobs in a row it could not start through
// its own fault.
const blackholePool = `
pool "bh" {
  nodes  = 3
  slots  = 2
  config = {
    NEGOTIATOR_INTERVAL     = "2"
    NEGOTIATOR_MIN_INTERVAL = "1"
    UPDATE_INTERVAL         = "5"
    POND_BLACKHOLE_FAILURES = "3"
  }
}

output "cm" {
  value = pool.bh.central_manager
}
`

// blackholeJob works wherever it starts.
const blackholeJob = `#!/bin/sh
sleep 2
echo ok
`

// failingJob fails at once, the user's own mistake.
const failingJob = `#!/bin/sh
echo "fail.sh: line 2: no such input" >&2
exit 1
`

// breakExecute puts a file where the execute directory of the node's
// agent (from its log) should be, as when its file system broke: the node
// can start no job.
func breakExecute(t *testing.T, w *workdir, node string) {
	t.Helper()
	execute := executeDirOf(t, w, node)
	if err := os.RemoveAll(execute); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(execute, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// executeDirOf is the execute directory of the node's agent, from its
// log.
func executeDirOf(t *testing.T, w *workdir, node string) string {
	t.Helper()
	var execute string
	eventually(t, 30*time.Second, func() error {
		data, err := os.ReadFile(filepath.Join(w.dir, ".pond", "local", "nodes", node, "agent.log"))
		if err != nil {
			return err
		}
		m := regexp.MustCompile(`in the execute directory".* execute=(\S+)`).FindSubmatch(data)
		if m == nil {
			return fmt.Errorf("%s's agent log names no execute directory", node)
		}
		execute = string(m[1])
		return nil
	})
	return execute
}

// executeOn matches an execute event's slot line.
var executeOn = regexp.MustCompile(`(?m)^001 \(.*\n\tSlotName: slot\d+(?:_\d+)?@(\S+)`)

// executions counts the execute events of a job log by node.
func executions(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range executeOn.FindAllStringSubmatch(string(b), -1) {
		out[m[1]]++
	}
	return out
}

// TestBlackholeNodeQuarantined runs jobs on a pool where one node cannot
// start any (its execute directory broken). After three such failures the
// node is quarantined: its slots show Owner, condor status and condor quarantine show it with the
// reason, sea members with its quarantined tag, its agent logs it, and no
// job starts there any more; the jobs, which allow retries, all complete
// on the other nodes. An administrator's condor quarantine -lift ends it.
func TestBlackholeNodeQuarantined(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", blackholePool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	breakExecute(t, w, "bh-1")
	w.write("job.sh", blackholeJob)
	if err := os.Chmod(filepath.Join(w.dir, "job.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "b"} {
		w.write(c+".sub", fmt.Sprintf("executable = job.sh\nmax_retries = 5\noutput = %s.$(Process)\nlog = bh.log\nqueue 6\n", c))
		w.expect(0, "condor", "submit", "-pool", cm, c+".sub")
	}

	logPath := filepath.Join(w.dir, "bh.log")
	var status string
	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm)
		if r.code != 0 {
			return fmt.Errorf("condor status: %s", r)
		}
		status = r.stdout
		if !strings.Contains(status, "Quarantined machines") {
			return fmt.Errorf("no machine quarantined yet; executions %v", executions(t, logPath))
		}
		return nil
	})
	startsThere := executions(t, logPath)["bh-1"]
	t.Logf("quarantined after %d jobs started on bh-1:\n%s", startsThere, status)
	if !regexp.MustCompile(`(?m)^bh-1 +until .*: 3 jobs in a row could not start through a fault of the machine; the last: job \d+\.\d+ could not start: .*not a directory`).MatchString(status) {
		t.Errorf("condor status does not show bh-1's quarantine and its reason:\n%s", status)
	}
	if strings.Count(status[strings.Index(status, "Quarantined machines"):], "\n") != 3 {
		t.Errorf("another machine than bh-1 is quarantined:\n%s", status)
	}
	// The default table shows its unclaimed slots as HTCondor shows a
	// slot whose START is false.
	if !regexp.MustCompile(`(?m)^slot\S*@bh-1 +\S+ +\S+ +Owner `).MatchString(status) {
		t.Errorf("condor status shows no Owner slot of bh-1:\n%s", status)
	}

	// The machine ads, as JSON.
	r := w.expect(0, "condor", "status", "-pool", cm, "-json", "-constraint", "PondQuarantined =?= true")
	var ads []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ads); err != nil {
		t.Fatalf("condor status -json: %v\n%s", err, r.stdout)
	}
	for _, ad := range ads {
		if ad["Machine"] != "bh-1" || !strings.Contains(fmt.Sprint(ad["PondQuarantineReason"]), "could not start") {
			t.Errorf("quarantined slot ad: Machine %v, reason %v", ad["Machine"], ad["PondQuarantineReason"])
		}
	}
	if len(ads) == 0 {
		t.Errorf("no slot ad says PondQuarantined")
	}

	// The sea's members, as a table and as JSON.
	eventually(t, 30*time.Second, func() error {
		r := w.run("sea", "members", "-sea", cm)
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "bh-1" && strings.Contains(line, " jobs in a row could not start") {
				return nil
			}
		}
		return fmt.Errorf("sea members does not show bh-1 quarantined:\n%s", r)
	})
	r = w.expect(0, "sea", "members", "-sea", cm, "-json")
	var members []struct {
		Name string            `json:"name"`
		Tags map[string]string `json:"tags"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &members); err != nil {
		t.Fatalf("sea members -json: %v\n%s", err, r.stdout)
	}
	for _, m := range members {
		if q := m.Tags["quarantined"]; (q != "") != (m.Name == "bh-1") {
			t.Errorf("member %s has quarantined tag %q", m.Name, q)
		}
	}

	// Every job completes, on the healthy nodes, with its output.
	eventually(t, 180*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if left := strings.Count(r.stdout, "\n"); left > 0 {
			return fmt.Errorf("%d jobs still queued", left)
		}
		return nil
	})
	for _, c := range []string{"a", "b"} {
		for p := range 6 {
			if got := readFile(t, filepath.Join(w.dir, fmt.Sprintf("%s.%d", c, p))); got != "ok\n" {
				t.Errorf("%s.%d = %q, want ok", c, p, got)
			}
		}
	}
	if n := executions(t, logPath)["bh-1"]; n != startsThere {
		t.Errorf("%d jobs started on bh-1 after its quarantine", n-startsThere)
	}
	counts := logEvents(t, logPath)
	if n := total(counts["005"]); n != 12 {
		t.Errorf("%d terminate events, want one for each of the 12 jobs", n)
	}
	data, err := os.ReadFile(filepath.Join(w.dir, ".pond", "local", "nodes", "bh-1", "agent.log"))
	if err != nil || !strings.Contains(string(data), "the node is quarantined") {
		t.Errorf("bh-1's agent did not log its quarantine (%v)", err)
	}

	// An administrator lifts the quarantine.
	r = w.expect(0, "condor", "quarantine", "-pool", cm)
	if !strings.HasPrefix(r.stdout, "bh-1: quarantined until ") {
		t.Errorf("condor quarantine printed:\n%s", r.stdout)
	}
	r = w.expect(0, "condor", "quarantine", "-pool", cm, "-lift", "bh-1")
	if !strings.Contains(r.stdout, "bh-1: quarantine lifted") {
		t.Errorf("condor quarantine -lift printed:\n%s", r.stdout)
	}
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "quarantine", "-pool", cm)
		if !strings.Contains(r.stdout, "No machine is quarantined.") {
			return fmt.Errorf("still quarantined: %s", r)
		}
		return nil
	})
}

// TestFailingJobsDoNotQuarantine runs ten jobs in a row, of two clusters,
// that exit 1 at once, a user's own mistake: every one completes with its
// exit code, and no slot is ever Owner nor its node quarantined.
func TestFailingJobsDoNotQuarantine(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", strings.Replace(blackholePool, "nodes  = 3", "nodes  = 1", 1))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	w.write("fail.sh", failingJob)
	if err := os.Chmod(filepath.Join(w.dir, "fail.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "b"} {
		w.write(c+".sub", "executable = fail.sh\nerror = "+c+".$(Process).err\nlog = fail.log\nqueue 5\n")
		w.expect(0, "condor", "submit", "-pool", cm, c+".sub")
	}
	logPath := filepath.Join(w.dir, "fail.log")
	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm)
		if r.code != 0 {
			return fmt.Errorf("condor status: %s", r)
		}
		if regexp.MustCompile(`(?m)^slot\S+ +\S+ +\S+ +Owner `).MatchString(r.stdout) ||
			strings.Contains(r.stdout, "Quarantined machines") {
			t.Fatalf("a slot is Owner or quarantined after jobs exited 1:\n%s", r.stdout)
		}
		if n := total(logEvents(t, logPath)["005"]); n < 10 {
			return fmt.Errorf("%d of 10 jobs terminated", n)
		}
		return nil
	})
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "Normal termination (return value 1)"); n != 10 {
		t.Errorf("%d jobs ended with return value 1, want 10:\n%s", n, b)
	}
	r := w.expect(0, "condor", "status", "-pool", cm)
	if strings.Contains(r.stdout, "Quarantined machines") || !strings.Contains(r.stdout, "Unclaimed") && !strings.Contains(r.stdout, "Claimed") {
		t.Errorf("condor status after the jobs:\n%s", r.stdout)
	}
	r = w.expect(0, "condor", "quarantine", "-pool", cm)
	if !strings.Contains(r.stdout, "No machine is quarantined.") {
		t.Errorf("condor quarantine printed:\n%s", r.stdout)
	}
	for _, m := range w.seaMembers(cm) {
		if m.Tags["quarantined"] != "" {
			t.Errorf("member %s is quarantined: %s", m.Name, m.Tags["quarantined"])
		}
	}
}
