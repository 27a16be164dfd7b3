package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// pondAffinity is a central manager without a startd and a pond of one
// sea node, made for job 1.1 (job_ids).
const pondAffinity = `
pool "manager" {
  nodes  = 1
  config = { DAEMON_LIST = "MASTER COLLECTOR NEGOTIATOR SCHEDD", NEGOTIATOR_INTERVAL = "2" }
}
pool "sea" {
  nodes      = 1
  free       = true
  attributes = { SizeClass = "affine" }
}
pond "p" {
  central_manager = pool.manager.central_manager
  requirements    = "SizeClass == \"affine\""
  job_ids         = ["1.1"]
  depends_on      = [pool.sea]
}
output "cm" {
  value = pool.manager.central_manager
}
output "members" {
  value = pond.p.members
}
`

// TestPondAffinity applies a pond made for job 1.1 and submits jobs 1.0
// and 1.1 to its central manager: the member's one slot runs 1.1 first
// (its RANK ranks the pond's PondJobIds highest: 1.1 preempts 1.0 if 1.0
// started first), then 1.0; each job ends once.
func TestPondAffinity(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", pondAffinity)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Name", "PondJobIds")
		if r.code != 0 || !strings.Contains(r.stdout, "1.1") {
			return fmt.Errorf("the member's slot is not stamped yet: %s", r)
		}
		return nil
	})
	w.write("aff.sub", "executable = /bin/sleep\narguments = 8\nlog = aff.log\nrequest_cpus = 1\nrequest_memory = 16\nqueue 2\n")
	w.expect(0, "condor", "submit", "-pool", cm, filepath.Join(w.dir, "aff.sub"))
	eventually(t, 2*time.Minute, func() error {
		r := w.expect(0, "condor", "history", "-pool", cm, "-af", "ClusterId", "ProcId")
		if n := len(strings.Fields(r.stdout)); n < 4 {
			return fmt.Errorf("%d of 2 jobs done", n/2)
		}
		return nil
	})
	data, err := os.ReadFile(filepath.Join(w.dir, "aff.log"))
	if err != nil {
		t.Fatal(err)
	}
	ends := regexp.MustCompile(`(?m)^005 \((\d+\.\d+)\.\d+\)`).FindAllStringSubmatch(string(data), -1)
	if len(ends) != 2 || ends[0][1] != "001.001" {
		t.Fatalf("aff.log: want job 1.1 to end first, then 1.0, once each:\n%s", data)
	}
	if ends[1][1] == ends[0][1] {
		t.Errorf("aff.log: a job ended twice:\n%s", data)
	}
	for _, m := range regexp.MustCompile(`(?m)^004 \((\d+\.\d+)\.\d+\)`).FindAllStringSubmatch(string(data), -1) {
		if m[1] != ends[1][1] {
			t.Errorf("aff.log: job %s, which the pond is for, was evicted:\n%s", m[1], data)
		}
	}
	t.Logf("aff.log:\n%s", data)
}
