package state_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/state"
	"github.com/pond-htc/pond/state/backend/local"
)

func TestLockWait(t *testing.T) {
	tests := []struct {
		name    string
		held    bool
		timeout time.Duration
		release time.Duration // release the held lock after this; 0 never
		cancel  time.Duration // cancel the context after this; 0 never
		want    string        // "" for success
	}{
		{name: "free", timeout: 0},
		{name: "held, try once", held: true, timeout: 0, want: "state is locked by"},
		{name: "held, times out", held: true, timeout: 150 * time.Millisecond, want: "timed out after 150ms waiting for the state lock: state is locked by"},
		{name: "released while waiting", held: true, timeout: 20 * time.Second, release: 120 * time.Millisecond},
		{name: "cancelled while waiting", held: true, timeout: 20 * time.Second, cancel: 100 * time.Millisecond, want: "waiting for the state lock: context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b := local.New(filepath.Join(t.TempDir(), "pond.state"))
			if tt.held {
				id, err := b.Lock(ctx, state.NewLockInfo("apply", ""))
				if err != nil {
					t.Fatal(err)
				}
				if tt.release > 0 {
					time.AfterFunc(tt.release, func() { _ = b.Unlock(context.Background(), id) })
				}
			}
			if tt.cancel > 0 {
				time.AfterFunc(tt.cancel, cancel)
			}
			start := time.Now()
			id, err := state.LockWait(ctx, b, state.NewLockInfo("plan", ""), tt.timeout)
			if tt.want == "" {
				if err != nil || id == "" {
					t.Fatalf("LockWait = %q, %v", id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LockWait error = %v, want %q", err, tt.want)
			}
			var le *state.LockError
			if !errors.As(err, &le) || !errors.Is(err, state.ErrLocked) {
				t.Fatalf("LockWait error %v does not wrap the *LockError", err)
			}
			if tt.timeout > 0 && tt.cancel == 0 && time.Since(start) < tt.timeout {
				t.Fatalf("gave up after %s, before the %s timeout", time.Since(start), tt.timeout)
			}
		})
	}
}

func TestLockWaitOtherError(t *testing.T) {
	// A state path in a missing directory: locking fails for another reason,
	// which ends the wait at once.
	b := local.New(filepath.Join(t.TempDir(), "missing", "pond.state"))
	start := time.Now()
	_, err := state.LockWait(context.Background(), b, state.NewLockInfo("plan", ""), time.Minute)
	if err == nil || errors.Is(err, state.ErrLocked) {
		t.Fatalf("LockWait error = %v, want a non-lock error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("LockWait retried a non-lock error for %s", d)
	}
}
