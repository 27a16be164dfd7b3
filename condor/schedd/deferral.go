package schedd

import (
	"container/heap"
	"context"
	"math"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// HoldCodeMissedDeferral is HTCondor's HoldReasonCode of a job that could
// not start within its deferral_window of its deferral_time.
const HoldCodeMissedDeferral = 20

// missedDeferralReason is the HoldReason HTCondor gives such a job.
const missedDeferralReason = "Job missed deferred execution time"

// defaultDeferralPrepTime is how many seconds before its DeferralTime a job
// without a DeferralPrepTime is offered for matching, HTCondor's default.
const defaultDeferralPrepTime = 300

// deferrals are the idle jobs whose time to be offered for matching
// (DeferralTime less DeferralPrepTime) is still to come: a heap by that
// time and one timer for the earliest, so that many deferred jobs cost no
// timer each; guarded by Schedd.mu.
type deferrals struct {
	h     deferHeap
	at    map[jobqueue.JobID]int64 // the time each job waits for
	timer *time.Timer
}

type deferEntry struct {
	at int64
	id jobqueue.JobID
}

type deferHeap []deferEntry

func (h deferHeap) Len() int { return len(h) }
func (h deferHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return less(h[i].id, h[j].id)
}
func (h deferHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deferHeap) Push(x any)   { *h = append(*h, x.(deferEntry)) }
func (h *deferHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// dueKey marks the context of a job filed because its deferral time came.
type dueKey struct{}

// deferralOf is a job's DeferralTime, DeferralWindow and DeferralPrepTime,
// in seconds since the epoch and seconds; ok is false for a job without a
// deferral time. A job without a DeferralPrepTime (or with a negative or
// non-numeric one) has HTCondor's default, 300 s.
func deferralOf(ad *classad.Ad) (at, window, prep int64, ok bool) {
	if _, has := ad.Lookup("DeferralTime"); !has {
		return 0, 0, 0, false
	}
	t := ad.EvalNumber("DeferralTime", nil, math.NaN())
	if math.IsNaN(t) || t <= 0 || t > math.MaxInt32*4 {
		return 0, 0, 0, false
	}
	w := ad.EvalNumber("DeferralWindow", nil, 0)
	if math.IsNaN(w) || w < 0 {
		w = 0
	}
	p := ad.EvalNumber("DeferralPrepTime", nil, defaultDeferralPrepTime)
	if math.IsNaN(p) || p < 0 {
		p = defaultDeferralPrepTime
	}
	return int64(t), int64(min(w, math.MaxInt32)), int64(min(p, math.MaxInt32)), true
}

// deferStart reports whether idle job id must not be offered to the
// negotiator yet: its deferral_time less its deferral_prep_time is still to
// come (it is filed then, matched and its slot claimed early, and the
// startd waits on the claimed slot until the deferral time to start it),
// or its deferral_time has passed by more than its deferral_window before the
// schedd could offer the job, which is then held, as HTCondor holds a job
// that missed its deferred execution time. A job already filed, or filed
// because its time came, goes on. s.mu not held.
func (s *Schedd) deferStart(ctx context.Context, id jobqueue.JobID, ad *classad.Ad) bool {
	at, window, prep, ok := deferralOf(ad)
	if !ok {
		return false
	}
	if ctx.Value(dueKey{}) != nil {
		// Its time came (a DeferralTime such as time() + 60 is
		// evaluated once, when the job is first filed).
		return false
	}
	now := s.now().Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle.get(id) != nil {
		return false
	}
	if now < at-prep {
		s.deferUntilLocked(id, at-prep)
		return true
	}
	if now <= at+window {
		return false
	}
	go func() {
		hctx, cancel := context.WithTimeout(s.done, 60*time.Second)
		defer cancel()
		s.hold(hctx, id, ad, missedDeferralReason, HoldCodeMissedDeferral, 0)
	}()
	return true
}

// deferUntilLocked has job id filed at time at; s.mu held.
func (s *Schedd) deferUntilLocked(id jobqueue.JobID, at int64) {
	d := &s.deferred
	if d.at == nil {
		d.at = map[jobqueue.JobID]int64{}
	}
	if d.at[id] == at {
		return
	}
	d.at[id] = at
	heap.Push(&d.h, deferEntry{at: at, id: id})
	if d.h[0].id == id && d.h[0].at == at {
		s.armDeferralLocked()
	}
}

// armDeferralLocked sets the timer for the earliest deferral; s.mu held.
func (s *Schedd) armDeferralLocked() {
	d := &s.deferred
	if len(d.h) == 0 {
		return
	}
	wait := time.Until(time.Unix(d.h[0].at, 0))
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, s.deferralsDue)
		return
	}
	d.timer.Reset(wait)
}

// deferralsDue files the jobs whose time to be offered for matching came.
func (s *Schedd) deferralsDue() {
	now := s.now().Unix()
	var due []jobqueue.JobID
	s.mu.Lock()
	d := &s.deferred
	for len(d.h) > 0 && d.h[0].at <= now {
		e := heap.Pop(&d.h).(deferEntry)
		if d.at[e.id] == e.at {
			delete(d.at, e.id)
			due = append(due, e.id)
		}
	}
	if len(d.h) > 0 {
		s.armDeferralLocked()
	}
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithValue(s.done, dueKey{}, true), 60*time.Second)
	defer cancel()
	for _, id := range due {
		s.addIdle(ctx, id)
	}
}
