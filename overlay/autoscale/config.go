package autoscale

import (
	"time"

	"github.com/pond-htc/pond/overlay/knobs"
)

// Config bounds the policy. Its fields are the POND_POLICY_* knobs of the
// agent's configuration file (see package knobs).
type Config struct {
	MaxMembers    int           // POND_POLICY_MAX_MEMBERS
	MaxPonds      int           // POND_POLICY_MAX_PONDS
	QueryInterval time.Duration // POND_POLICY_QUERY_INTERVAL
	Grace         time.Duration // POND_POLICY_GRACE
	CheckInterval time.Duration // POND_POLICY_CHECK_INTERVAL
	MinInterval   time.Duration // POND_POLICY_NEGOTIATOR_MIN_INTERVAL
	Requirements  string        // POND_POLICY_REQUIREMENTS
}

// DefaultConfig is the configuration of POND_POLICY = true with no other
// knob set: the defaults of package knobs' table.
func DefaultConfig() Config {
	_, cfg, _ := ParseConfig(func(string) (string, bool) { return "", false })
	return cfg
}

// ParseConfig reads the policy's knobs through get (such as an agent's
// Knob method). enabled reports whether POND_POLICY is true; a knob with a
// bad value is an error naming it.
func ParseConfig(get func(name string) (string, bool)) (enabled bool, cfg Config, err error) {
	r := knobs.Reader(get)
	if enabled, err = r.Bool(knobs.Policy); err != nil {
		return false, cfg, err
	}
	for _, k := range []struct {
		knob string
		dst  *int
	}{{knobs.PolicyMaxMembers, &cfg.MaxMembers}, {knobs.PolicyMaxPonds, &cfg.MaxPonds}} {
		if *k.dst, err = r.Int(k.knob); err != nil {
			return false, cfg, err
		}
	}
	for _, k := range []struct {
		knob string
		dst  *time.Duration
	}{{knobs.PolicyQueryInterval, &cfg.QueryInterval}, {knobs.PolicyGrace, &cfg.Grace},
		{knobs.PolicyCheckInterval, &cfg.CheckInterval}, {knobs.PolicyNegotiatorMinInterval, &cfg.MinInterval}} {
		if *k.dst, err = r.Duration(k.knob); err != nil {
			return false, cfg, err
		}
	}
	if cfg.Requirements, err = r.Expr(knobs.PolicyRequirements); err != nil {
		return false, cfg, err
	}
	return enabled, cfg, nil
}
