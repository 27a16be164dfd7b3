package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// BenchmarkAWSFirstJob measures, for 10, 50 and 200 instances, the real
// `pondctl apply` of a glidein resource on EC2 (moto): the time apply
// takes to launch them all (credentials to SSM, RunInstances, the wait
// until EC2 says they run), and the time from apply's start to the first
// job running on a cloud node (which may come before apply ends), a job
// only a glidein may run waiting in the pool's queue. Only the first two instances boot (their user data run as
// local processes): the 2-core machine cannot run 200 agents, and the
// first job needs one. Sizes default to 10, 50 and 200 instances;
// AWSBENCH_SIZES=10,20 overrides them. Run it with the built binary:
//
//	make build && POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench AWSFirstJob -benchtime 1x -timeout 30m ./acceptance/
func BenchmarkAWSFirstJob(b *testing.B) {
	for _, n := range benchSizes(b, "AWSBENCH_SIZES", []int{10, 50, 200}, 1) {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) { benchAWSFirstJob(b, n) })
	}
}

func benchAWSFirstJob(b *testing.B, n int) {
	endpoint, _, ami := startMoto(b)
	machines := ec2test.NewMachines(b, endpoint)
	machines.Limit = 2
	machines.Env = func(string) []string {
		return []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://" + ec2test.FreeAddr(b)}
	}
	machines.Run(200 * time.Millisecond)
	w := newWorkdir(b, "")
	w.write("main.pond.hcl", fmt.Sprintf(`
pond {
  backend "local" { path = "pond.state" }
}

variable "n" {
  type    = number
  default = 0
}

provider "local" {}

provider "aws" {
  endpoint       = %q
  ami            = %q
  instance_types = ["t3.micro"]
  bind_address   = "127.0.0.1"
  spot           = true
  agent_binary   = %q
  base_dir       = %q
}

pool "campus" {
  provider = provider.local
  nodes    = 1
  slots    = 1
  config   = { NEGOTIATOR_INTERVAL = "1", NEGOTIATOR_MIN_INTERVAL = "0", UPDATE_INTERVAL = "1" }
}

glidein "burst" {
  provider   = provider.aws
  pool       = pool.campus.central_manager
  nodes      = var.n
  lifetime   = "1h"
  attributes = { Site = "aws" }
}

output "cm" {
  value = pool.campus.central_manager
}
`, endpoint, ami, pondBin, b.TempDir()))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	w.write("job.sub", strings.Replace(awsJob, "arguments           = 12", "arguments           = 1", 1))
	var applyTook, firstJob time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
		b.StartTimer()
		began := time.Now()
		apply := execPond(w, "apply", "-auto-approve", fmt.Sprintf("-var=n=%d", n))
		var out strings.Builder
		apply.Stdout, apply.Stderr = &out, &out
		if err := apply.Start(); err != nil {
			b.Fatal(err)
		}
		applied := make(chan error, 1)
		go func() { applied <- apply.Wait() }()
		// The first job may start before apply has launched them all.
		var started, done bool
		for deadline := time.Now().Add(5 * time.Minute); !started || !done; time.Sleep(50 * time.Millisecond) {
			select {
			case err := <-applied:
				if err != nil {
					b.Fatalf("apply: %v\n%s", err, out.String())
				}
				applyTook += time.Since(began)
				done = true
			default:
			}
			if data, _ := os.ReadFile(filepath.Join(w.dir, "job.log")); !started && strings.Contains(string(data), "001 (") {
				firstJob += time.Since(began)
				started = true
			}
			if time.Now().After(deadline) {
				b.Fatalf("after 5 minutes, the job started %v, apply done %v:\n%s", started, done, out.String())
			}
		}
		b.StopTimer()
		if got := len(awsGlideinsOfState(b, w)); got != n {
			b.Fatalf("after apply, the state lists %d glideins, want %d", got, n)
		}
		w.expect(0, "apply", "-auto-approve", "-var=n=0")
		w.write("job.log", "")
	}
	b.ReportMetric(applyTook.Seconds()/float64(b.N), "apply-s")
	b.ReportMetric(firstJob.Seconds()/float64(b.N), "first-job-s")
	b.ReportMetric(0, "ns/op")
}

// awsGlideinsOfState returns the glideins of glidein.burst that the state
// lists as queued or running.
func awsGlideinsOfState(t testing.TB, w *workdir) []string {
	t.Helper()
	var ids []string
	for _, g := range awsGlideins(t, w) {
		if g.State == "queued" || g.State == "running" {
			ids = append(ids, g.ID)
		}
	}
	return ids
}
