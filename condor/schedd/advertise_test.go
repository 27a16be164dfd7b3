package schedd

import (
	"testing"
	"time"
)

// TestAdClockDuty checks the schedd's RecentDaemonCoreDutyCycle: the share
// of the time since the last ad that making it took, 0 before there was
// one, never above 1.
func TestAdClockDuty(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name string
		c    adClock
		now  time.Time
		want float64
	}{
		{"no ad yet", adClock{}, t0, 0},
		{"a tenth", adClock{last: t0, busy: 200 * time.Millisecond}, t0.Add(2 * time.Second), 0.1},
		{"busier than the time since", adClock{last: t0, busy: 5 * time.Second}, t0.Add(time.Second), 1},
		{"a clock gone back", adClock{last: t0, busy: time.Second}, t0.Add(-time.Second), 0},
	} {
		if got := tc.c.duty(tc.now); got != tc.want {
			t.Errorf("%s: duty %v, want %v", tc.name, got, tc.want)
		}
	}
}
