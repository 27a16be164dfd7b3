package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// TestCIExample runs examples/ci/pipeline.sh, as a CI job does, against a
// Slurm cluster on this machine reached through its login node over SSH
// as another user: init, test, plan, apply, a workload on the glideins,
// the artifacts, and the teardown. Each case has a partition of its own;
// after the script, whatever its exit, nothing is left: no Slurm job in
// its partition, no agent of its pool or of its glideins, no glidein's
// directory on the login node.
func TestCIExample(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 3, CPUs: 2, MemoryMB: 4000, Partitions: []string{"ok", "failing", "interrupted", "refused"}})
	ln := slurmtest.StartLogin(t, c)
	defer func() {
		if t.Failed() {
			t.Logf("squeue:\n%s\nthe cluster's logs:\n%s\nsshd:\n%s", c.Run(t, "squeue", "-h", "-t", "all", "-o", "%i %j %u %P %T %r"), c.Logs(), ln.SSH.Log(0))
		}
	}()

	cases := []struct {
		name string
		// env is the case's own environment for the script.
		env []string
		// submit, when set, replaces the example's jobs.sub.
		submit string
		// wantCode is the script's exit, and wantOut what its output says.
		wantCode int
		wantOut  string
		// applied: the pool was up; collected: the workload ran, and its
		// artifacts were collected.
		applied, collected bool
		// interrupt, when set, is a file of the example's directory after
		// whose appearance the script gets a SIGTERM, alone.
		interrupt string
		// jobs is how many jobs ran, and passed how many of them exited 0.
		jobs, passed int
	}{
		{name: "ok", wantCode: 0, wantOut: "20 of 20 jobs exited 0", applied: true, collected: true, jobs: 20, passed: 20},
		{
			// A workload whose second job fails: the script fails, and
			// still tears the pool and its glideins down.
			name: "failing",
			env:  []string{"POND_VAR_glideins=1"},
			submit: `executable              = /bin/sh
arguments               = "-c 'echo job $(Process); exit $(Process)'"
requirements            = IsGlidein =?= true && Site == "ci-burst"
request_memory          = 64
should_transfer_files   = YES
when_to_transfer_output = ON_EXIT
output                  = out/job.$(Process).out
log                     = jobs.log
queue 2
`,
			wantCode: 1, wantOut: "1 of the 2 jobs failed", applied: true, collected: true, jobs: 2, passed: 1,
		},
		{
			// A SIGTERM to the script alone (as timeout(1) sends) while
			// it waits for a long job: it stops the wait, destroys, and
			// exits 143 at once, not when the wait would have ended.
			name: "interrupted",
			env:  []string{"POND_VAR_glideins=1"},
			submit: `executable              = /bin/sleep
arguments               = 300
requirements            = IsGlidein =?= true && Site == "ci-burst"
should_transfer_files   = YES
when_to_transfer_output = ON_EXIT
log                     = jobs.log
queue
`,
			interrupt: "jobs.log",
			wantCode:  143, wantOut: "pipeline: exit 143", applied: true,
		},
		{
			// A partition the cluster does not have: pondctl test's plan
			// fails at the login node, before anything is applied.
			name:     "refused",
			env:      []string{"POND_VAR_partition=nosuch"},
			wantCode: 1, wantOut: "pondctl test failed",
		},
	}
	tests := map[string]func(t *testing.T){}
	for _, tc := range cases {
		tests[tc.name] = func(t *testing.T) {
			dir := copyExample(t, "ci")
			// The pool's agents are destroyed, and checked for, whatever
			// the script did.
			w := &workdir{t: t, dir: dir, env: append(os.Environ(), "NO_COLOR=1", "POND_BIN="+pondBin)}
			t.Cleanup(w.cleanup)
			if tc.submit != "" {
				w.write("jobs.sub", tc.submit)
			}
			part := tc.name
			workDir := filepath.Join(filepath.Dir(ln.WorkDir), tc.name)
			env := append(os.Environ(),
				"PONDCTL="+pondBin,
				"JOBS_TIMEOUT=180",
				"POND_VAR_login_host="+ln.Host,
				fmt.Sprintf("POND_VAR_login_port=%d", ln.Port),
				"POND_VAR_login_user="+ln.User,
				"POND_VAR_private_key_file="+ln.SSH.KeyFile,
				"POND_VAR_known_hosts_file="+ln.SSH.KnownHosts,
				"POND_VAR_partition="+part,
				"POND_VAR_work_dir="+workDir,
				"POND_VAR_pool_address=127.0.0.1",
				"POND_VAR_glidein_bind_address=127.0.0.1",
			)
			env = append(env, tc.env...)

			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "pipeline.sh"))
			cmd.Dir = t.TempDir() // the script works in its own directory
			cmd.Env = env
			cmd.WaitDelay = 10 * time.Second
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			began := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var signalled time.Time
			if tc.interrupt != "" {
				eventually(t, 3*time.Minute, func() error {
					if _, err := os.Stat(filepath.Join(dir, tc.interrupt)); err != nil {
						return err
					}
					return nil
				})
				time.Sleep(time.Second) // into the wait
				signalled = time.Now()
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			t.Logf("pipeline.sh exited %d (%v) in %v", code, err, time.Since(began).Round(time.Second))
			if !signalled.IsZero() {
				if d := time.Since(signalled); d > time.Minute {
					t.Errorf("pipeline.sh ended %v after its SIGTERM", d.Round(time.Second))
				}
			}
			if code != tc.wantCode || !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("pipeline.sh exited %d, want %d saying %q:\n%s", code, tc.wantCode, tc.wantOut, out.String())
			}

			// Nothing is left: no job of the case's partition, no agent,
			// no glidein's directory on the login node, an empty state.
			if jobs := strings.TrimSpace(c.Run(t, "squeue", "-h", "-p", part, "-t", "PD,R,CF,CG", "-o", "%i %j %T")); jobs != "" {
				t.Errorf("after the script, Slurm still has jobs in %s:\n%s", part, jobs)
			}
			if pids := agentPIDs(workDir); len(pids) > 0 {
				t.Errorf("after the script, glidein agents %v still run", pids)
			}
			if pids := agentPIDs(dir); len(pids) > 0 {
				t.Errorf("after the script, the pool's agents %v still run", pids)
			}
			if left, _ := filepath.Glob(filepath.Join(workDir, "pond-*")); len(left) != 0 {
				t.Errorf("after the script, the login node keeps %v", left)
			}
			if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "" {
				t.Errorf("after the script, the state lists:\n%s", r.stdout)
			}

			// The artifacts: every -json stream a line of JSON each, from
			// the format's version on.
			art := filepath.Join(dir, "artifacts")
			streams := []string{"destroy.json"}
			if tc.applied {
				streams = append(streams, "plan.json", "apply.json")
			}
			for _, name := range streams {
				checkJSONLines(t, filepath.Join(art, name))
			}
			checkJUnit(t, filepath.Join(art, "pondtest.xml"), !tc.applied)
			checkDestroyed(t, filepath.Join(art, "destroy.json"), tc.applied)
			if !tc.applied {
				return
			}
			artifacts := []string{"plan-document.json", "outputs.json"}
			if tc.collected {
				artifacts = append(artifacts, "state.json")
			}
			for _, name := range artifacts {
				var v any
				if err := json.Unmarshal(readArtifact(t, filepath.Join(art, name)), &v); err != nil {
					t.Errorf("artifact %s is not JSON: %v", name, err)
				}
			}
			if !strings.Contains(string(readArtifact(t, filepath.Join(art, "plan.txt"))), "to add") {
				t.Errorf("plan.txt is not a plan:\n%s", readArtifact(t, filepath.Join(art, "plan.txt")))
			}
			if !tc.collected {
				return
			}
			var history []map[string]any
			if err := json.Unmarshal(readArtifact(t, filepath.Join(art, "history.json")), &history); err != nil {
				t.Fatalf("history.json: %v", err)
			}
			passed := 0
			for _, j := range history {
				if j["JobStatus"] == 4.0 && j["ExitCode"] == 0.0 {
					passed++
				}
			}
			if len(history) != tc.jobs || passed != tc.passed {
				t.Errorf("history.json: %d jobs, %d exited 0; want %d and %d", len(history), passed, tc.jobs, tc.passed)
			}
			for i := 0; i < tc.jobs; i++ {
				if got := string(readArtifact(t, filepath.Join(art, "out", fmt.Sprintf("job.%d.out", i)))); !strings.Contains(got, fmt.Sprintf("job %d", i)) {
					t.Errorf("out/job.%d.out: %q", i, got)
				}
			}
			if log := string(readArtifact(t, filepath.Join(art, "jobs.log"))); strings.Count(log, "Job terminated") != tc.jobs {
				t.Errorf("jobs.log: %d terminations, want %d:\n%s", strings.Count(log, "Job terminated"), tc.jobs, log)
			}
		}
	}
	runAtOnce(t, tests)
}

