package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// tmpPool is one agent of one slot: its jobs run one after the other, as
// the same slot user.
const tmpPool = `
pool "tmp" {
  nodes  = 1
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.tmp.central_manager
}
`

// TestJobsShareNoTmp runs a job of one user that leaves files only it may
// read in /tmp, /var/tmp and /dev/shm, then a job of another user on the
// same slot: the second finds none of them, and none reached the host's
// directories.
func TestJobsShareNoTmp(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "jobs of two users need an agent that runs as root")
	if _, err := exec.LookPath("useradd"); err != nil {
		testenv.SkipOrFail(t, "the test needs useradd to make its local users")
	}
	base, err := os.MkdirTemp("", "pond-tmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	mustAll(t, os.Chmod(base, 0o755))
	mark := fmt.Sprintf("pondtmp%d", time.Now().UnixNano())
	t.Cleanup(func() {
		for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
			os.Remove(filepath.Join(d, mark))
		}
	})

	w := newWorkdir(t, "")
	w.write("main.pond.hcl", tmpPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	// run runs script as a job of a new local user, and returns its
	// output and error.
	run := func(who, script string) (string, string) {
		t.Helper()
		name := fmt.Sprintf("pond%s%d", who, os.Getpid()%100000)
		if out, err := exec.Command("useradd", "-M", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			testenv.SkipOrFailf(t, "useradd %s: %v: %s", name, err, out)
		}
		t.Cleanup(func() { exec.Command("userdel", name).Run() })
		acct, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(acct.Uid)
		gid, _ := strconv.Atoi(acct.Gid)
		home := filepath.Join(base, who)
		mustAll(t, os.Mkdir(home, 0o755), os.Chown(home, uid, gid))
		job := filepath.Join(home, "job.sh")
		mustAll(t, os.WriteFile(job, []byte("#!/bin/sh\n"+script), 0o755), os.Chown(job, uid, gid))
		sub := filepath.Join(w.dir, who+".sub")
		mustAll(t, os.WriteFile(sub, []byte(fmt.Sprintf("initialdir = %s\nexecutable = %s\noutput = out\nerror = err\nqueue\n", home, job)), 0o644))
		tok := w.expect(0, "token", "create", "-subject", name, "-scope", "WRITE", "-lifetime", "1h")
		env := w.env
		w.env = append(append([]string(nil), env...), "POND_TOKEN="+strings.TrimSpace(tok.stdout))
		w.expect(0, "condor", "submit", "-pool", cm, sub)
		w.env = env
		eventually(t, 90*time.Second, func() error {
			r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "JobStatus", "HoldReason")
			if r.code != 0 {
				return fmt.Errorf("condor q: %s", r)
			}
			if strings.TrimSpace(r.stdout) != "" {
				return fmt.Errorf("queued: %s", r.stdout)
			}
			return nil
		})
		out, _ := os.ReadFile(filepath.Join(home, "out"))
		errs, _ := os.ReadFile(filepath.Join(home, "err"))
		t.Logf("%s's job:\n%s%s", who, out, errs)
		return string(out), string(errs)
	}

	first, _ := run("alice", fmt.Sprintf(`umask 077
for d in /tmp /var/tmp /dev/shm; do echo secret > $d/%[1]s && cat $d/%[1]s; done
id -u
`, mark))
	if strings.Count(first, "secret") != 3 {
		t.Fatalf("the first job did not write its files: %q", first)
	}
	second, secondErr := run("bob", fmt.Sprintf(`for d in /tmp /var/tmp /dev/shm; do cat $d/%[1]s; ls $d | grep %[1]s; done
id -u
`, mark))
	if strings.Contains(second, "secret") || strings.Contains(second, mark) {
		t.Errorf("the second job saw the first one's files: %q", second)
	}
	if strings.Count(secondErr, "No such file") != 3 {
		t.Errorf("the second job found the first one's files: %q", secondErr)
	}
	t.Logf("the jobs ran as uids %s and %s", lastLine(first), lastLine(second))
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		if _, err := os.Stat(filepath.Join(d, mark)); err == nil {
			t.Errorf("the first job's file reached the host's %s", d)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
