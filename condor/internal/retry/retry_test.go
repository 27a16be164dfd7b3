package retry

import (
	"testing"
	"time"
)

// TestBackoff checks the delays of failures in a row: each between three
// quarters of its step and the step, the steps doubling from the first
// to the ceiling, and the first again after a success.
func TestBackoff(t *testing.T) {
	cases := []struct {
		name           string
		first, ceiling time.Duration
		steps          []time.Duration
	}{
		{"doubling to the ceiling", 2 * time.Second, 20 * time.Second,
			[]time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second, 20 * time.Second}},
		{"ceiling under the first", 5 * time.Second, time.Second,
			[]time.Duration{5 * time.Second, 5 * time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(c.first, c.ceiling)
			for round := range 2 {
				for i, step := range c.steps {
					d := b.Failed()
					if d > step || d < step*3/4 {
						t.Errorf("round %d, failure %d: delay %s, want within [%s, %s]", round, i+1, d, step*3/4, step)
					}
				}
				b.Succeeded()
			}
		})
	}
}
