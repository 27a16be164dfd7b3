// Package acceptance drives the built pondctl binary end to end: real agent
// processes, real serf, real state files.
package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// pondBin is the pondctl binary under test: $POND_BIN, or one built for the
// test run.
var pondBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if runtime.GOOS != "linux" {
		fmt.Println("acceptance tests need Linux (they read /proc): skipped")
		return 0
	}
	// The AWS tests run in parallel with the others, against moto: its
	// environment is every test's (ec2test.StartMoto).
	for k, v := range ec2test.Env() {
		os.Setenv(k, v)
	}
	pondBin = os.Getenv("POND_BIN")
	if pondBin == "" {
		dir, err := os.MkdirTemp("", "pondctl-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		pondBin = filepath.Join(dir, "pondctl")
		cmd := exec.Command("go", "build", "-o", pondBin, "../cmd/pondctl")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building pondctl:", err)
			return 1
		}
	}
	return m.Run()
}

// workdir is a copy of an example in a temporary directory.
type workdir struct {
	t   testing.TB
	dir string
	env []string
	// netns, when set, is the network namespace pondctl runs in (ip
	// netns exec), with the agents its applies start.
	netns string
	// inherited, when set, are open files pondctl is started with beyond
	// its standard streams, the first as descriptor 3, as a shell or a
	// CI runner may leave them open (nil: closed).
	inherited []*os.File
}

// newWorkdir copies the configuration files of examples/NAME (or, when
// name is empty, nothing) into a fresh directory and arranges for every
// agent started there to be destroyed when the test ends.
func newWorkdir(t testing.TB, name string) *workdir {
	t.Helper()
	w := &workdir{t: t, dir: t.TempDir(), env: append(os.Environ(), "NO_COLOR=1", "POND_BIN="+pondBin)}
	if name != "" {
		src := filepath.Join("..", "examples", name)
		entries, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasPrefix(e.Name(), ".") || strings.Contains(e.Name(), ".state") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			w.write(e.Name(), string(data))
		}
	}
	t.Cleanup(w.cleanup)
	return w
}

func (w *workdir) write(name, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// writeExec is write for a script a job or node runs: the file is made
// executable (0755).
func (w *workdir) writeExec(name, content string) {
	w.t.Helper()
	w.write(name, content)
	if err := os.Chmod(filepath.Join(w.dir, name), 0o755); err != nil {
		w.t.Fatal(err)
	}
}

// applyPool writes hcl as the work directory's main.pond.hcl, applies it
// and returns its output cm, the pool's central manager; the pool is
// destroyed when the test ends.
func (w *workdir) applyPool(hcl string) string {
	w.t.Helper()
	w.write("main.pond.hcl", hcl)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	w.t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	return cm
}

// cleanup destroys what the test left and kills any agent still running
// from the work directory, failing the test if one had to be killed.
func (w *workdir) cleanup() {
	if _, err := os.Stat(filepath.Join(w.dir, "pond.state")); err == nil {
		w.run("destroy", "-auto-approve", "-lock=false")
	}
	if pids := agentPIDs(w.dir); len(pids) > 0 {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		w.t.Errorf("%d agent process(es) outlived the test: %v", len(pids), pids)
	}
}

// result is what one pondctl run did.
type result struct {
	stdout, stderr string
	code           int
	// cpu is the process's user and system CPU time.
	cpu time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

func (w *workdir) run(args ...string) result {
	w.t.Helper()
	return w.runFor(3*time.Minute, args...)
}

// runFor is run with a limit of d instead of 3 minutes, for a command
// whose time grows with its input (a benchmark's DAG of 10,000 nodes).
func (w *workdir) runFor(d time.Duration, args ...string) result {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, pondBin, args...)
	if w.netns != "" {
		cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", w.netns, pondBin}, args...)...)
	}
	cmd.Dir = w.dir
	cmd.Env = w.env
	cmd.ExtraFiles = w.inherited
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("pondctl %s: %v", strings.Join(args, " "), err)
	}
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return result{out.String(), errb.String(), code, cpu}
}

// expect runs pondctl and fails the test unless it exits with code.
func (w *workdir) expect(code int, args ...string) result {
	w.t.Helper()
	r := w.run(args...)
	if r.code != code {
		w.t.Fatalf("pondctl %s: want exit %d, got %s", strings.Join(args, " "), code, r)
	}
	return r
}

// outputs returns the root outputs as pondctl output -json prints them.
func (w *workdir) outputs() map[string]any {
	w.t.Helper()
	r := w.expect(0, "output", "-json")
	var m map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		w.t.Fatalf("output -json: %v\n%s", err, r.stdout)
	}
	out := map[string]any{}
	for k, v := range m {
		out[k] = v.Value
	}
	return out
}

// agentPIDs lists the pondctl agent processes whose command line mentions
// dir.
func agentPIDs(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if len(args) < 2 || filepath.Base(args[0]) != "pondctl" || args[1] != "agent" {
			continue
		}
		if strings.Contains(string(raw), dir) && !isZombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func isZombie(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// eventually retries f until it returns nil or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runAtOnce runs each of tests as a subtest of t, named by its key, all
// at once, and returns when all have ended. The subtests share t's place
// among the tests that run in parallel (-parallel): a subtest that called
// t.Parallel itself would wait behind every test still queued, and the
// longest subtests would run last, at the end of the whole suite.
func runAtOnce(t *testing.T, tests map[string]func(t *testing.T)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		wg.Go(func() { t.Run(name, tests[name]) })
	}
	wg.Wait()
}

// newBenchWorkdir is an empty work directory for a benchmark.
func newBenchWorkdir(b *testing.B) *workdir { return newWorkdir(b, "") }

// output returns a string output of the last apply.
func (w *workdir) output(name string) string {
	w.t.Helper()
	r := w.expect(0, "output", "-raw", name)
	return r.stdout
}

// token is the token the working directory's pondctl presents (see
// auth.FindToken): the tests call agents as the operator does.
func (w *workdir) token() string {
	w.t.Helper()
	env := map[string]string{}
	for _, kv := range w.env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	tok, err := auth.FindToken(func(k string) string { return env[k] }, w.dir)
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// getJSON GETs path from the agent at api as the working directory's
// pondctl would (agentGet), and decodes a 200 answer into out.
func (w *workdir) getJSON(api, path string, out any) error {
	resp, err := w.agentGet(api, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
