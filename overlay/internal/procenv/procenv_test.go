package procenv

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

func start(t *testing.T, entry string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), entry)
	if err := cmd.Start(); err != nil {
		testenv.SkipOrFailf(t, "cannot start sleep: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func TestProcesses(t *testing.T) {
	entry := fmt.Sprintf("PROCENV_TEST=%d-%d", os.Getpid(), time.Now().UnixNano())
	if pids, err := Processes(entry); err != nil || len(pids) != 0 {
		t.Fatalf("before any start: got %v, %v", pids, err)
	}
	a, b := start(t, entry), start(t, entry)
	start(t, entry+"x") // another value: not this entry
	pids, err := Processes(entry)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pids)
	want := []int{a.Process.Pid, b.Process.Pid}
	slices.Sort(want)
	if !slices.Equal(pids, want) {
		t.Fatalf("got %v, want %v", pids, want)
	}

	// b killed and not waited for is a zombie: left out.
	if err := b.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err = Processes(entry)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(pids, []int{a.Process.Pid}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after killing %d: got %v, want only %d", b.Process.Pid, pids, a.Process.Pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
