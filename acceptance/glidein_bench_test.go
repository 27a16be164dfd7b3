package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkGlideinFirstJob measures, per site, the time from `pondctl
// apply` of one glidein to the first job running on it: a job that only a
// glidein may run waits in the pool's queue; apply submits the glidein
// (sbatch, or SSH and the binary's copy), waits until the site runs it;
// the glidein validates, joins the pool, its startd advertises, the
// negotiator (every second) matches the job, which starts (the 001 event
// of its log). Between iterations the glidein is cancelled (nodes = 0).
// On the Slurm cluster it also measures Slurm's own time from sbatch to a
// batch script running (sbatch-s); both start on an idle cluster, no job
// completing. Run it with the built binary, as root:
//
//	make build && POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench GlideinFirstJob -benchtime 5x -timeout 30m ./acceptance/
func BenchmarkGlideinFirstJob(b *testing.B) {
	for _, kind := range []string{"slurm", "ssh"} {
		b.Run(kind, func(b *testing.B) { benchGlideinFirstJob(b, kind) })
	}
}

func benchGlideinFirstJob(b *testing.B, kind string) {
	s := sshSite(b)
	if kind == "slurm" {
		s = slurmSite(b, slurmBenchOptions)
	}
	w := newWorkdir(b, "")
	w.env = append(w.env, s.env...)
	w.write("main.pond.hcl", fmt.Sprintf(`
pond {
  backend "local" { path = "pond.state" }
}

variable "n" {
  type    = number
  default = 0
}

provider "local" {}

%s

pool "campus" {
  provider = provider.local
  nodes    = 1
  slots    = 1
  config   = { NEGOTIATOR_INTERVAL = "1", NEGOTIATOR_MIN_INTERVAL = "0", UPDATE_INTERVAL = "1" }
}

glidein "g" {
  provider   = provider.%s
  pool       = pool.campus.central_manager
  nodes      = var.n
  lifetime   = "30m"
  attributes = { Site = "%s" }
}

output "cm" {
  value = pool.campus.central_manager
}
`, s.provider, s.kind, s.kind))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	var total, sbatch time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		log := fmt.Sprintf("job%d.log", i)
		w.write("job.sub", strings.ReplaceAll(fmt.Sprintf(glideinJobFor, s.kind), "job.log", log)+"\n")
		w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
		if s.cluster != nil {
			slurmIdle(b, s)
		}
		b.StartTimer()
		began := time.Now()
		w.expect(0, "apply", "-auto-approve", "-var=n=1")
		for {
			if data, _ := os.ReadFile(filepath.Join(w.dir, log)); strings.Contains(string(data), "001 (") {
				break
			}
			if time.Since(began) > 3*time.Minute {
				b.Fatalf("iteration %d: the job did not start in 3 minutes", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(began)
		b.StopTimer()
		total += took
		b.Logf("%s: apply to the first job running on a glidein: %s", kind, took.Round(time.Millisecond))
		w.expect(0, "condor", "rm", "-pool", cm, "-all")
		w.expect(0, "apply", "-auto-approve", "-var=n=0")
		if s.cluster != nil {
			took := slurmSbatchToRunning(b, s)
			sbatch += took
			b.Logf("slurm: sbatch to a batch script running: %s", took.Round(time.Millisecond))
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/first-job")
	if sbatch > 0 {
		b.ReportMetric(sbatch.Seconds()/float64(b.N), "sbatch-s/running")
	}
	b.ReportMetric(0, "ns/op")
}

// slurmSbatchToRunning times Slurm's own path: sbatch of a script that
// touches a file, until the file exists.
func slurmSbatchToRunning(b *testing.B, s glideinSite) time.Duration {
	slurmIdle(b, s)
	mark := filepath.Join(s.workDir, fmt.Sprintf("ran-%d", time.Now().UnixNano()))
	began := time.Now()
	cmd := s.cluster.Command(b.Context(), "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "touch "+mark)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("sbatch: %v: %s", err, out)
	}
	for {
		if _, err := os.Stat(mark); err == nil {
			return time.Since(began)
		}
		if time.Since(began) > time.Minute {
			b.Fatal("the sbatch job did not run in a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slurmIdle waits until the cluster has no job, none completing either: a
// node still cleaning up after the last glidein delays the next job.
func slurmIdle(b *testing.B, s glideinSite) {
	for began := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if out := strings.TrimSpace(s.cluster.Run(b, "squeue", "-h", "-o", "%i %T")); out == "" {
			return
		}
		if time.Since(began) > time.Minute {
			b.Fatal("the cluster still has jobs after a minute")
		}
	}
}
