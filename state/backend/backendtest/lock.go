package backendtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/state"
)

// lock takes the lock through b, failing the test on an error.
func lock(t *testing.T, b state.Backend, info state.LockInfo) string {
	t.Helper()
	id, err := b.Lock(t.Context(), info)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if id == "" {
		t.Fatal("Lock returned an empty lock ID")
	}
	return id
}

// unlock releases the lock through b, failing the test on an error.
func unlock(t *testing.T, b state.Backend, id string) {
	t.Helper()
	if err := b.Unlock(t.Context(), id); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// locked fails unless err reports the state locked, and returns the
// *state.LockError.
func locked(t *testing.T, err error) *state.LockError {
	t.Helper()
	var le *state.LockError
	if !errors.As(err, &le) || !errors.Is(err, state.ErrLocked) {
		t.Fatalf("error = %v, want a *state.LockError wrapping state.ErrLocked", err)
	}
	return le
}

// heldBy fails unless taking the lock through b is refused with holder id,
// and returns the holder's description.
func heldBy(t *testing.T, b state.Backend, id string) *state.LockInfo {
	t.Helper()
	_, err := b.Lock(t.Context(), state.NewLockInfo("plan", ""))
	le := locked(t, err)
	if le.Info == nil || le.Info.ID != id {
		t.Fatalf("lock held by %+v, want lock ID %s", le.Info, id)
	}
	return le.Info
}

// testLock: the lock is taken once; any later attempt, through the same
// backend or another, is refused with the holder's description.
func testLock(t *testing.T, newStore NewStore) {
	st := newStore(t)
	a := st.Open(t)
	info := state.NewLockInfo("apply", "v1.2.3")
	if id := lock(t, a, info); id != info.ID {
		t.Fatalf("Lock returned ID %s, want the given %s", id, info.ID)
	}
	want := info
	want.Path = st.Location()
	for name, b := range map[string]state.Backend{"same backend": a, "another backend": st.Open(t)} {
		_, err := b.Lock(t.Context(), state.NewLockInfo("plan", "v1.2.3"))
		le := locked(t, err)
		if le.Info == nil {
			t.Fatalf("%s: the LockError does not describe the holder", name)
		}
		got := *le.Info
		if !got.Created.Equal(want.Created) {
			t.Errorf("%s: holder created %v, want %v", name, got.Created, want.Created)
		}
		got.Created = want.Created
		if got != want {
			t.Errorf("%s: holder %+v, want %+v", name, got, want)
		}
		if le.HolderGone {
			t.Errorf("%s: a live holder is taken for gone", name)
		}
		msg := err.Error()
		for _, s := range []string{"operation apply", info.ID, info.Who} {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: lock error %q lacks %q", name, msg, s)
			}
		}
		if strings.Contains(msg, "force-unlock") {
			t.Errorf("%s: a live holder's lock error suggests force-unlock: %s", name, msg)
		}
	}
	data, found := st.Get(t, LockObject)
	var stored state.LockInfo
	if !found || json.Unmarshal(data, &stored) != nil || stored.ID != info.ID {
		t.Fatalf("lock object (found %v):\n%s\nwant the holder's LockInfo as JSON", found, data)
	}
}

// testLockFillsInfo: the fields of a LockInfo left empty are filled.
func testLockFillsInfo(t *testing.T, newStore NewStore) {
	st := newStore(t)
	start := time.Now()
	id := lock(t, st.Open(t), state.LockInfo{Operation: "plan"})
	got := heldBy(t, st.Open(t), id)
	if got.Operation != "plan" || got.Who != state.Who() || got.PID != os.Getpid() || got.Path != st.Location() {
		t.Fatalf("holder %+v, want operation plan, who %s, pid %d, path %s", got, state.Who(), os.Getpid(), st.Location())
	}
	if got.Created.Before(start.Add(-time.Second)) || got.Created.After(time.Now().Add(time.Second)) {
		t.Fatalf("holder created at %v, want about %v", got.Created, start)
	}
}

// testUnlock: only the holder's lock ID releases the lock, and only once.
func testUnlock(t *testing.T, newStore NewStore) {
	st := newStore(t)
	a, b := st.Open(t), st.Open(t)
	id := lock(t, a, state.NewLockInfo("apply", ""))
	wrong := []struct {
		name string
		op   func(context.Context, string) error
		id   string
		want string
	}{
		{"unlock, wrong ID", a.Unlock, "nope", `unlock: lock ID "nope" does not match the lock held by`},
		{"unlock, empty ID", a.Unlock, "", `unlock: lock ID "" does not match`},
		{"unlock from another backend, wrong ID", b.Unlock, "nope", `unlock: lock ID "nope" does not match`},
		{"force-unlock, wrong ID", b.ForceUnlock, "nope", `force-unlock: lock ID "nope" does not match the lock held by`},
	}
	for _, tt := range wrong {
		err := tt.op(t.Context(), tt.id)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), id) {
			t.Errorf("%s: error = %v, want %q naming the held lock %s", tt.name, err, tt.want, id)
		}
		heldBy(t, b, id)
	}

	unlock(t, a, id)
	if data, found := st.Get(t, LockObject); found {
		t.Fatalf("lock object left after Unlock:\n%s", data)
	}
	notLocked := []struct {
		name string
		op   func(context.Context, string) error
		want string
	}{
		{"unlock", a.Unlock, "unlock: state " + st.Location() + " is not locked"},
		{"force-unlock", b.ForceUnlock, "force-unlock: state " + st.Location() + " is not locked"},
	}
	for _, tt := range notLocked {
		if err := tt.op(t.Context(), id); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s of a released lock: error = %v, want %q", tt.name, err, tt.want)
		}
	}

	// The lock can be taken again, and released with its ID from another
	// backend.
	id2 := lock(t, a, state.NewLockInfo("apply", ""))
	if id2 == id {
		t.Fatalf("two locks with ID %s", id)
	}
	unlock(t, b, id2)
	unlock(t, a, lock(t, a, state.NewLockInfo("apply", "")))
}

