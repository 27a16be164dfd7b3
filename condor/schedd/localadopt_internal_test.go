package schedd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/startd/jobshim"
)

// TestOwnLocalSupervisor checks which processes a schedd started again
// takes for a local job's supervisor: only one of its own user, started
// as the supervisor of that job (or, by an earlier build, holding that
// job's status file open), never another job's, another program or
// another user's process, whatever pid the job's ad names.
func TestOwnLocalSupervisor(t *testing.T) {
	t.Parallel()
	// A directory every user may read: another user's process reads the
	// script too.
	dir, err := os.MkdirTemp("", "pond-adopt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mine, other := filepath.Join(dir, "4.0.status"), filepath.Join(dir, "5.0.status")
	// Each status path is also a script for sh, started under the
	// supervisor's name with the path as its argument, as runLocal starts
	// the supervisor: it waits for a sleep in the background (a sleep as
	// the script's last command, sh would exec in its place).
	for _, p := range []string{mine, other} {
		if err := os.WriteFile(p, []byte("sleep 30 &\nwait\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := func(t *testing.T, args []string, attr *syscall.SysProcAttr, extra ...*os.File) int {
		t.Helper()
		cmd := exec.Command("/bin/sh")
		cmd.Args = args
		cmd.SysProcAttr = attr
		cmd.ExtraFiles = extra
		if len(args) == 1 {
			// sh reads its script from standard input: a pipe that
			// stays open until the test ends.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close(); r.Close() })
			cmd.Stdin = r
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		// Settled: sh waits (for its sleep, or on its standard input),
		// as a supervisor waits for its job.
		pid := cmd.Process.Pid
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			if i := bytes.LastIndexByte(b, ')'); i > 0 && bytes.HasPrefix(b[i:], []byte(") S")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d never waits: %s", pid, b)
			}
		}
		return pid
	}
	statusFile, err := os.Open(mine)
	if err != nil {
		t.Fatal(err)
	}
	defer statusFile.Close()
	cases := []struct {
		name  string
		args  []string
		attr  *syscall.SysProcAttr
		extra []*os.File
		want  bool
	}{
		{"the job's supervisor", []string{jobshim.Name, mine}, nil, nil, true},
		{"another job's supervisor", []string{jobshim.Name, other}, nil, nil, false},
		{"another program", []string{"sh", mine}, nil, nil, false},
		{"an earlier build's supervisor of the job", []string{jobshim.Name}, nil, []*os.File{statusFile, statusFile}, true}, // descriptors 3 and 4
		{"an earlier build's supervisor of no job", []string{jobshim.Name}, nil, nil, false},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name  string
			args  []string
			attr  *syscall.SysProcAttr
			extra []*os.File
			want  bool
		}{"another user's process under the supervisor's name", []string{jobshim.Name, mine},
			&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}, nil, false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pid := start(t, c.args, c.attr, c.extra...)
			if got := ownLocalSupervisor(pid, mine); got != c.want {
				t.Errorf("ownLocalSupervisor(%d) = %v, want %v", pid, got, c.want)
			}
		})
	}
	if ownLocalSupervisor(1<<22+12345, mine) {
		t.Error("a pid with no process is taken for the supervisor")
	}
}
