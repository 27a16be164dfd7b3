package acceptance

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// maxJobsConfig is a one-node pool whose pilot factory keeps at most two
// glideins of one slot on the Slurm cluster, each running at most
// max_jobs (%s) jobs; their idle timeout is long, so that they leave by
// their job count.
const maxJobsConfig = `
pond {
  backend "local" { path = "pond.state" }
}

provider "local" {
  bind_address = "127.0.0.1"
}

%s

pool "campus" {
  provider = provider.local
  nodes    = 1
  config = {
    NEGOTIATOR_INTERVAL   = "2"
    POND_FACTORY_INTERVAL = "2s"
    UPDATE_INTERVAL       = "1"
  }
}

glidein "hpc" {
  provider     = provider.slurm
  pool         = pool.campus.central_manager
  lifetime     = "1h"
  idle_timeout = "10m"
  max_jobs     = %s
  slots        = 1
  memory       = "512MB"
  attributes   = { Site = "hpc" }

  factory {
    max_queued           = 2
    max_running          = 2
    max_submit_per_cycle = 2
  }
}

output "cm" {
  value = pool.campus.central_manager
}
`

// maxJobsJobs are three jobs of one cluster (one owner: the schedd would
// run them one after another on a claim), which only a glidein runs.
const maxJobsJobs = `executable          = /bin/sleep
arguments           = 4
transfer_executable = false
requirements        = IsGlidein =?= true && Site == "hpc"
request_memory      = 16
log                 = jobs.log
queue 3
`

// TestGlideinMaxJobs runs a glidein entry of max_jobs = 1 on a real Slurm
// cluster through the pool's pilot factory: a bad max_jobs is refused at
// its place in the file; three jobs of one cluster, two glideins at most
// at once, run on three glideins, one each (the schedd, which would run
// the third on the claim of the first to finish, is refused and the job
// waits for a glidein of its own), every job ending once; and each
// glidein leaves once its job is done, long before its idle timeout, its
// Slurm job COMPLETED (it ran itself down).
func TestGlideinMaxJobs(t *testing.T) {
	t.Parallel()
	s := slurmSite(t, slurmtest.Options{Nodes: 2, CPUs: 2, MemoryMB: 2000})
	w := newWorkdir(t, "")
	w.env = append(w.env, s.env...)
	defer func() {
		if t.Failed() {
			t.Logf("squeue:\n%s\nslurm:\n%s", s.describe(t), s.logs())
		}
	}()

	// A negative max_jobs: an error at the argument, its file and line
	// and the value underlined.
	bad := fmt.Sprintf(maxJobsConfig, s.provider, "-1")
	w.write("main.pond.hcl", bad)
	line := 1 + strings.Count(bad[:strings.Index(bad, "max_jobs")], "\n")
	r := w.expect(1, "validate")
	if out := r.stdout + r.stderr; !strings.Contains(out, fmt.Sprintf("on main.pond.hcl line %d", line)) || !strings.Contains(out, "max_jobs") ||
		!strings.Contains(out, "out of range") || strings.Contains(out, "panic") {
		t.Fatalf("validate of max_jobs = -1: want an error on main.pond.hcl line %d naming max_jobs:\n%s", line, out)
	}

	r = w.expect(1, "validate", "-json")
	var doc struct {
		Diagnostics []struct {
			Detail string `json:"detail"`
			Range  struct {
				Filename string `json:"filename"`
				Start    struct {
					Line, Column int
				} `json:"start"`
			} `json:"range"`
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("validate -json: %v\n%s", err, r.stdout)
	}
	lineText := strings.Split(bad, "\n")[line-1]
	col := 1 + strings.Index(lineText, "-1")
	if len(doc.Diagnostics) != 1 || doc.Diagnostics[0].Range.Filename != "main.pond.hcl" || doc.Diagnostics[0].Range.Start.Line != line ||
		doc.Diagnostics[0].Range.Start.Column != col || !strings.HasPrefix(doc.Diagnostics[0].Detail, "max_jobs: ") {
		t.Fatalf("validate -json of max_jobs = -1: want one diagnostic at main.pond.hcl:%d:%d naming max_jobs:\n%s", line, col, r.stdout)
	}

	w.write("main.pond.hcl", fmt.Sprintf(maxJobsConfig, s.provider, "1"))
	before := len(s.jobs(t))
	w.expect(0, "apply", "-auto-approve")
	defer w.expect(0, "destroy", "-auto-approve")
	cm := w.output("cm")
	w.write("jobs.sub", maxJobsJobs)
	began := time.Now()
	w.expect(0, "condor", "submit", "-pool", cm, "jobs.sub")
	logPath := filepath.Join(w.dir, "jobs.log")
	eventually(t, 2*time.Minute, func() error {
		if n := strings.Count(readFile(t, logPath), "\n005 ("); n < 3 {
			return fmt.Errorf("%d of 3 jobs done", n)
		}
		return nil
	})
	t.Logf("3 jobs done in %s", time.Since(began).Round(time.Second))
	// Every glidein leaves by itself once its job is done.
	eventually(t, time.Minute, func() error {
		if got := s.running(t); len(got) != 0 {
			return fmt.Errorf("still queued or running: %v", got)
		}
		return nil
	})
	left := time.Since(began)
	if left > 5*time.Minute {
		t.Errorf("the glideins left %s after the jobs were submitted: by their idle timeout, not their job count", left)
	}

	// Each job ended once, each on a glidein of its own.
	events := readFile(t, logPath)
	ended := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^005 \((\d+)\.(\d+)\.`).FindAllStringSubmatch(events, -1) {
		ended[m[1]+"."+m[2]]++
	}
	if len(ended) != 3 {
		t.Errorf("jobs ended %v, want 3 jobs once each:\n%s", ended, events)
	}
	for job, n := range ended {
		if n != 1 {
			t.Errorf("job %s ended %d times:\n%s", job, n, events)
		}
	}
	r = w.expect(0, "condor", "history", "-pool", cm, "-af", "ClusterId", "ProcId", "JobStatus", "LastRemoteHost", "NumJobStarts")
	var hosts []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 || f[2] != "4" {
			t.Errorf("history line %q: want a completed job (JobStatus 4) and its host", l)
			continue
		}
		hosts = append(hosts, f[3])
	}
	slices.Sort(hosts)
	if len(hosts) != 3 || len(slices.Compact(slices.Clone(hosts))) != 3 {
		t.Errorf("the jobs ran on %v: want three glideins, one job each\n%s", hosts, r.stdout)
	}
	// Each glidein ran itself down (exit 0: Slurm says COMPLETED).
	ids := s.jobs(t)[before:]
	if len(ids) < 3 {
		t.Errorf("%d glideins submitted for 3 jobs of max_jobs = 1: %v", len(ids), ids)
	}
	states := s.cluster.Run(t, "squeue", "-h", "-t", "all", "-o", "%j %T")
	for _, id := range ids {
		if !strings.Contains(states, id+" COMPLETED") {
			t.Errorf("%s did not end by itself:\n%s", id, states)
		}
	}
	t.Logf("glideins %v, the last gone %s after the submission", ids, left.Round(time.Second))
}
