package glidein

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ParseEndTime reads the end of a glidein's batch job: an RFC 3339 time
// ("2026-11-25T08:00:00Z") or a number of seconds since 1970 (as Slurm's
// SLURM_JOB_END_TIME and the POND_END_TIME knob write it).
func ParseEndTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("want a time such as 2026-11-25T08:00:00Z or a number of seconds since 1970")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		// Beyond year 9999 is no end time but a mistake.
		if n <= 0 || n > 253402300799 {
			return time.Time{}, errors.New("want a number of seconds since 1970 between 1 and 253402300799")
		}
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("want a time such as 2026-11-25T08:00:00Z (RFC 3339, with its zone) or a number of seconds since 1970")
	}
	if t.Unix() <= 0 {
		return time.Time{}, errors.New("want a time after 1970")
	}
	return t.UTC(), nil
}

// End is when a glidein started at started must be gone: started plus
// lifetime, or endTime, whichever is sooner (zero values: none), and why:
// ReasonLifetime or ReasonEndTime. Both zero: no end.
func End(started time.Time, lifetime time.Duration, endTime time.Time) (time.Time, string) {
	var end time.Time
	reason := ""
	if lifetime > 0 {
		end, reason = started.Add(lifetime), ReasonLifetime
	}
	if !endTime.IsZero() && (end.IsZero() || endTime.Before(end)) {
		end, reason = endTime, ReasonEndTime
	}
	return end, reason
}

// MaxDefaultGrace bounds the default grace (DefaultGrace).
const MaxDefaultGrace = 5 * time.Minute

// DefaultGrace is how long before its end a glidein that lives from
// started to end starts draining, when not told: a tenth of its life, at
// most MaxDefaultGrace.
func DefaultGrace(started, end time.Time) time.Duration {
	if end.IsZero() {
		return 0
	}
	return min(max(end.Sub(started)/10, 0), MaxDefaultGrace)
}

// EndKnob is the daemons' POND_END_TIME for the node's end t: seconds
// since 1970, or "0" for none.
func EndKnob(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.Unix(), 10)
}
