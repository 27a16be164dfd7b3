package acceptance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// condorNamesPool is a one-node pool of four slots.
const condorNamesPool = `
pool "names" {
  nodes  = 1
  slots  = 4
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.names.central_manager
}
`

// TestCondorCommandNames installs the condor_* links, writes a client
// configuration, and drives the pool as a script would: with only
// CONDOR_CONFIG set and PATH holding the links, from a directory that
// has no credentials of its own.
func TestCondorCommandNames(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", condorNamesPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")

	bin := t.TempDir()
	r := w.expect(0, "condor", "install-tools", bin)
	for _, n := range []string{"condor_submit", "condor_q", "condor_status", "condor_rm", "condor_hold", "condor_release", "condor_history", "condor_wait"} {
		if !strings.Contains(r.stdout, "Linked "+filepath.Join(bin, n)+" -> ") {
			t.Errorf("install-tools did not say it linked %s:\n%s", n, r.stdout)
		}
	}
	if r := w.expect(0, "condor", "install-tools", bin); strings.Contains(r.stdout, "Linked") || !strings.Contains(r.stdout, "Unchanged") {
		t.Errorf("a second install-tools changed links:\n%s", r.stdout)
	}
	occupied := t.TempDir()
	if err := os.WriteFile(filepath.Join(occupied, "condor_rm"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := w.run("condor", "install-tools", occupied); r.code != 1 || !strings.Contains(r.stderr, "condor_rm exists and is not a symbolic link") {
		t.Errorf("install-tools over a file: %s", r)
	}

	cfgDir := filepath.Join(t.TempDir(), "client")
	w.expect(0, "condor", "client-config", "-pool", cm, "-dir", cfgDir)
	cfg := filepath.Join(cfgDir, "condor_config")
	for p, mode := range map[string]os.FileMode{cfgDir: 0o700 | os.ModeDir, cfg: 0o600, filepath.Join(cfgDir, "tokens.d", "pond"): 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v, mode %v; want %v", p, err, fi.Mode(), mode)
		}
	}
	if r := w.run("condor", "client-config", "-pool", cm, "-dir", cfgDir); r.code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("client-config over an earlier one: %s", r)
	}

	jobs := t.TempDir()
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "CONDOR_CONFIG=" + cfg}
	run := func(stdin string, name string, args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// The shell finds the command on PATH, as a script's does.
		cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `exec "$0" "$@"`, name}, args...)...)
		cmd.Dir, cmd.Env, cmd.Stdin = jobs, env, strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return result{stdout: out.String(), stderr: errb.String(), code: code}
	}
	expect := func(code int, want, stdin, name string, args ...string) string {
		t.Helper()
		r := run(stdin, name, args...)
		if r.code != code || (want != "" && r.stdout != want) {
			t.Fatalf("%s %q: want exit %d and %q, got %s", name, args, code, want, r)
		}
		return r.stdout
	}

	// Cluster 1 from a file, cluster 2 from standard input, held by an
	// -append line, its queue statement given by -queue.
	if err := os.WriteFile(filepath.Join(jobs, "sleep.sub"), []byte("executable = /bin/sleep\narguments = 600\nlog = sleep.log\nqueue 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(0, "Submitting job(s)..\n2 job(s) submitted to cluster 1.\n", "", "condor_submit", "sleep.sub")
	expect(0, "2.0 - 2.2\n", "executable = /bin/echo\narguments = job $(Process)\noutput = echo.$(Process)\nlog = echo.log\n",
		"condor_submit", "-terse", "-batch-name", "nightly", "-append", "hold = true", "-", "-queue", "3")
	expect(0, "2.0 nightly 5\n2.1 nightly 5\n2.2 nightly 5\n", "", "condor_q", "-af:j", "JobBatchName", "JobStatus", "-constraint", "ClusterId == 2")
	expect(0, "1.0\n1.1\n", "", "condor_q", "-format", "%d.", "ClusterId", "-format", `%d\n`, "ProcId", "1")
	if out := expect(0, "", "", "condor_q", "-totals", "1"); !strings.Contains(out, "Total for query: 2 jobs;") || strings.Contains(out, "OWNER") {
		t.Errorf("condor_q -totals 1:\n%s", out)
	}

	// Cluster 2 released runs to its end; condor_wait reads its log.
	expect(0, "All jobs in cluster 2 have been released\n", "", "condor_release", "2")
	if r := run("", "condor_wait", "-wait", "90", "echo.log", "2"); r.code != 0 || r.stdout != "All jobs done.\n" {
		log, _ := os.ReadFile(filepath.Join(jobs, "echo.log"))
		t.Fatalf("condor_wait echo.log 2: %s\n--- echo.log\n%s\n--- queue\n%s", r, log, run("", "condor_q", "-nobatch"))
	}
	for i, want := range []string{"job 0\n", "job 1\n", "job 2\n"} {
		if b, _ := os.ReadFile(filepath.Join(jobs, "echo."+string(rune('0'+i)))); string(b) != want {
			t.Errorf("echo.%d = %q, want %q", i, b, want)
		}
	}
	eventually(t, 30*time.Second, func() error {
		if r := run("", "condor_history", "-af", "ClusterId", "ProcId", "ExitCode", "-constraint", "ClusterId == 2"); r.code != 0 || len(strings.Fields(r.stdout)) != 9 {
			return fmt.Errorf("condor_history: %s", r)
		}
		return nil
	})

	// Cluster 1 runs; hold, release, and a wait that runs out.
	eventually(t, 60*time.Second, func() error {
		if r := run("", "condor_q", "1", "-af", "JobStatus"); r.stdout != "2\n2\n" {
			return fmt.Errorf("cluster 1 not running: %s", r)
		}
		return nil
	})
	expect(0, "Job 1.0 held\n", "", "condor_hold", "-reason", "testing the names", "1.0")
	expect(0, "5 testing the names (by user root)\n", "", "condor_q", "1.0", "-af", "JobStatus", "HoldReason")
	expect(0, "Job 1.0 released\n", "", "condor_release", "1.0")
	expect(1, "Time expired.\n", "", "condor_wait", "-wait", "1", "sleep.log", "1")
	expect(0, "All jobs in cluster 1 have been marked for removal\n", "", "condor_rm", "1")
	expect(0, "All jobs done.\n", "", "condor_wait", "-wait", "60", "sleep.log")

	if out := expect(0, "", "", "condor_status", "-af", "Name"); !regexp.MustCompile(`(?m)^slot1@`).MatchString(out) {
		t.Errorf("condor_status -af Name:\n%s", out)
	}
	if out := expect(0, "", "", "condor_status", "-totals"); !regexp.MustCompile(`(?m)^\s+Total\s+4\s`).MatchString(out) || strings.Contains(out, "slot1@") {
		t.Errorf("condor_status -totals:\n%s", out)
	}

	// An option pond's tools do not implement is an error naming it.
	for _, c := range [][]string{{"condor_q", "-global"}, {"condor_submit", "-spool", "sleep.sub"}, {"condor_rm", "-forcex", "1"}} {
		if r := run("", c[0], c[1:]...); r.code != 1 || !strings.Contains(r.stderr, c[1]) {
			t.Errorf("%s: want exit 1 naming the option, got %s", c, r)
		}
	}
}
