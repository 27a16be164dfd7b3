package slurmtest_test

import (
	"context"
	"os"
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

func TestMain(m *testing.M) {
	code := m.Run()
	slurmtest.StopShared()
	os.Exit(code)
}

// TestSharedIsolates: two views of the shared cluster, held at once, each
// have a node and a partition of their own; a job fills its view's node
// without taking the other's, each view's squeue and sinfo show only its
// own, and once the test holding them ended, every node is idle again for
// the next test.
func TestSharedIsolates(t *testing.T) {
	var parts []string
	t.Run("two", func(t *testing.T) {
		a, b := slurmtest.Shared(t, 1), slurmtest.Shared(t, 1)
		for _, c := range []*slurmtest.Cluster{a, b} {
			if len(c.Nodes) != 1 || len(c.Partitions) != 1 {
				t.Fatalf("Shared(1): nodes %q, partitions %q", c.Nodes, c.Partitions)
			}
		}
		if a.Nodes[0] == b.Nodes[0] || a.Partitions[0] == b.Partitions[0] {
			t.Fatalf("two views share node %s or partition %s", a.Nodes[0], a.Partitions[0])
		}
		parts = []string{a.Partitions[0], b.Partitions[0]}
		jobs := map[*slurmtest.Cluster]string{}
		for _, c := range []*slurmtest.Cluster{a, b} {
			// Its node whole, and then a job that waits for it.
			jobs[c] = strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "--job-name=shared", "--cpus-per-task=2", "--output=/dev/null", "--wrap", "sleep 600"))
			c.Run(t, "sbatch", "--parsable", "--job-name=shared", "--cpus-per-task=2", "--output=/dev/null", "--wrap", "sleep 600")
		}
		for c, other := range map[*slurmtest.Cluster]*slurmtest.Cluster{a: b, b: a} {
			deadline := time.Now().Add(30 * time.Second)
			for {
				out := c.Run(t, "squeue", "-h", "-o", "%i %T %N %P")
				if strings.Contains(out, jobs[c]+" RUNNING "+c.Nodes[0]+" "+c.Partitions[0]) && strings.Count(out, "\n") == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("squeue after 30s: %q, want %s running on %s and one job pending, no other", out, jobs[c], c.Nodes[0])
				}
				time.Sleep(100 * time.Millisecond)
			}
			if out := c.Run(t, "squeue", "-h", "-o", "%i"); strings.Contains(out, jobs[other]+"\n") {
				t.Errorf("squeue shows the other view's job %s: %q", jobs[other], out)
			}
			if out := strings.Fields(c.Run(t, "sinfo", "-h", "-N", "-o", "%N")); len(out) != 1 || out[0] != c.Nodes[0] {
				t.Errorf("sinfo shows nodes %q, want only %s", out, c.Nodes[0])
			}
		}
	})
	// That test ended: its jobs are cancelled and its nodes free, so that
	// a test holding every node gets them at once.
	c := slurmtest.Shared(t, slurmtest.SharedNodes)
	out := c.Run(t, "sinfo", "-h", "-N", "-o", "%N %t")
	if strings.Count(out, " idle") != slurmtest.SharedNodes {
		t.Fatalf("sinfo of every shared node: %q, want all idle", out)
	}
	if out := c.Run(t, "squeue", "-h", "-t", "PENDING,RUNNING", "-o", "%i", "--partition="+strings.Join(parts, ",")); strings.TrimSpace(out) != "" {
		t.Fatalf("jobs of the ended test left: %q", out)
	}
}
