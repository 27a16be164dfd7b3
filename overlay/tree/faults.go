package tree

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/ring"
)

// Faults injects failures into transports for tests: killed nodes send and
// answer nothing, partitioned groups cannot reach each other, and messages
// may be delayed or dropped. One Faults governs many wrapped transports.
// It is safe for concurrent use.
type Faults struct {
	clock Clock

	mu       sync.Mutex
	rng      *rand.Rand
	killed   map[string]bool
	group    map[string]int
	minDelay time.Duration
	maxDelay time.Duration
	drop     float64
}

// NewFaults returns a fault injector drawing from a generator seeded with
// seed and scheduling delays on clock (RealClock if nil).
func NewFaults(seed uint64, clock Clock) *Faults {
	if clock == nil {
		clock = RealClock{}
	}
	return &Faults{clock: clock, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), killed: map[string]bool{}, group: map[string]int{}}
}

// Wrap returns inner as seen by node self under these faults.
func (f *Faults) Wrap(self string, inner Transport) Transport {
	return &faultTransport{f: f, self: self, inner: inner}
}

// Kill silences the named nodes: messages to or from them are lost.
func (f *Faults) Kill(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range names {
		f.killed[n] = true
	}
}

// Revive undoes Kill.
func (f *Faults) Revive(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range names {
		delete(f.killed, n)
	}
}

// Partition splits the named nodes into groups that cannot reach each
// other; nodes in no group form one more group of their own.
func (f *Faults) Partition(groups ...[]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.group = map[string]int{}
	for i, g := range groups {
		for _, n := range g {
			f.group[n] = i + 1
		}
	}
}

// Heal removes every partition.
func (f *Faults) Heal() { f.Partition() }

// SetDelay delays every message (each way) by a uniform draw in [lo, hi].
func (f *Faults) SetDelay(lo, hi time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.minDelay, f.maxDelay = lo, max(lo, hi)
}

// SetDrop loses each request with probability p.
func (f *Faults) SetDrop(p float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop = p
}

// blocked reports whether a message between a and b is lost now.
func (f *Faults) blocked(a, b string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.killed[a] || f.killed[b] || f.group[a] != f.group[b]
}

// draw returns a delay and whether to drop a request.
func (f *Faults) draw() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.minDelay
	if f.maxDelay > f.minDelay {
		d += time.Duration(f.rng.Int64N(int64(f.maxDelay - f.minDelay + 1)))
	}
	return d, f.drop > 0 && f.rng.Float64() < f.drop
}

type faultTransport struct {
	f     *Faults
	self  string
	inner Transport
}

func (t *faultTransport) after(d time.Duration, fn func()) {
	if d <= 0 {
		fn()
		return
	}
	t.f.clock.AfterFunc(d, fn)
}

// Send implements Transport.
func (t *faultTransport) Send(to ring.Member, req *Request, reply func(*Response, error)) {
	d, drop := t.f.draw()
	if drop || t.f.blocked(t.self, to.Name) {
		return
	}
	t.after(d, func() {
		if t.f.blocked(t.self, to.Name) {
			return
		}
		t.inner.Send(to, req, func(resp *Response, err error) {
			if t.f.blocked(t.self, to.Name) {
				return
			}
			if err != nil {
				reply(nil, err)
				return
			}
			back, _ := t.f.draw()
			t.after(back, func() {
				if !t.f.blocked(t.self, to.Name) {
					reply(resp, nil)
				}
			})
		})
	})
}