// testForceUnlock: another backend releases a lock with its ID; the first
// holder then cannot release the next holder's lock.
func testForceUnlock(t *testing.T, newStore NewStore) {
	st := newStore(t)
	a, b := st.Open(t), st.Open(t)
	id := lock(t, a, state.NewLockInfo("apply", ""))
	if err := b.ForceUnlock(t.Context(), id); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	id2 := lock(t, b, state.NewLockInfo("apply", ""))
	if err := a.Unlock(t.Context(), id); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("the first holder's Unlock after a force-unlock: %v, want a mismatch", err)
	}
	heldBy(t, a, id2)
	unlock(t, b, id2)
}

// testUnreadableLock: a lock whose description cannot be read still holds
// the state, and says how to clear it.
func testUnreadableLock(t *testing.T, newStore NewStore) {
	for _, tt := range []struct{ name, content string }{
		{"empty", ""},
		{"not JSON", "{not json"},
		{"not an object", "[1, 2]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			b := st.Open(t)
			st.Put(t, LockObject, []byte(tt.content))
			_, err := b.Lock(t.Context(), state.NewLockInfo("apply", ""))
			le := locked(t, err)
			if msg := err.Error(); le.Info != nil || !strings.Contains(msg, "delete it") && !strings.Contains(msg, "taken over") {
				t.Fatalf("Lock error = %v (holder %+v), want one without a holder saying how the lock is cleared", err, le.Info)
			}
			if err := b.Unlock(t.Context(), "any"); err == nil {
				t.Fatal("Unlock of an unreadable lock succeeded")
			}
			if data, _ := st.Get(t, LockObject); !bytes.Equal(data, []byte(tt.content)) {
				t.Fatalf("the lock was changed to %q", data)
			}
		})
	}
}

// testLockWait runs state.LockWait against the backend: it waits for a
// holder in another backend, and gives up after its timeout or when its
// context ends, with the holder in the error.
func testLockWait(t *testing.T, newStore NewStore) {
	tests := []struct {
		name    string
		held    bool
		timeout time.Duration
		release time.Duration // release the held lock after this; 0 never
		cancel  time.Duration // cancel the context after this; 0 never
		want    string        // the error of a timeout; "" for success
	}{
		{name: "free", timeout: time.Minute},
		{name: "free, no wait", timeout: 0},
		{name: "held, no wait", held: true, timeout: 0, want: "state is locked by"},
		{name: "held, times out", held: true, timeout: 300 * time.Millisecond, want: "timed out after 300ms waiting for the state lock: state is locked by"},
		{name: "released while waiting", held: true, timeout: time.Minute, release: 200 * time.Millisecond},
		{name: "cancelled while waiting", held: true, timeout: time.Minute, cancel: 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			holder, waiter := st.Open(t), st.Open(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var held string
			released := make(chan error, 1)
			start := time.Now()
			if tt.held {
				held = lock(t, holder, state.NewLockInfo("apply", ""))
				if tt.release > 0 {
					time.AfterFunc(tt.release, func() { released <- holder.Unlock(context.Background(), held) })
				}
			}
			if tt.cancel > 0 {
				time.AfterFunc(tt.cancel, cancel)
			}
			id, err := state.LockWait(ctx, waiter, state.NewLockInfo("plan", ""), tt.timeout)
			waited := time.Since(start)
			if tt.release > 0 {
				if err := <-released; err != nil {
					t.Fatalf("the holder's Unlock: %v", err)
				}
			}
			switch {
			case tt.cancel > 0:
				// The context may end while the waiter sleeps or while it
				// tries the lock, so the error need not be a LockError.
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("LockWait error = %v, want one wrapping context.Canceled", err)
				}
				heldBy(t, waiter, held)
				return
			case tt.want == "":
				if err != nil {
					t.Fatalf("LockWait: %v", err)
				}
				if waited < tt.release {
					t.Fatalf("LockWait took the lock after %s, before it was released", waited)
				}
				if got := heldBy(t, holder, id); got.Operation != "plan" {
					t.Fatalf("lock held by %+v, want the waiter", got)
				}
				unlock(t, waiter, id)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LockWait error = %v, want %q", err, tt.want)
			}
			if le := locked(t, err); le.Info == nil || le.Info.ID != held {
				t.Fatalf("LockWait error names holder %+v, want lock ID %s", le.Info, held)
			}
			if waited < tt.timeout {
				t.Fatalf("gave up after %s, before the %s timeout", waited, tt.timeout)
			}
			heldBy(t, waiter, held)
		})
	}
}
