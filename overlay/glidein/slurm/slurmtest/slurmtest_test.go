package slurmtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// TestStartRunsJobs starts a two-node cluster, runs a job on each node and
// finds both in the completion log once they ended.
func TestStartRunsJobs(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2, MinJobAge: time.Second})
	out := c.Run(t, "sinfo", "-h", "-N", "-o", "%N %t")
	if got, want := strings.Fields(out), []string{"n1", "idle", "n2", "idle"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("sinfo = %q, want %q", out, want)
	}
	// Two jobs that each need a whole node run on both nodes at once.
	for range 2 {
		c.Run(t, "sbatch", "--parsable", "--job-name=slurmtest", "--cpus-per-task=2", "--mem=100", "--output=/dev/null", "--wrap", "sleep 1")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := c.Run(t, "sacct", "-c", "-n", "-X", "-P", "-o", "JobName,State,NodeList")
		if strings.Count(out, "slurmtest|COMPLETED|") == 2 {
			if !strings.Contains(out, "|n1") || !strings.Contains(out, "|n2") {
				t.Fatalf("both jobs did not run on a node each:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not completed in 30s; sacct -c:\n%s\nsqueue:\n%s", out, c.Run(t, "squeue", "-t", "all"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
