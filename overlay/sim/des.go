package sim

import (
	"container/heap"
	"time"

	"github.com/pond-htc/pond/overlay/tree"
)

// epoch is simulated time zero.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// event is a scheduled call.
type event struct {
	at    time.Duration
	seq   uint64
	fn    func()
	index int // position in the heap, -1 once popped or removed
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *eventHeap) Push(x any) {
	e := x.(*event)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

// loop is a single-threaded discrete-event scheduler. It implements
// tree.Clock on simulated time.
type loop struct {
	now    time.Duration
	seq    uint64
	events eventHeap
}

// Now implements tree.Clock.
func (l *loop) Now() time.Time { return epoch.Add(l.now) }

// AfterFunc implements tree.Clock.
func (l *loop) AfterFunc(d time.Duration, f func()) tree.Timer {
	return timer{l, l.at(l.now+max(d, 0), f)}
}

// at schedules f at simulated time t.
func (l *loop) at(t time.Duration, f func()) *event {
	l.seq++
	e := &event{at: t, seq: l.seq, fn: f}
	heap.Push(&l.events, e)
	return e
}

// run executes events until none is left or stop returns true.
func (l *loop) run(stop func() bool) {
	for len(l.events) > 0 && !stop() {
		e := heap.Pop(&l.events).(*event)
		l.now = e.at
		e.fn()
	}
}

type timer struct {
	l *loop
	e *event
}

// Stop implements tree.Timer.
func (t timer) Stop() bool {
	if t.e.index < 0 {
		return false
	}
	heap.Remove(&t.l.events, t.e.index)
	return true
}
