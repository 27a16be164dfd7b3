package batchtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/internal/procenv"
)

// FreePorts returns n TCP ports of 127.0.0.1 that nothing listens on
// (they were free a moment ago), for a test cluster's daemons.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WaitFor asks ok every poll until it says yes, or fails once d passed.
func WaitFor(d, poll time.Duration, ok func() bool) error {
	deadline := time.Now().Add(d)
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(poll)
	}
}

// KillByEnv kills every process whose environment holds the entry kv (a
// test cluster's jobs and the daemons' helpers that outlive them, which
// carry the cluster's configuration in their environment), a few times
// over should one start meanwhile.
func KillByEnv(kv string) {
	for range 3 {
		pids, _ := procenv.Processes(kv)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Executable writes script (its #! line first) to a file of its own in
// a temporary directory of t's, executable, and returns its path: a
// stand-in for pondctl that a test's glideins run.
func Executable(t testing.TB, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Output runs the command that command makes (its context ends after a
// minute) and returns its standard output; it fails t, name (the test
// helper's package) first, when the command fails.
func Output(t testing.TB, name string, command func(context.Context) *exec.Cmd) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := command(ctx)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %s: %v: %s", name, strings.Join(cmd.Args, " "), err, stderr.String())
	}
	return string(out)
}

// Tails is the last n bytes of each of files that is there and not
// empty, each under a line naming it: a test cluster's logs, for a
// test's failure message.
func Tails(files []string, n int) string {
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		if len(data) > n {
			data = data[len(data)-n:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", f, data)
	}
	return b.String()
}
