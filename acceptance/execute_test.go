package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// executeJob writes into its scratch directory, says who it runs as and
// where, and waits for the test to look at its directory.
const executeJob = `#!/bin/sh
echo "uid=$(id -u) slot=$_CONDOR_SLOT scratch=$_CONDOR_SCRATCH_DIR"
echo "the job's secret" > "$_CONDOR_SCRATCH_DIR/secret.txt" && echo wrote
touch "$_CONDOR_SCRATCH_DIR/running"
i=0
while [ ! -e "$_CONDOR_SCRATCH_DIR/seen" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
echo done
`

// TestExecuteDirectoryLayout runs a job on a pool the local provider
// starts, as root: the agent logs no warning about its execute directory,
// the job runs as a slot user and writes its scratch directory, and
// another local user can neither list the execute directory nor read the
// job's files, nor list the working directory's .pond.
func TestExecuteDirectoryLayout(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "slot users are for agents that run as root")
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", `
pool "ex" {
  nodes  = 1
  slots  = 1
  config = {
    NEGOTIATOR_INTERVAL     = "2"
    NEGOTIATOR_MIN_INTERVAL = "1"
    UPDATE_INTERVAL         = "5"
  }
}

output "cm" {
  value = pool.ex.central_manager
}
`)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	execute := executeDirOf(t, w, "ex-0")
	w.write("job.sh", executeJob)
	if err := os.Chmod(filepath.Join(w.dir, "job.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("job.sub", "executable = job.sh\noutput = job.out\nerror = job.err\nlog = job.log\nqueue\n")
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")

	var scratch string
	eventually(t, 60*time.Second, func() error {
		found, _ := filepath.Glob(filepath.Join(execute, "dir_*", "running"))
		if len(found) == 0 {
			return fmt.Errorf("no job runs in %s yet", execute)
		}
		scratch = filepath.Dir(found[0])
		return nil
	})
	// Another local user, as the job's neighbours are.
	asNobody := func(args ...string) (string, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{
		{"ls", execute},
		{"ls", scratch},
		{"cat", filepath.Join(scratch, "secret.txt")},
		{"ls", filepath.Join(w.dir, ".pond")},
	} {
		if out, err := asNobody(args...); err == nil {
			t.Errorf("another user ran %v:\n%s", args, out)
		}
	}
	if fi, err := os.Stat(scratch); err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid == 0 {
		t.Errorf("the scratch directory %s: %v, %v; want 0700, the job user's", scratch, fi.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "seen"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	eventually(t, 60*time.Second, func() error {
		if n := total(logEvents(t, filepath.Join(w.dir, "job.log"))["005"]); n != 1 {
			return fmt.Errorf("the job has not terminated")
		}
		return nil
	})
	out := readFile(t, filepath.Join(w.dir, "job.out"))
	m := regexp.MustCompile(`uid=(\d+) slot=(\S+) scratch=(\S+)\nwrote\n`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" || m[2] != "slot1" || m[3] != scratch || !strings.HasSuffix(out, "done\n") {
		t.Errorf("the job printed:\n%s\nstderr:\n%s", out, readFile(t, filepath.Join(w.dir, "job.err")))
	}
	log, err := os.ReadFile(filepath.Join(w.dir, ".pond", "local", "nodes", "ex-0", "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "execute") {
			t.Errorf("the agent warns of its execute directory: %s", line)
		}
	}
}
