package autoscale

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
)

// Configuration knobs of the policy, read from the agent's configuration
// file. POND_POLICY turns it on; the others bound it.
const (
	// KnobEnable turns the policy on (a boolean: true, yes, 1).
	KnobEnable = "POND_POLICY"
	// KnobMaxMembers bounds the members of all the policy's ponds together.
	KnobMaxMembers = "POND_POLICY_MAX_MEMBERS"
	// KnobMaxPonds bounds how many ponds (one per job group) exist at once.
	KnobMaxPonds = "POND_POLICY_MAX_PONDS"
	// KnobQueryInterval is the least time between two tree queries: the
	// policy's maximum query rate.
	KnobQueryInterval = "POND_POLICY_QUERY_INTERVAL"
	// KnobGrace is how long a pond's jobs must have been gone from the
	// queue before its members are released.
	KnobGrace = "POND_POLICY_GRACE"
	// KnobCheckInterval is how often the queue is examined.
	KnobCheckInterval = "POND_POLICY_CHECK_INTERVAL"
	// KnobMinInterval is the negotiator's NEGOTIATOR_MIN_INTERVAL while a
	// pond exists, so that jobs start as soon as members join.
	KnobMinInterval = "POND_POLICY_NEGOTIATOR_MIN_INTERVAL"
	// KnobRequirements is a ClassAd expression every candidate must also
	// satisfy (which part of the sea to draw from).
	KnobRequirements = "POND_POLICY_REQUIREMENTS"
)

// Config bounds the policy.
type Config struct {
	MaxMembers    int
	MaxPonds      int
	QueryInterval time.Duration
	Grace         time.Duration
	CheckInterval time.Duration
	MinInterval   time.Duration
	Requirements  string
}

// DefaultConfig is the configuration of POND_POLICY = true with no other
// knob set.
func DefaultConfig() Config {
	return Config{
		MaxMembers:    16,
		MaxPonds:      4,
		QueryInterval: 2 * time.Second,
		Grace:         30 * time.Second,
		CheckInterval: time.Second,
		MinInterval:   0,
	}
}

// ParseConfig reads the policy's knobs through get (such as an agent's
// Knob method). enabled reports whether POND_POLICY is true; a knob with a
// bad value is an error naming it.
func ParseConfig(get func(name string) (string, bool)) (enabled bool, cfg Config, err error) {
	cfg = DefaultConfig()
	if v, ok := get(KnobEnable); ok {
		if enabled, err = parseBool(v); err != nil {
			return false, cfg, fmt.Errorf("%s = %q: %w", KnobEnable, v, err)
		}
	}
	ints := []struct {
		knob string
		dst  *int
	}{{KnobMaxMembers, &cfg.MaxMembers}, {KnobMaxPonds, &cfg.MaxPonds}}
	for _, k := range ints {
		v, ok := get(k.knob)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return false, cfg, fmt.Errorf("%s = %q: want a whole number of at least 1", k.knob, v)
		}
		*k.dst = n
	}
	durs := []struct {
		knob string
		dst  *time.Duration
	}{{KnobQueryInterval, &cfg.QueryInterval}, {KnobGrace, &cfg.Grace}, {KnobCheckInterval, &cfg.CheckInterval}, {KnobMinInterval, &cfg.MinInterval}}
	for _, k := range durs {
		v, ok := get(k.knob)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		d, err := ParseDuration(v)
		if err != nil {
			return false, cfg, fmt.Errorf("%s = %q: %w", k.knob, v, err)
		}
		*k.dst = d
	}
	if cfg.CheckInterval <= 0 {
		return false, cfg, fmt.Errorf("%s: must be more than zero", KnobCheckInterval)
	}
	if v, ok := get(KnobRequirements); ok && strings.TrimSpace(v) != "" {
		if _, err := classad.ParseExpr(v); err != nil {
			return false, cfg, fmt.Errorf("%s = %q: %w", KnobRequirements, v, err)
		}
		cfg.Requirements = strings.TrimSpace(v)
	}
	return enabled, cfg, nil
}

// ParseDuration reads a duration as Go writes it ("1.5s", "2m") or as a
// number of seconds, as HTCondor's knobs do ("30"). Negative durations are
// refused.
func ParseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			return 0, fmt.Errorf("want a duration such as 30s or a number of seconds")
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	return d, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "1", "on":
		return true, nil
	case "false", "no", "0", "off", "":
		return false, nil
	}
	return false, fmt.Errorf("want true or false")
}