// copyExample copies examples/NAME, its subdirectories included, into a
// fresh directory, and returns it.
func copyExample(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "examples", name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func readArtifact(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
	}
	return data
}

// checkJSONLines checks that path is a machine-readable UI stream: one
// JSON object a line, the first the format's version.
func checkJSONLines(t *testing.T, path string) {
	t.Helper()
	data := readArtifact(t, path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("%s:%d is not JSON (%v): %q", filepath.Base(path), i+1, err, line)
			return
		}
		if i == 0 && m["type"] != "version" {
			t.Errorf("%s begins with %q, not the version", filepath.Base(path), line)
		}
	}
}

// checkDestroyed checks destroy.json's summary: a destroy that removed
// something when the pool was applied, nothing when it was not.
func checkDestroyed(t *testing.T, path string, applied bool) {
	t.Helper()
	for _, line := range strings.Split(string(readArtifact(t, path)), "\n") {
		var m struct {
			Type    string `json:"type"`
			Changes struct {
				Remove    int    `json:"remove"`
				Operation string `json:"operation"`
			} `json:"changes"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Type != "change_summary" || m.Changes.Operation != "destroy" {
			continue
		}
		if applied != (m.Changes.Remove > 0) {
			t.Errorf("destroy.json: the destroy removed %d (applied %v):\n%s", m.Changes.Remove, applied, line)
		}
		return
	}
	t.Errorf("destroy.json has no destroy summary:\n%s", readArtifact(t, path))
}

// checkJUnit checks pondctl test's JUnit report: the example's two runs,
// one of them errored when errored.
func checkJUnit(t *testing.T, path string, errored bool) {
	t.Helper()
	var suites struct {
		Suites []struct {
			Cases []struct {
				Name  string    `xml:"name,attr"`
				Error *struct{} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	data := readArtifact(t, path)
	if err := xml.Unmarshal(data, &suites); err != nil {
		t.Errorf("pondtest.xml: %v\n%s", err, data)
		return
	}
	runs, errors := 0, 0
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			runs++
			if c.Error != nil {
				errors++
			}
		}
	}
	if runs != 2 || (errors > 0) != errored {
		t.Errorf("pondtest.xml: %d runs, %d errored (want 2, errored %v):\n%s", runs, errors, errored, data)
	}
}
