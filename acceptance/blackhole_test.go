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
// quarantines a node after three jobs in a row fail within 30 s.
const blackholePool = `
pool "bh" {
  nodes  = 3
  slots  = 2
  config = {
    NEGOTIATOR_INTERVAL     = "2"
    NEGOTIATOR_MIN_INTERVAL = "1"
    UPDATE_INTERVAL         = "5"
    POND_BLACKHOLE_FAILURES = "3"
    POND_BLACKHOLE_RUNTIME  = "30"
  }
}

output "cm" {
  value = pool.bh.central_manager
}
`

// blackholeJob fails at once on the node bh-1, as a job does on a worker
// that lacks a library (the scratch directory's name holds the slot's,
// and so the node's), and works elsewhere.
const blackholeJob = `#!/bin/sh
case "$PWD" in
  *_bh-1_*) echo "job.sh: error while loading shared libraries: libphysics.so.3: cannot open shared object file" >&2; exit 127;;
esac
sleep 2
echo ok
`

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

// TestBlackholeNodeQuarantined runs jobs on a pool where one node makes
// every job fail at once. After three such failures the node is
// quarantined: condor status and condor quarantine show it with the
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
	if !regexp.MustCompile(`(?m)^bh-1 +until .*: \d+ jobs in a row failed within 30s of their start; the last: job \d+\.\d+ exited with code 127`).MatchString(status) {
		t.Errorf("condor status does not show bh-1's quarantine and its reason:\n%s", status)
	}
	if strings.Count(status[strings.Index(status, "Quarantined machines"):], "\n") != 3 {
		t.Errorf("another machine than bh-1 is quarantined:\n%s", status)
	}

	// The machine ads, as JSON.
	r := w.expect(0, "condor", "status", "-pool", cm, "-json", "-constraint", "PondQuarantined =?= true")
	var ads []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ads); err != nil {
		t.Fatalf("condor status -json: %v\n%s", err, r.stdout)
	}
	for _, ad := range ads {
		if ad["Machine"] != "bh-1" || !strings.Contains(fmt.Sprint(ad["PondQuarantineReason"]), "code 127") {
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
			if f := strings.Fields(line); len(f) > 0 && f[0] == "bh-1" && strings.Contains(line, " jobs in a row failed within 30s") {
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
