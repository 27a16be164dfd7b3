package slurmtest_test

import (
	"context"
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

// TestAccounting starts a cluster with slurmdbd: accounts and QOS are
// enforced, and sacct finds ended jobs in the database.
func TestAccounting(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Accounting: true, Accounts: []string{"physics", "chemistry"}, QOS: []string{"high"}})
	out := c.Run(t, "sacctmgr", "-n", "-P", "show", "associations", "where", "user=root", "format=Account")
	if !strings.Contains(out, "physics") || !strings.Contains(out, "chemistry") {
		t.Fatalf("root's associations: %q", out)
	}
	if err := c.Command(context.Background(), "sbatch", "--account=nope", "--output=/dev/null", "--wrap", "true").Run(); err == nil {
		t.Error("sbatch --account=nope: accepted")
	}
	if err := c.Command(context.Background(), "sbatch", "--qos=nope", "--output=/dev/null", "--wrap", "true").Run(); err == nil {
		t.Error("sbatch --qos=nope: accepted")
	}
	c.Run(t, "sbatch", "--job-name=slurmtest", "--account=chemistry", "--qos=high", "--output=/dev/null", "--wrap", "true")
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := c.Run(t, "sacct", "-n", "-X", "-P", "-o", "JobName,Account,QOS,State")
		if strings.Contains(out, "slurmtest|chemistry|high|COMPLETED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sacct does not show the job completed: %q", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
