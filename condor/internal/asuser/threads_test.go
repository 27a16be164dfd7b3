package asuser_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/internal/asuser"
)

// TestThreadsKeepAThreadPerAccount checks that Threads serves an account's
// calls one after the other on one thread, with that account's rights
// only: another account gets a thread of its own, whose files are its
// own; calls at once each get a thread with the account's rights; and the
// calling goroutine's thread keeps root's.
func TestThreadsKeepAThreadPerAccount(t *testing.T) {
	a := nobody(t)
	b := &asuser.Account{Name: "other", UID: a.UID - 1, GID: a.GID - 1}
	secret, open := publicDir(t)
	th := asuser.NewThreads(time.Minute)
	t.Cleanup(th.Close)
	made := func(acct *asuser.Account, name string) (tid int) {
		t.Helper()
		p := filepath.Join(open, name)
		err := th.Do(acct, func() error {
			tid = syscall.Gettid()
			if _, err := os.ReadFile(secret); !errors.Is(err, os.ErrPermission) {
				return fmt.Errorf("a root-only file read as %s: %v", acct, err)
			}
			return os.WriteFile(p, nil, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != acct.UID || st.Gid != acct.GID {
			t.Errorf("a file made as %s is owned by %d:%d", acct, st.Uid, st.Gid)
		}
		return tid
	}
	first, second := made(a, "a1"), made(a, "a2")
	if first != second {
		t.Errorf("an account's calls one after the other ran on threads %d and %d, not on the one kept", first, second)
	}
	if other := made(b, "b1"); other == first {
		t.Errorf("another account's call ran on thread %d, the first account's", other)
	}
	if again := made(a, "a3"); again != first {
		t.Errorf("the first account's next call ran on thread %d, not on its kept %d", again, first)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { made(a, fmt.Sprintf("c%d", i)) })
	}
	wg.Wait()
	if _, err := os.ReadFile(secret); err != nil {
		t.Errorf("the caller lost root's rights: %v", err)
	}
}

// TestThreadsEndWhenIdle checks that a kept thread ends, with its
// credentials, once idle for the Threads' idle time, and that Close ends
// those kept.
func TestThreadsEndWhenIdle(t *testing.T) {
	a := nobody(t)
	gone := func(tid int) bool {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
		return errors.Is(err, os.ErrNotExist)
	}
	tidOf := func(th *asuser.Threads) int {
		var tid int
		if err := th.Do(a, func() error { tid = syscall.Gettid(); return nil }); err != nil {
			t.Fatal(err)
		}
		return tid
	}
	waitGone := func(tid int, why string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !gone(tid) {
			if time.Now().After(deadline) {
				t.Fatalf("thread %d is still there %s", tid, why)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	idle := asuser.NewThreads(100 * time.Millisecond)
	defer idle.Close()
	tid := tidOf(idle)
	if gone(tid) {
		t.Fatalf("thread %d ended at once, not kept", tid)
	}
	waitGone(tid, "after its idle time")

	closed := asuser.NewThreads(time.Hour)
	tid = tidOf(closed)
	closed.Close()
	waitGone(tid, "after Close")
	// After Close, calls still run, each on a thread of its own.
	if after := tidOf(closed); after == tid {
		t.Errorf("a call after Close ran on the closed thread %d", tid)
	}
}
