package jobqueue

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// waitingWriters counts the goroutines parked waiting for the writer: in
// the queue's write gate, or for database/sql's connection.
func waitingWriters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("[select")) && (bytes.Contains(g, []byte("semaphore.(*Weighted).Acquire")) ||
			bytes.Contains(g, []byte("database/sql.(*DB).conn("))) {
			count++
		}
	}
	return count
}

// TestWritersServedInOrder checks that write transactions waiting for the
// writer get it in the order they asked, and that one whose context ends
// while it waits gives up its turn without running.
func TestWritersServedInOrder(t *testing.T) {
	q := openT(t)
	ctx := context.Background()
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = q.tx(ctx, func(*sql.Tx) error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	const n = 12
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	cctx, cancel := context.WithCancel(ctx)
	for i := range n {
		wctx := ctx
		if i == 5 {
			wctx = cctx
		}
		wg.Go(func() {
			err := q.tx(wctx, func(*sql.Tx) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			})
			if i == 5 {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("writer 5, cancelled while waiting: %v, want context.Canceled", err)
				}
			} else if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
		// The next asks once this one waits.
		deadline := time.Now().Add(30 * time.Second)
		for waitingWriters() < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("writer %d never waited for the writer", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	for waitingWriters() > n-1 {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	want := []int{0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11}
	if !slices.Equal(order, want) {
		t.Errorf("writers ran in the order %v, want %v", order, want)
	}
}
