package local

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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/state"
)

// The test binary re-executes itself as a helper process for the
// multi-process tests; the helper's role is in this variable.
const helperEnv = "POND_STATE_LOCAL_HELPER"

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(helper(role, os.Getenv("POND_STATE_PATH")))
	}
	os.Exit(m.Run())
}

// helper runs one role of a child process and returns its exit code.
func helper(role, path string) int {
	ctx := context.Background()
	b := New(path)
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
		n, _ := strconv.Atoi(os.Getenv("POND_STATE_N"))
		for range n {
			if err := increment(ctx, b); err != nil {
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
			s.SetInstance(addr, "provider.local", &state.Instance{Attributes: bigAttributes(i)})
			if err := b.Write(ctx, s); err != nil {
				fmt.Println("error:", err)
				return 1
			}
			if i == 0 {
				fmt.Println("writing")
			}
		}
	}
	fmt.Println("unknown role", role)
	return 2
}

func bigAttributes(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":"w%d","pad":%q}`, i, strings.Repeat("x", 2000)))
}

// increment adds one to the counter output under the lock.
func increment(ctx context.Context, b *Backend) error {
	id, err := state.LockWait(ctx, b, state.NewLockInfo("increment", "test"), time.Minute)
	if err != nil {
		return err
	}
	defer b.Unlock(ctx, id)
	s, err := b.Read(ctx)
	if err != nil {
		return err
	}
	if s == nil {
		s = state.New()
	}
	n := 0
	if o := s.Outputs["counter"]; o != nil {
		if err := json.Unmarshal(o.Value, &n); err != nil {
			return err
		}
	}
	s.Outputs["counter"] = &state.Output{Value: json.RawMessage(strconv.Itoa(n + 1)), Type: json.RawMessage(`"number"`)}
	return b.Write(ctx, s)
}

