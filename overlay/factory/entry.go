package factory

import (
	"bytes"
	"encoding/json"

	"github.com/pond-htc/pond/overlay/api"
)

// Entry is one place the factory starts glideins: a site and the template
// of the glideins it starts there, with its limits (api.FactoryEntrySpec,
// what PUT /v1/factory/entries/NAME takes).
type Entry = api.FactoryEntrySpec

// SiteConfig names the kind of a site and holds its configuration as the
// site package reads it (api.FactorySite).
type SiteConfig = api.FactorySite

// Template is the glidein an entry starts (api.FactoryTemplate).
type Template = api.FactoryTemplate

// Limits bound an entry's glideins (api.FactoryLimits).
type Limits = api.FactoryLimits

// Breaker is an entry's circuit breaker (api.FactoryBreaker).
type Breaker = api.FactoryBreaker

// Duration is a time.Duration written in JSON as Go's text (api.Duration).
type Duration = api.Duration

// The ramps of Limits.Ramp.
const (
	RampExponential = api.RampExponential
	RampLinear      = api.RampLinear
	RampNone        = api.RampNone
)

// Default breaker.
const (
	DefaultBreakerFailures = api.DefaultBreakerFailures
	DefaultBreakerWindow   = api.DefaultBreakerWindow
	DefaultBreakerBackoff  = api.DefaultBreakerBackoff
)

// nextRamp returns the submissions the cycle after one that allowed cur may
// allow, at most top.
func nextRamp(l Limits, cur, top int) int {
	switch l.Ramp {
	case RampLinear:
		return min(cur+1, top)
	case RampNone:
		return top
	}
	return min(max(1, cur*2), top)
}

// entryBreaker returns the entry's breaker with the defaults filled in.
func entryBreaker(e *Entry) Breaker {
	b := e.Breaker
	if b.Failures == 0 {
		b.Failures = DefaultBreakerFailures
	}
	if b.Window == 0 {
		b.Window = Duration(DefaultBreakerWindow)
	}
	if b.Backoff == 0 {
		b.Backoff = Duration(DefaultBreakerBackoff)
	}
	return b
}

// perCycle is the most the entry submits in one cycle.
func perCycle(l Limits) int {
	if l.MaxSubmitPerCycle > 0 {
		return l.MaxSubmitPerCycle
	}
	return l.MaxQueued
}

// jsonDecoder reads one JSON document, refusing unknown fields.
func jsonDecoder(data []byte) *json.Decoder {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d
}
