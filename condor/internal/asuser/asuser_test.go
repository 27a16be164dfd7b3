package asuser_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/testenv"
)

// nobody returns the account "nobody"; the test needs root to act as it.
func nobody(t *testing.T) *asuser.Account {
	t.Helper()
	testenv.NeedRoot(t, "acting as another user needs root")
	a, err := asuser.Lookup("nobody")
	if err != nil {
		testenv.SkipOrFailf(t, "no user nobody: %v", err)
	}
	return a
}

// publicDir is a directory every user may search, holding a root-only file
// and a directory every user may write.
func publicDir(t *testing.T) (secret, open string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "asuser")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret = filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	open = filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	return secret, open
}

// doers are the ways to act as an account: Do, a thread a call, and
// Threads, threads kept for an account (closed with the test).
func doers(t *testing.T) []struct {
	name string
	do   func(*asuser.Account, func() error) error
} {
	th := asuser.NewThreads(time.Minute)
	t.Cleanup(th.Close)
	return []struct {
		name string
		do   func(*asuser.Account, func() error) error
	}{{"Do", asuser.Do}, {"Threads", th.Do}}
}

func TestDoActsWithTheAccountsRights(t *testing.T) {
	a := nobody(t)
	for _, d := range doers(t) {
		t.Run(d.name, func(t *testing.T) { testActsWithTheAccountsRights(t, a, d.do) })
	}
}

func testActsWithTheAccountsRights(t *testing.T, a *asuser.Account, do func(*asuser.Account, func() error) error) {
	secret, open := publicDir(t)
	tests := []struct {
		name    string
		op      func() error
		wantErr error
	}{
		{"a root-only file is refused", func() error { _, err := os.ReadFile(secret); return err }, os.ErrPermission},
		{"a root-only file through a link is refused", func() error {
			link := filepath.Join(open, "link")
			if err := os.Symlink(secret, link); err != nil {
				return err
			}
			_, err := os.ReadFile(link)
			return err
		}, os.ErrPermission},
		{"another process's memory map is refused (no capabilities)", func() error { _, err := os.ReadFile("/proc/1/maps"); return err }, os.ErrPermission},
		{"a root-only file cannot be overwritten", func() error { return os.WriteFile(secret, []byte("x"), 0o644) }, os.ErrPermission},
		{"a file is created owned by the account", func() error {
			p := filepath.Join(open, "made")
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				return err
			}
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				return err
			}
			if st.Uid != a.UID || st.Gid != a.GID {
				t.Errorf("file made as %s is owned by %d:%d", a, st.Uid, st.Gid)
			}
			return nil
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := do(a, tt.op)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestDoChangesNoOtherThread runs many Do calls while other goroutines
// keep reading a root-only file: none of them may lose root's rights, and
// none of the Do calls may keep them.
func TestDoChangesNoOtherThread(t *testing.T) {
	a := nobody(t)
	for _, d := range doers(t) {
		t.Run(d.name, func(t *testing.T) { testChangesNoOtherThread(t, a, d.do) })
	}
}

func testChangesNoOtherThread(t *testing.T, a *asuser.Account, do func(*asuser.Account, func() error) error) {
	secret, _ := publicDir(t)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for range 200 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := do(a, func() error { _, err := os.ReadFile(secret); return err }); !errors.Is(err, os.ErrPermission) {
				errs <- errors.New("read as nobody: " + errString(err))
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := os.ReadFile(secret); err != nil {
				errs <- errors.New("read as root: " + err.Error())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := os.ReadFile(secret); err != nil {
		t.Errorf("after: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func TestLookupUnknownUser(t *testing.T) {
	_, err := asuser.Lookup("no-such-user-pond")
	if !errors.Is(err, asuser.ErrNoAccount) || err.Error() != `user "no-such-user-pond" has no account on this machine` {
		t.Fatalf("got %v", err)
	}
}

func TestDoWithoutAccountRunsAsTheProcess(t *testing.T) {
	ran := false
	if err := asuser.Do(nil, func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("ran %v, err %v", ran, err)
	}
}

// TestCache: an account is looked up once while kept, again once its
// time is up; a name with no account, and an error, are asked again each
// time, and a name that lost its account is no longer given; the cache
// is bounded.
func TestCache(t *testing.T) {
	now := time.Unix(1000, 0)
	calls := map[string]int{}
	accounts := map[string]*asuser.Account{"alice": {Name: "alice", UID: 1001, GID: 1001}}
	broken := errors.New("directory service down")
	lookup := func(name string) (*asuser.Account, error) {
		calls[name]++
		if name == "broken" {
			return nil, broken
		}
		if a, ok := accounts[name]; ok {
			return a, nil
		}
		if strings.HasPrefix(name, "user") {
			return &asuser.Account{Name: name}, nil
		}
		return nil, fmt.Errorf("user %q %w", name, asuser.ErrNoAccount)
	}
	c := asuser.NewCache(lookup, time.Minute, func() time.Time { return now })
	steps := []struct {
		name    string
		advance time.Duration
		want    uint32 // the uid; 0 for an error
		calls   int    // lookups of name so far
	}{
		{"alice", 0, 1001, 1},
		{"alice", 30 * time.Second, 1001, 1},
		{"alice", 31 * time.Second, 1001, 2}, // a minute after the first
		{"bob", 0, 0, 1},
		{"bob", 0, 0, 2},
		{"broken", 0, 0, 1},
		{"broken", 0, 0, 2},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		a, err := c.Lookup(s.name)
		switch {
		case s.want == 0 && err == nil:
			t.Errorf("step %d: %s looked up as %+v, want an error", i, s.name, a)
		case s.want != 0 && (err != nil || a.UID != s.want):
			t.Errorf("step %d: %s = %+v, %v; want uid %d", i, s.name, a, err, s.want)
		}
		if calls[s.name] != s.calls {
			t.Errorf("step %d: %d lookups of %s, want %d", i, calls[s.name], s.name, s.calls)
		}
	}
	if _, err := c.Lookup("bob"); !errors.Is(err, asuser.ErrNoAccount) {
		t.Errorf("bob: %v, want ErrNoAccount", err)
	}
	// An account removed: once its time is up it is looked up, not found,
	// and not given again.
	delete(accounts, "alice")
	now = now.Add(time.Minute)
	for range 2 {
		if a, err := c.Lookup("alice"); !errors.Is(err, asuser.ErrNoAccount) {
			t.Errorf("alice removed: %+v, %v; want ErrNoAccount", a, err)
		}
	}
	// Bounded: many names, each looked up once while kept, none kept past
	// the bound (the first ones are looked up again).
	for i := range 10001 {
		if _, err := c.Lookup(fmt.Sprintf("user%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Lookup("user0"); err != nil || calls["user0"] != 2 {
		t.Errorf("user0 looked up %d times (%v), want 2: the cache is not bounded", calls["user0"], err)
	}
	// Reset forgets what is kept; a refresh of 0 keeps nothing.
	c.Reset(0)
	for range 2 {
		if _, err := c.Lookup("user0"); err != nil {
			t.Fatal(err)
		}
	}
	if calls["user0"] != 4 {
		t.Errorf("user0 looked up %d times after Reset(0) and two lookups, want 4", calls["user0"])
	}
}