func counter(t *testing.T, b *Backend) int {
	t.Helper()
	s, err := b.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := json.Unmarshal(s.Outputs["counter"].Value, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// child starts the test binary in a helper role.
func child(t *testing.T, role, path string, env ...string) (*exec.Cmd, *bufio.Reader, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+role, "POND_STATE_PATH="+path)...)
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
	release := func() {
		once.Do(func() {
			stdin.Close()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		release()
	})
	return cmd, bufio.NewReader(stdout), release
}

func readLine(t *testing.T, r *bufio.Reader, prefix string) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the helper's output: %v (got %q)", err, line)
	}
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, prefix) {
		t.Fatalf("helper said %q, want %q...", line, prefix)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

func newState(t *testing.T, outputs map[string]string) *state.State {
	t.Helper()
	s := state.New()
	for k, v := range outputs {
		s.Outputs[k] = &state.Output{Value: json.RawMessage(v), Type: json.RawMessage(`"string"`)}
	}
	return s
}

func TestReadMissing(t *testing.T) {
	b := New(filepath.Join(t.TempDir(), "pond.state"))
	s, err := b.Read(context.Background())
	if s != nil || err != nil {
		t.Fatalf("Read = %v, %v; want nil, nil", s, err)
	}
}

func TestDefaultPath(t *testing.T) {
	if p := New("").Path(); p != DefaultPath {
		t.Fatalf("New(\"\").Path() = %q, want %q", p, DefaultPath)
	}
}

func TestWriteSerialAndBackup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := New(filepath.Join(dir, "pond.state"))

	s := newState(t, map[string]string{"a": `"1"`})
	if err := b.Write(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.Serial != 1 {
		t.Fatalf("serial after first write = %d, want 1", s.Serial)
	}
	if _, err := os.Stat(b.BackupPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup after the first write: %v, want none", err)
	}
	first, _ := os.ReadFile(b.Path())
	if !bytes.HasSuffix(first, []byte("}\n")) {
		t.Fatalf("state file does not end with a newline:\n%s", first)
	}

	// The same content is not written again.
	again := s.DeepCopy()
	again.Serial = 0
	if err := b.Write(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again.Serial != 1 {
		t.Fatalf("serial after an unchanged write = %d, want 1", again.Serial)
	}
	if _, err := os.Stat(b.BackupPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unchanged write made a backup")
	}

	// A change bumps the serial and keeps the previous document.
	s.Outputs["a"].Value = json.RawMessage(`"2"`)
	if err := b.Write(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.Serial != 2 {
		t.Fatalf("serial after a change = %d, want 2", s.Serial)
	}
	backup, err := os.ReadFile(b.BackupPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(backup, first) {
		t.Fatalf("backup = %s, want the first document %s", backup, first)
	}
	got, err := b.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Serial != 2 || got.Lineage != s.Lineage || string(got.Outputs["a"].Value) != `"2"` {
		t.Fatalf("Read = %+v", got)
	}

	// Another change: the backup is now the second document.
	second, _ := os.ReadFile(b.Path())
	s.Outputs["b"] = &state.Output{Value: json.RawMessage(`3`)}
	if err := b.Write(ctx, s); err != nil {
		t.Fatal(err)
	}
	backup, _ = os.ReadFile(b.BackupPath())
	if !bytes.Equal(backup, second) {
		t.Fatalf("backup after the third write is not the second document")
	}
	if s.Serial != 3 {
		t.Fatalf("serial = %d, want 3", s.Serial)
	}
	if info, _ := os.Stat(b.Path()); info.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v, want 0600", info.Mode().Perm())
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

func TestBadDocumentsRefusedAndUntouched(t *testing.T) {
	good, err := state.Encode(newState(t, map[string]string{"a": `"1"`}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		doc  []byte
		want string
	}{
		{"truncated", good[:len(good)/2], "truncated state document"},
		{"corrupt", bytes.Replace(good, []byte(`"serial"`), []byte(`"serial" x`), 1), "corrupt state document"},
		{"newer", bytes.Replace(good, []byte(`"format_version": 1`), []byte(`"format_version": 2`), 1), "state was written by a newer pond (format 2); this pond reads format 1"},
		{"empty", nil, "state document is empty"},
		{"missing lineage", []byte(`{"format_version": 1, "serial": 1}`), `missing "lineage"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			b := New(filepath.Join(t.TempDir(), "pond.state"))
			if err := os.WriteFile(b.Path(), tt.doc, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := b.Read(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), b.Path()) {
				t.Fatalf("Read error = %v, want one naming %s and containing %q", err, b.Path(), tt.want)
			}
			err = b.Write(ctx, newState(t, map[string]string{"b": `"2"`}))
			if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Write error = %v, want a refusal containing %q", err, tt.want)
			}
			after, _ := os.ReadFile(b.Path())
			if !bytes.Equal(after, tt.doc) {
				t.Fatalf("the document was changed:\n%s", after)
			}
			if _, err := os.Stat(b.BackupPath()); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("a backup was written")
			}
		})
	}
}

func TestLockUnlock(t *testing.T) {
	ctx := context.Background()
	b := New(filepath.Join(t.TempDir(), "pond.state"))
	info := state.NewLockInfo("apply", "v1")
	id, err := b.Lock(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if id != info.ID {
		t.Fatalf("Lock id = %s, want %s", id, info.ID)
	}
	data, err := os.ReadFile(b.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	var stored state.LockInfo
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.ID != id || stored.Operation != "apply" || stored.Path != b.Path() || stored.PID != os.Getpid() ||
		stored.Version != "v1" || !strings.Contains(stored.Who, "@") || stored.Created.IsZero() {
		t.Fatalf("lock info = %+v", stored)
	}

	_, err = b.Lock(ctx, state.NewLockInfo("plan", "v1"))
	var le *state.LockError
	if !errors.As(err, &le) || !errors.Is(err, state.ErrLocked) {
		t.Fatalf("second Lock error = %v, want a *state.LockError", err)
	}
	if le.Info == nil || le.Info.ID != id || le.HolderGone {
		t.Fatalf("LockError = %+v", le)
	}
	if !strings.Contains(err.Error(), "operation apply") || !strings.Contains(err.Error(), id) {
		t.Fatalf("LockError message %q lacks the holder", err)
	}

	tests := []struct {
		name string
		op   func(context.Context, string) error
		id   string
		want string
	}{
		{"unlock wrong id", b.Unlock, "nope", `unlock: lock ID "nope" does not match the lock held by`},
		{"force-unlock wrong id", b.ForceUnlock, "nope", `force-unlock: lock ID "nope" does not match`},
	}
	for _, tt := range tests {
		if err := tt.op(ctx, tt.id); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want %q", tt.name, err, tt.want)
		}
	}
	if err := b.Unlock(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx, id); err == nil || !strings.Contains(err.Error(), "not locked") {
		t.Fatalf("second Unlock error = %v, want not locked", err)
	}
	if _, err := b.Lock(ctx, state.LockInfo{Operation: "plan"}); err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
}

func TestUnreadableLockFile(t *testing.T) {
	ctx := context.Background()
	b := New(filepath.Join(t.TempDir(), "pond.state"))
	for _, content := range []string{"", "{not json"} {
		if err := os.WriteFile(b.LockPath(), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := b.Lock(ctx, state.NewLockInfo("apply", ""))
		var le *state.LockError
		if !errors.As(err, &le) || !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), "delete it") {
			t.Fatalf("Lock with lock file %q: %v", content, err)
		}
	}
}

func TestLockContentionGoroutines(t *testing.T) {
	ctx := context.Background()
	b := New(filepath.Join(t.TempDir(), "pond.state"))
	const workers, each = 4, 5
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id, err := state.LockWait(ctx, b, state.NewLockInfo("apply", ""), time.Minute)
				if err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				if n > maxInside.Load() {
					maxInside.Store(n)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := b.Unlock(ctx, id); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m := maxInside.Load(); m != 1 {
		t.Fatalf("%d holders at once", m)
	}
}

func TestLockedIncrementsGoroutines(t *testing.T) {
	ctx := context.Background()
	b := New(filepath.Join(t.TempDir(), "pond.state"))
	const workers, each = 3, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := increment(ctx, b); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := counter(t, b); n != workers*each {
		t.Fatalf("counter = %d, want %d: updates were lost", n, workers*each)
	}
}

func TestLockContentionProcesses(t *testing.T) {
	ctx := context.Background()
	b := New(filepath.Join(t.TempDir(), "pond.state"))
	cmd, out, release := child(t, "hold", b.Path())
	id := readLine(t, out, "locked")

	_, err := b.Lock(ctx, state.NewLockInfo("plan", ""))
	var le *state.LockError
	if !errors.As(err, &le) {
		t.Fatalf("Lock while a process holds it: %v", err)
	}
	if le.Info.ID != id || le.Info.PID != cmd.Process.Pid || le.HolderGone {
		t.Fatalf("LockError = %+v (holder pid %d)", le.Info, cmd.Process.Pid)
	}
	if strings.Contains(err.Error(), "force-unlock") {
		t.Fatalf("a live holder's lock error suggests force-unlock: %v", err)
	}
	// A short wait times out with the holder in the error.
	_, err = state.LockWait(ctx, b, state.NewLockInfo("plan", ""), 200*time.Millisecond)
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("LockWait error = %v, want a timeout wrapping the LockError", err)
	}
	// A long wait succeeds once the holder lets go.
	go func() {
		time.Sleep(100 * time.Millisecond)
		release()
	}()
	got, err := state.LockWait(ctx, b, state.NewLockInfo("plan", ""), 30*time.Second)
	if err != nil {
		t.Fatalf("LockWait after release: %v", err)
	}
	if err := b.Unlock(ctx, got); err != nil {
		t.Fatal(err)
	}
}

func TestLockedIncrementsProcesses(t *testing.T) {
	b := New(filepath.Join(t.TempDir(), "pond.state"))
	const procs, each = 3, 5
	var releases []func()
	for range procs {
		_, _, release := child(t, "increment", b.Path(), "POND_STATE_N="+strconv.Itoa(each))
		releases = append(releases, release)
	}
	for _, r := range releases {
		r()
	}
	if n := counter(t, b); n != procs*each {
		t.Fatalf("counter = %d, want %d: updates were lost", n, procs*each)
	}
}

func TestDeadHolder(t *testing.T) {
	ctx := context.Background()
	b := New(filepath.Join(t.TempDir(), "pond.state"))
	_, out, release := child(t, "die", b.Path())
	id := readLine(t, out, "locked")
	release()

	_, err := b.Lock(ctx, state.NewLockInfo("apply", ""))
	var le *state.LockError
	if !errors.As(err, &le) || !le.HolderGone {
		t.Fatalf("Lock error = %#v, want a LockError with HolderGone", err)
	}
	want := "is no longer running on this host: if no other pondctl is using this state, release the lock with `pondctl force-unlock " + id + "`"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	if err := b.ForceUnlock(ctx, "wrong"); err == nil {
		t.Fatal("ForceUnlock with a wrong id succeeded")
	}
	if err := b.ForceUnlock(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, state.NewLockInfo("apply", "")); err != nil {
		t.Fatalf("Lock after ForceUnlock: %v", err)
	}
}

func TestHolderOnAnotherHost(t *testing.T) {
	info := state.LockInfo{Who: "someone@another-host.invalid", PID: 1 << 30}
	if info.HolderGone() {
		t.Fatal("a holder on another host is taken for dead")
	}
}

// TestKillDuringWrites kills a process writing the state in a loop at random
// times; the state and its backup must always read back whole.
func TestKillDuringWrites(t *testing.T) {
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	ctx := context.Background()
	dir := t.TempDir()
	b := New(filepath.Join(dir, "pond.state"))
	var lastSerial uint64
	for round := range rounds {
		cmd, out, release := child(t, "write-loop", b.Path())
		readLine(t, out, "writing")
		time.Sleep(time.Duration(5+rand.IntN(60)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		release()
		s, err := b.Read(ctx)
		if err != nil {
			t.Fatalf("round %d: Read after kill -9: %v", round, err)
		}
		if s == nil || len(s.Resources) == 0 {
			t.Fatalf("round %d: no state after writes", round)
		}
		if round > 0 && s.Lineage == "" {
			t.Fatalf("round %d: no lineage", round)
		}
		data, err := os.ReadFile(b.BackupPath())
		if err == nil {
			if _, err := state.Decode(data, b.BackupPath()); err != nil {
				t.Fatalf("round %d: backup unreadable: %v", round, err)
			}
		}
		lastSerial = s.Serial
		// Each child starts a new lineage over the previous one: Write
		// accepts that, as a forced push does.
	}
	t.Logf("last serial read back: %d", lastSerial)
}

// BenchmarkWrite10k measures a locked write of a changed 10,000-resource
// state: read and decode the stored document, compare, back it up, encode
// and replace it atomically.
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
