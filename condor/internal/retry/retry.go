// Package retry spaces the attempts made again of a periodic update that
// failed, such as a daemon's ads to its collector: soon after a first
// failure, then twice as long each time up to a ceiling, each delay with
// a random share so that many daemons that failed together do not try
// again together.
package retry

import (
	"math/rand/v2"
	"time"
)

// Backoff is the delay before the next attempt after failures in a row.
// Its zero value is not ready; make one with New.
type Backoff struct {
	min, max time.Duration
	next     time.Duration
}

// New returns a Backoff whose first delay is about first and whose
// delays grow to at most ceiling (first when ceiling is smaller).
func New(first, ceiling time.Duration) *Backoff {
	return &Backoff{min: first, max: max(ceiling, first)}
}

// Failed records a failed attempt and returns the delay before the next,
// between three quarters of the current step and the step itself.
func (b *Backoff) Failed() time.Duration {
	if b.next == 0 {
		b.next = b.min
	} else {
		b.next = min(b.next*2, b.max)
	}
	return b.next - time.Duration(rand.Int64N(int64(b.next)/4+1))
}

// Succeeded records an attempt that worked: the next failure waits the
// first delay again.
func (b *Backoff) Succeeded() { b.next = 0 }
