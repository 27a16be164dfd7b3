package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/state"
)

// increment adds one to the state's "counter" output under the lock, as a
// pondctl command changes the state: wait for the lock, read, write,
// unlock. during, when not nil, is called while the lock is held, and after
// is called (when not nil) just before it is released.
func increment(ctx context.Context, b state.Backend, during, after func()) (err error) {
	id, err := state.LockWait(ctx, b, state.NewLockInfo("increment", ""), time.Minute)
	if err != nil {
		return err
	}
	if during != nil {
		during()
	}
	defer func() {
		if after != nil {
			after()
		}
		if uerr := b.Unlock(ctx, id); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	s, err := b.Read(ctx)
	if err != nil {
		return err
	}
	if s == nil {
		s = state.New()
	}
	n, err := counterOf(s)
	if err != nil {
		return err
	}
	s.Outputs["counter"] = &state.Output{Value: json.RawMessage(strconv.Itoa(n + 1)), Type: json.RawMessage(`"number"`)}
	return b.Write(ctx, s)
}

// counterOf returns the "counter" output of s, 0 when s is nil or has
// none.
func counterOf(s *state.State) (int, error) {
	if s == nil {
		return 0, nil
	}
	o := s.Outputs["counter"]
	if o == nil {
		return 0, nil
	}
	var n int
	if err := json.Unmarshal(o.Value, &n); err != nil {
		return 0, fmt.Errorf("counter output %s: %w", o.Value, err)
	}
	return n, nil
}

// checkCounter fails unless the stored counter, and the serial, are want:
// every increment was kept.
func checkCounter(t *testing.T, st Store, want int) {
	t.Helper()
	s := read(t, st.Open(t))
	if s == nil {
		t.Fatal("no state stored")
	}
	n, err := counterOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if n != want || s.Serial != uint64(want) {
		t.Fatalf("counter %d at serial %d, want %d at serial %d: updates were lost", n, s.Serial, want, want)
	}
}

// testConcurrentWriters: goroutines, each with its own backend, increment
// a counter under the lock; the lock has one holder at a time and no
// update is lost.
func testConcurrentWriters(t *testing.T, newStore NewStore) {
	st := newStore(t)
	const workers, each = 4, 5
	var inside, most atomic.Int32
	during := func() {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
	}
	after := func() { inside.Add(-1) }
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		b := st.Open(t)
		wg.Go(func() {
			for range each {
				if err := increment(t.Context(), b, during, after); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if m := most.Load(); m != 1 {
		t.Fatalf("%d holders of the lock at once", m)
	}
	checkCounter(t, st, workers*each)
}

// testConcurrentReaders: readers running while a writer replaces the state
// always see one whole document, and never an older one than before.
func testConcurrentReaders(t *testing.T, newStore NewStore) {
	st := newStore(t)
	const readers, writes = 3, 30
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, readers+1)
	for range readers {
		b := st.Open(t)
		wg.Go(func() {
			var last uint64
			for {
				s, err := b.Read(t.Context())
				if err != nil {
					errs <- fmt.Errorf("read during writes: %w", err)
					return
				}
				switch n, err := counterOf(s); {
				case s == nil && last > 0:
					errs <- fmt.Errorf("read found no state after serial %d", last)
					return
				case s == nil:
				case err != nil || uint64(n) != s.Serial || s.Serial < last:
					errs <- fmt.Errorf("read serial %d with counter %d (%v) after serial %d", s.Serial, n, err, last)
					return
				default:
					last = s.Serial
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	w := st.Open(t)
	for range writes {
		if err := increment(t.Context(), w, nil, nil); err != nil {
			errs <- err
			break
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !t.Failed() {
		checkCounter(t, st, writes)
	}
}
