package asuser

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Threads runs functions with the rights of accounts, as [Do] does, on
// threads it keeps for a while for each account: starting a thread,
// changing its credentials and ending it costs some 50 µs, and a schedd
// acts as a job's owner several times a job (each event written to the
// job's log, its input files opened). A thread kept for an account serves
// that account only (the same user, group and supplementary groups), one
// function at a time, and ends, with its credentials, once it has been
// idle for the Threads' idle time, or when Close is called. The zero value
// is not usable: use [NewThreads]; a nil *Threads runs each function as
// [Do] does.
type Threads struct {
	idle time.Duration

	mu     sync.Mutex
	free   map[string][]*thread // threads waiting for work, by account
	kept   int                  // len of every free list
	closed bool
}

// thread is a goroutine locked to an operating-system thread that acts as
// an account.
type thread struct {
	key  string
	work chan func() error // closed: end
	done chan error
}

// Bounds of the threads kept waiting for work: for one account, and in
// all. A thread that finds its bound reached when its function returns
// ends at once, as [Do]'s does.
const (
	maxKeptPerAccount = 8
	maxKept           = 32
)

// NewThreads returns Threads whose threads end once idle for idle (at
// least a millisecond).
func NewThreads(idle time.Duration) *Threads {
	return &Threads{idle: max(idle, time.Millisecond), free: map[string][]*thread{}}
}

// key names a's rights: its user, group and supplementary groups.
func (a *Account) key() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(uint64(a.UID), 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(uint64(a.GID), 10))
	for _, g := range a.Groups {
		b.WriteByte(',')
		b.WriteString(strconv.FormatUint(uint64(g), 10))
	}
	return b.String()
}

// Do runs f with the file-system rights of a and returns its error, as
// [Do] does, on a thread kept for a's rights when one is free.
func (t *Threads) Do(a *Account, f func() error) error {
	if a == nil || a.UID == 0 {
		return f()
	}
	if t == nil {
		return Do(a, f)
	}
	key := a.key()
	th := t.take(key)
	if th == nil {
		var err error
		if th, err = t.start(a, key); err != nil {
			return err
		}
	}
	th.work <- f
	err := <-th.done
	t.put(th)
	return err
}

// take returns a thread kept for key, nil when none is free.
func (t *Threads) take(key string) *thread {
	t.mu.Lock()
	defer t.mu.Unlock()
	ths := t.free[key]
	if len(ths) == 0 {
		return nil
	}
	th := ths[len(ths)-1]
	if len(ths) == 1 {
		delete(t.free, key)
	} else {
		t.free[key] = ths[:len(ths)-1]
	}
	t.kept--
	return th
}

// put keeps th for its account's next function, or ends it when the
// bounds are reached or t is closed.
func (t *Threads) put(th *thread) {
	t.mu.Lock()
	if t.closed || t.kept >= maxKept || len(t.free[th.key]) >= maxKeptPerAccount {
		t.mu.Unlock()
		close(th.work)
		return
	}
	t.free[th.key] = append(t.free[th.key], th)
	t.kept++
	t.mu.Unlock()
}

// remove takes th out of the free threads, false when it is not among
// them (a Do took it meanwhile: its work is on the way).
func (t *Threads) remove(th *thread) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ths := t.free[th.key]
	for i, x := range ths {
		if x == th {
			ths = append(ths[:i], ths[i+1:]...)
			if len(ths) == 0 {
				delete(t.free, th.key)
			} else {
				t.free[th.key] = ths
			}
			t.kept--
			return true
		}
	}
	return false
}

// start starts a thread acting as a.
func (t *Threads) start(a *Account, key string) (*thread, error) {
	th := &thread{key: key, work: make(chan func() error), done: make(chan error, 1)}
	started := make(chan error, 1)
	go func() {
		if err := lockAs(a); err != nil {
			started <- err
			return
		}
		started <- nil
		idle := time.NewTimer(t.idle)
		defer idle.Stop()
		for {
			select {
			case f, ok := <-th.work:
				if !ok {
					return
				}
				th.done <- f()
				idle.Reset(t.idle)
			case <-idle.C:
				if t.remove(th) {
					return
				}
				// Taken as the time ran out: its work comes.
				idle.Reset(t.idle)
			}
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return th, nil
}

// Close ends the threads kept waiting for work; those at work end once
// their function returns. Do still works after Close, each thread ending
// after its function, as [Do]'s.
func (t *Threads) Close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.closed = true
	free := t.free
	t.free, t.kept = map[string][]*thread{}, 0
	t.mu.Unlock()
	for _, ths := range free {
		for _, th := range ths {
			close(th.work)
		}
	}
}
