package asuser_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

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

func TestDoActsWithTheAccountsRights(t *testing.T) {
	a := nobody(t)
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
			err := asuser.Do(a, tt.op)
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
	secret, _ := publicDir(t)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for range 200 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := asuser.Do(a, func() error { _, err := os.ReadFile(secret); return err }); !errors.Is(err, os.ErrPermission) {
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
