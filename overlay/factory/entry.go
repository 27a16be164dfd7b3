package factory

import (
	"github.com/pond-htc/pond/overlay/api"
)

// nextRamp returns the submissions the cycle after one that allowed cur may
// allow, at most top.
func nextRamp(l api.FactoryLimits, cur, top int) int {
	switch l.Ramp {
	case api.RampLinear:
		return min(cur+1, top)
	case api.RampNone:
		return top
	}
	return min(max(1, cur*2), top)
}

// entryBreaker returns the entry's breaker with the defaults filled in.
func entryBreaker(e *api.FactoryEntrySpec) api.FactoryBreaker {
	b := e.Breaker
	if b.Failures == 0 {
		b.Failures = api.DefaultBreakerFailures
	}
	if b.Window == 0 {
		b.Window = api.Duration(api.DefaultBreakerWindow)
	}
	if b.Backoff == 0 {
		b.Backoff = api.Duration(api.DefaultBreakerBackoff)
	}
	return b
}

// perCycle is the most the entry submits in one cycle.
func perCycle(l api.FactoryLimits) int {
	if l.MaxSubmitPerCycle > 0 {
		return l.MaxSubmitPerCycle
	}
	return l.MaxQueued
}
