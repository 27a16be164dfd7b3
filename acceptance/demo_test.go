package acceptance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoTree lays out, in a fresh directory, what scripts/demo.sh needs of
// the repository: the script itself, examples/local and bin/pondctl,
// which is bin (the binary under test, or a wrapper of it). It returns
// the script's path.
func demoTree(t *testing.T, bin string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{"scripts/demo.sh", "examples/local/main.pond.hcl"} {
		data, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(root, "bin", "pondctl")); err != nil {
		t.Fatal(err)
	}
	// Whatever the script leaves is destroyed, and no agent of its
	// directory outlives the test.
	w := &workdir{t: t, dir: filepath.Join(root, "examples", "local"), env: append(os.Environ(), "NO_COLOR=1", "POND_BIN="+pondBin)}
	t.Cleanup(w.cleanup)
	return filepath.Join(root, "scripts", "demo.sh")
}

// runDemo runs the demo script and returns its output and exit code.
func runDemo(t *testing.T, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running %s: %v", script, err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// startDecoy starts a process of another user's pool as the demo's own
// campus-2 looks to pgrep: `pondctl agent -name campus-2 ...`.
func startDecoy(t *testing.T) *exec.Cmd {
	t.Helper()
	decoy := exec.Command("bash", "-c", `exec -a "pondctl agent -name campus-2 -data-dir /tmp/someone-else/examples/local/.pond" sleep 600`)
	decoy.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { decoy.Process.Kill(); decoy.Wait() })
	// Until bash has exec'd sleep under its new name.
	eventually(t, 5*time.Second, func() error {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(decoy.Process.Pid), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), "-name campus-2") {
			return os.ErrNotExist
		}
		return nil
	})
	return decoy
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil && !isZombie(pid) }

// TestDemo runs `make demo`'s script while another user's agent of the
// same name runs on the machine: the script kills its own campus-2 (the
// process pond recorded), never the other, sees the drift, repairs it,
// destroys the pool and exits 0.
func TestDemo(t *testing.T) {
	decoy := startDecoy(t)
	script := demoTree(t, pondBin)
	out, code := runDemo(t, script)
	if code != 0 {
		t.Fatalf("demo.sh exited %d:\n%s", code, out)
	}
	if !alive(decoy.Process.Pid) {
		t.Fatalf("demo.sh killed another pool's process %d named campus-2:\n%s", decoy.Process.Pid, out)
	}
	for _, want := range []string{"Not running, or no longer in the sea: campus-2", "campus-2 runs again", "agents still running: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo.sh's output lacks %q:\n%s", want, out)
		}
	}
}

// TestDemoFailsWithoutDrift runs the demo with a pondctl whose plan never
// reports changes by its exit code (-detailed-exitcode left out): the
// demo must fail at its drift step, not carry on as if it had been seen.
func TestDemoFailsWithoutDrift(t *testing.T) {
	wrapper := filepath.Join(t.TempDir(), "pondctl")
	// Every command is the real pondctl's; plan only loses the flag that
	// makes its exit code say whether anything changed.
	if err := os.WriteFile(wrapper, []byte(`#!/usr/bin/env bash
args=()
for a in "$@"; do [ "$a" = -detailed-exitcode ] || args+=("$a"); done
exec "`+pondBin+`" "${args[@]}"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	script := demoTree(t, wrapper)
	out, code := runDemo(t, script)
	if code == 0 {
		t.Fatalf("demo.sh exited 0 although its plan did not report the drift:\n%s", out)
	}
	if !strings.Contains(out, "did not see that campus-2 was killed") {
		t.Errorf("demo.sh's failure does not say the drift went unseen:\n%s", out)
	}
}
