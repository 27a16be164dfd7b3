package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// TestGlideinSlurmLogin runs glideins on a Slurm cluster reached through
// its login node over SSH, as a user other than the one pondctl runs as:
// the glidein's job runs as that user and its slot joins the pool. Then
// an apply that grows the resource has its SSH connection cut while
// sbatch runs on the login node (a wrapper waits there first); whether
// that apply succeeds or fails, the next one leaves exactly the glideins
// the state lists on the cluster, no job twice and none unknown to the
// state; destroy leaves none.
func TestGlideinSlurmLogin(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2, CPUs: 2, MemoryMB: 4000})
	ln := slurmtest.StartLogin(t, c)
	// sbatch on the login node: while the file slow exists, a
	// submission (--parsable, not plan's --test-only) leaves mark, then
	// waits before it submits.
	mark := filepath.Join(filepath.Dir(ln.WorkDir), "mark")
	slow := filepath.Join(filepath.Dir(ln.WorkDir), "slow")
	wrapper := filepath.Join(filepath.Dir(ln.WorkDir), "sbatch")
	if err := os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\nif [ -e %s ] && [ \"$1\" = --parsable ]; then touch %s; sleep 3; fi\nexec sbatch \"$@\"\n", slow, mark)), 0o755); err != nil {
		t.Fatal(err)
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", fmt.Sprintf(`
pond {
  backend "local" { path = "pond.state" }
}

variable "n" {
  type    = number
  default = 1
}

provider "local" {}

provider "slurm" {
  partition    = %q
  work_dir     = %q
  bind_address = "127.0.0.1"
  commands     = { sbatch = %q }
  login {
    host             = %q
    port             = %d
    user             = %q
    private_key_file = %q
    known_hosts_file = %q
  }
}

pool "campus" {
  provider = provider.local
  nodes    = 1
}

glidein "g" {
  provider   = provider.slurm
  pool       = pool.campus.central_manager
  nodes      = var.n
  lifetime   = "30m"
  attributes = { Site = "hpc" }
}

output "cm" {
  value = pool.campus.central_manager
}
`, c.Partitions[0], ln.WorkDir, wrapper, ln.Host, ln.Port, ln.User, ln.SSH.KeyFile, ln.SSH.KnownHosts))
	defer func() {
		if t.Failed() {
			t.Logf("squeue:\n%s\nthe cluster's logs:\n%s\nsshd:\n%s", c.Run(t, "squeue", "-h", "-t", "all", "-o", "%i %j %u %T %r"), c.Logs(), ln.SSH.Log(0))
		}
	}()
	// jobs are the glideins' Slurm jobs not ended: "NAME USER" each.
	jobs := func() []string {
		var js []string
		for _, line := range strings.Split(strings.TrimSpace(c.Run(t, "squeue", "-h", "-t", "PD,R,CF", "-o", "%j %u")), "\n") {
			if strings.HasPrefix(line, "pond-") {
				js = append(js, line)
			}
		}
		slices.Sort(js)
		return js
	}
	want := func(ids []string) []string {
		var js []string
		for _, id := range ids {
			js = append(js, id+" "+ln.User)
		}
		slices.Sort(js)
		return js
	}

	w.expect(0, "apply", "-auto-approve")
	ids := w.glideinIDs("glidein.g")
	if len(ids) != 1 {
		t.Fatalf("after apply: glideins %v, want 1", ids)
	}
	if got := jobs(); !slices.Equal(got, want(ids)) {
		t.Fatalf("squeue shows %v, want %v", got, want(ids))
	}
	cm := w.output("cm")
	eventually(t, 90*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Name", "IsGlidein", "GlideinID", "Site")
		if !strings.Contains(r.stdout, "@"+ids[0]+" true "+ids[0]+" hpc") {
			return fmt.Errorf("no slot of %s in the pool:\n%s", ids[0], r)
		}
		return nil
	})

	// Grow to 3, cutting the connection while the first new sbatch runs.
	if err := os.WriteFile(slow, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cut := make(chan []int, 1)
	go func() {
		defer close(cut)
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(mark); err == nil {
				cut <- ln.SSH.CutConnections(0)
				return
			}
		}
	}()
	r := w.run("apply", "-auto-approve", "-var=n=3")
	killed, ok := <-cut
	if !ok {
		t.Fatalf("the apply never ran sbatch on the login node:\n%s", r)
	}
	t.Logf("cut the connection (sshd %v); that apply exited %d:\n%s", killed, r.code, r.stdout+r.stderr)
	os.Remove(slow)
	w.expect(0, "apply", "-auto-approve", "-var=n=3")
	ids = w.glideinIDs("glidein.g")
	if len(ids) != 3 {
		t.Fatalf("after the next apply: glideins %v, want 3", ids)
	}
	if got := jobs(); !slices.Equal(got, want(ids)) {
		t.Fatalf("squeue shows %v, the state lists %v", got, want(ids))
	}

	w.expect(0, "destroy", "-auto-approve")
	if got := jobs(); len(got) != 0 {
		t.Fatalf("after destroy squeue shows %v", got)
	}
	if left, _ := filepath.Glob(filepath.Join(ln.WorkDir, "pond-*")); len(left) != 0 {
		t.Fatalf("after destroy the login node keeps %v", left)
	}
}
