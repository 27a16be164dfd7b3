package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/state"
	"github.com/pond-htc/pond/state/backend/backendtest"
)

// pathEnv tells a helper process of the conformance suite which state
// file to open.
const pathEnv = "POND_STATE_PATH"

func TestMain(m *testing.M) {
	backendtest.RunHelper(func(context.Context) (state.Backend, error) {
		return New(os.Getenv(pathEnv)), nil
	})
	os.Exit(m.Run())
}

// store is a state file in a fresh directory.
type store struct{ path string }

func newStore(t *testing.T) backendtest.Store {
	return store{filepath.Join(t.TempDir(), "pond.state")}
}

func (s store) Open(*testing.T) state.Backend { return New(s.path) }
func (s store) Location() string              { return s.path }
func (s store) Env() []string                 { return []string{pathEnv + "=" + s.path} }

func (s store) file(t *testing.T, obj backendtest.Object) string {
	t.Helper()
	switch obj {
	case backendtest.StateObject:
		return s.path
	case backendtest.BackupObject:
		return s.path + BackupSuffix
	case backendtest.LockObject:
		return s.path + LockSuffix
	}
	t.Fatalf("no file for the %v", obj)
	return ""
}

func (s store) Get(t *testing.T, obj backendtest.Object) ([]byte, bool) {
	t.Helper()
	data, err := os.ReadFile(s.file(t, obj))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return data, true
}

func (s store) Put(t *testing.T, obj backendtest.Object, data []byte) {
	t.Helper()
	if err := os.WriteFile(s.file(t, obj), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, newStore)
}

func newState(t *testing.T, outputs map[string]string) *state.State {
	t.Helper()
	s := state.New()
	for k, v := range outputs {
		s.Outputs[k] = &state.Output{Value: json.RawMessage(v), Type: json.RawMessage(`"string"`)}
	}
	return s
}

func TestDefaultPath(t *testing.T) {
	if p := New("").Path(); p != DefaultPath {
		t.Fatalf("New(\"\").Path() = %q, want %q", p, DefaultPath)
	}
}

// TestFiles checks the files beside the state: the state and its backup
// are private text files, and writes leave no temporary file behind.
func TestFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := New(filepath.Join(dir, "pond.state"))
	s := newState(t, map[string]string{"a": `"1"`})
	for v := range 3 {
		s.Outputs["a"].Value = json.RawMessage(strconv.Quote(strconv.Itoa(v)))
		if err := b.Write(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{b.Path(), b.BackupPath()} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasSuffix(data, []byte("}\n")) {
			t.Errorf("%s does not end with a newline:\n%s", p, data)
		}
		if info, _ := os.Stat(p); info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, info.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestHolderOnAnotherHost(t *testing.T) {
	info := state.LockInfo{Who: "someone@another-host.invalid", PID: 1 << 30}
	if info.HolderGone() {
		t.Fatal("a holder on another host is taken for dead")
	}
}

func TestWriteRemovesStaleTemps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := New(filepath.Join(dir, "my[1].state"))
	old := filepath.Join(dir, ".my[1].state.tmp-123")
	oldBackup := filepath.Join(dir, ".my[1].state.backup.tmp-456")
	fresh := filepath.Join(dir, ".my[1].state.tmp-789")
	other := filepath.Join(dir, ".other.state.tmp-1")
	for _, p := range []string{old, oldBackup, fresh, other} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * StaleTempAge)
	for _, p := range []string{old, oldBackup, other} {
		if err := os.Chtimes(p, long, long); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Write(ctx, newState(t, nil)); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{old: false, oldBackup: false, fresh: true, other: true} {
		_, err := os.Stat(p)
		if exists := err == nil; exists != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(p), exists, want)
		}
	}
}

// BenchmarkWrite10k measures a locked write of a changed 10,000-resource
// state: read and decode the stored document, compare, back it up, encode
// and replace it atomically.
// TestBrokenLockTakenOver checks that a lock file left empty or unreadable
// by a pondctl killed between creating it and writing it is taken over
// once it is older than BrokenLockGrace, and not before: its writer may be
// about to write.
func TestBrokenLockTakenOver(t *testing.T) {
	for _, tt := range []struct {
		name    string
		content string
		age     time.Duration
		taken   bool
	}{
		{"empty, old", "", time.Minute, true},
		{"truncated, old", `{"ID": "x", "Oper`, time.Minute, true},
		{"empty, new", "", 0, false},
		{"empty, within the grace", "", BrokenLockGrace / 2, false},
		{"truncated, new", `{"ID": "x", "Oper`, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			b := New(filepath.Join(dir, "pond.state"))
			if err := os.WriteFile(b.LockPath(), []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			then := time.Now().Add(-tt.age)
			if err := os.Chtimes(b.LockPath(), then, then); err != nil {
				t.Fatal(err)
			}
			id, err := b.Lock(t.Context(), state.NewLockInfo("apply", ""))
			if !tt.taken {
				if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), b.LockPath()) {
					t.Fatalf("Lock = %q, %v; want a lock error naming %s", id, err, b.LockPath())
				}
				if data, _ := os.ReadFile(b.LockPath()); string(data) != tt.content {
					t.Fatalf("the lock file was changed to %q", data)
				}
				return
			}
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			info, err := b.holder()
			if err != nil || info.ID != id {
				t.Fatalf("after the take-over the lock file holds %+v, %v; want lock ID %s", info, err, id)
			}
			if err := b.Unlock(t.Context(), id); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				t.Errorf("left behind: %s", e.Name())
			}
		})
	}
}

func BenchmarkWrite10k(b *testing.B) {
	ctx := context.Background()
	be := New(filepath.Join(b.TempDir(), "pond.state"))
	s := state.New()
	for i := range 10000 {
		s.SetInstance(state.Address{Type: "pool", Name: fmt.Sprintf("r%d", i), Key: i % 4}, "provider.local",
			&state.Instance{Attributes: json.RawMessage(fmt.Sprintf(`{"id":"r%d","nodes":4,"slots":2,"central_manager":"127.0.0.1:9618","members":["a","b","c","d"]}`, i))})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Outputs["n"] = &state.Output{Value: json.RawMessage(strconv.Itoa(i))}
		if err := be.Write(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
}
