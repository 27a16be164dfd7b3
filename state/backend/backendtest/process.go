package backendtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/state"
)

// Environment of a helper process: its role, and the count of the
// "increment" role.
const (
	roleEnv  = "POND_BACKENDTEST_HELPER"
	countEnv = "POND_BACKENDTEST_N"
)

// RunHelper makes the test binary one of the suite's helper processes when
// the suite started it as one: it then opens the store described by the
// environment (see Store.Env) with open, plays its part and exits. In any
// other process it returns at once. Call it first thing in TestMain.
func RunHelper(open func(ctx context.Context) (state.Backend, error)) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	os.Exit(helper(context.Background(), role, open))
}

// helper runs one role and returns the process's exit code. It reports on
// standard output, one line per event.
func helper(ctx context.Context, role string, open func(ctx context.Context) (state.Backend, error)) int {
	b, err := open(ctx)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	switch role {
	case "hold":
		// Take the lock, say so, and hold it until stdin closes.
		id, err := b.Lock(ctx, state.NewLockInfo("apply", "test"))
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("locked", id)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		if err := b.Unlock(ctx, id); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		return 0
	case "die":
		// Take the lock and exit without releasing it.
		id, err := b.Lock(ctx, state.NewLockInfo("apply", "test"))
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("locked", id)
		return 0
	case "increment":
		n, err := strconv.Atoi(os.Getenv(countEnv))
		if err != nil {
			fmt.Println("error:", countEnv+":", err)
			return 1
		}
		for range n {
			if err := increment(ctx, b, nil, nil); err != nil {
				fmt.Println("error:", err)
				return 1
			}
		}
		return 0
	case "write-loop":
		// Write ever larger states until killed.
		s := state.New()
		for i := 0; ; i++ {
			addr := state.Address{Type: "pool", Name: "w", Key: i}
			attrs := fmt.Sprintf(`{"id":"w%d","pad":%q}`, i, strings.Repeat("x", 2000))
			s.SetInstance(addr, "provider.local", &state.Instance{Attributes: json.RawMessage(attrs)})
			if err := b.Write(ctx, s); err != nil {
				fmt.Println("error:", err)
				return 1
			}
			if i == 0 {
				fmt.Println("writing")
			}
		}
	}
	fmt.Println("error: unknown role", role)
	return 2
}

// child is a helper process.
type child struct {
	cmd *exec.Cmd
	out *bufio.Reader
	// release closes the child's stdin and waits for it to exit.
	release func() error
}

// startChild starts the test binary as a helper in role on st.
func startChild(t *testing.T, st Store, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(append(os.Environ(), st.Env()...), env...), roleEnv+"="+role)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var werr error
	c := &child{cmd: cmd, out: bufio.NewReader(stdout)}
	c.release = func() error {
		once.Do(func() {
			stdin.Close()
			werr = cmd.Wait()
		})
		return werr
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = c.release()
	})
	return c
}

// expect reads the child's next line, which must begin with prefix, and
// returns the rest of it.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the helper process's output: %v (got %q); does the backend's TestMain call backendtest.RunHelper?", err, line)
	}
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, prefix) {
		t.Fatalf("helper process said %q, want %q...; does the backend's TestMain call backendtest.RunHelper?", line, prefix)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

// testHolderInAnotherProcess: a lock held by another process is refused
// with that process as the holder, waited for, and taken once released.
func testHolderInAnotherProcess(t *testing.T, newStore NewStore) {
	st := newStore(t)
	b := st.Open(t)
	c := startChild(t, st, "hold")
	id := c.expect(t, "locked")

	_, err := b.Lock(t.Context(), state.NewLockInfo("plan", ""))
	le := locked(t, err)
	if le.Info == nil || le.Info.ID != id || le.Info.PID != c.cmd.Process.Pid || le.HolderGone {
		t.Fatalf("LockError %+v (holder gone %v), want lock ID %s of live process %d", le.Info, le.HolderGone, id, c.cmd.Process.Pid)
	}
	if strings.Contains(err.Error(), "force-unlock") {
		t.Fatalf("a live holder's lock error suggests force-unlock: %v", err)
	}
	// A short wait times out with the holder in the error.
	_, err = state.LockWait(t.Context(), b, state.NewLockInfo("plan", ""), 200*time.Millisecond)
	if le := locked(t, err); !strings.Contains(err.Error(), "timed out after 200ms") || le.Info == nil || le.Info.ID != id {
		t.Fatalf("LockWait error = %v, want a timeout naming lock ID %s", err, id)
	}
	// A long wait succeeds once the holder lets go.
	released := make(chan error, 1)
	time.AfterFunc(100*time.Millisecond, func() { released <- c.release() })
	got, err := state.LockWait(t.Context(), b, state.NewLockInfo("plan", ""), 30*time.Second)
	if err != nil {
		t.Fatalf("LockWait for a released lock: %v", err)
	}
	if err := <-released; err != nil {
		t.Fatalf("the holding process failed: %v", err)
	}
	unlock(t, b, got)
}

// testDeadHolder: a lock left by a process that died is reported as stale,
// with the command that releases it, and ForceUnlock releases it.
func testDeadHolder(t *testing.T, newStore NewStore) {
	st := newStore(t)
	b := st.Open(t)
	c := startChild(t, st, "die")
	id := c.expect(t, "locked")
	if err := c.release(); err != nil {
		t.Fatalf("the locking process failed: %v", err)
	}

	_, err := b.Lock(t.Context(), state.NewLockInfo("apply", ""))
	if le := locked(t, err); !le.HolderGone {
		t.Fatalf("Lock error = %v, want the holder gone", err)
	}
	want := "is no longer running on this host: if no other pondctl is using this state, release the lock with `pondctl force-unlock " + id + "`"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	if err := b.ForceUnlock(t.Context(), "wrong"); err == nil {
		t.Fatal("ForceUnlock with a wrong ID succeeded")
	}
	if err := b.ForceUnlock(t.Context(), id); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	unlock(t, b, lock(t, b, state.NewLockInfo("apply", "")))
}

// testWritersInProcesses: processes increment a counter under the lock; no
// update is lost.
func testWritersInProcesses(t *testing.T, newStore NewStore) {
	st := newStore(t)
	const procs, each = 3, 4
	type run struct {
		cmd *exec.Cmd
		out bytes.Buffer
	}
	runs := make([]*run, procs)
	for i := range runs {
		r := &run{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		r.cmd.Env = append(append(os.Environ(), st.Env()...), roleEnv+"=increment", countEnv+"="+strconv.Itoa(each))
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	for _, r := range runs {
		if err := r.cmd.Wait(); err != nil {
			t.Errorf("helper process: %v\n%s", err, r.out.Bytes())
		}
	}
	if !t.Failed() {
		checkCounter(t, st, procs*each)
	}
}

// testKilledWriter kills a process writing the state in a loop at random
// times: the state and its backup always read back whole.
func testKilledWriter(t *testing.T, newStore NewStore) {
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	st := newStore(t)
	b := st.Open(t)
	for round := range rounds {
		c := startChild(t, st, "write-loop")
		c.expect(t, "writing")
		time.Sleep(time.Duration(5+rand.IntN(60)) * time.Millisecond)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var ee *exec.ExitError
		if err := c.release(); !errors.As(err, &ee) {
			t.Fatalf("round %d: the writing process ended with %v, want killed", round, err)
		}
		s, err := b.Read(t.Context())
		if err != nil {
			t.Fatalf("round %d: Read after the writer was killed: %v", round, err)
		}
		if s == nil || len(s.Resources) == 0 {
			t.Fatalf("round %d: no state after writes", round)
		}
		if data, found := st.Get(t, BackupObject); found {
			if _, err := state.Decode(data, "backup"); err != nil {
				t.Fatalf("round %d: backup unreadable: %v", round, err)
			}
		}
		// Each process starts a new lineage over the previous one, which
		// Write accepts, as a forced push does.
	}
}
