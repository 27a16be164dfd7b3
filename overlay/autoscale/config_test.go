package autoscale

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		knobs   map[string]string
		enabled bool
		check   func(Config) bool
		err     string
	}{
		{name: "off by default", knobs: nil, enabled: false, check: func(c Config) bool { return c == DefaultConfig() }},
		{name: "on with defaults", knobs: map[string]string{KnobEnable: "true"}, enabled: true,
			check: func(c Config) bool { return c == DefaultConfig() }},
		{name: "limits", knobs: map[string]string{KnobEnable: "YES", KnobMaxMembers: "8", KnobMaxPonds: "2",
			KnobQueryInterval: "500ms", KnobGrace: "10", KnobMinInterval: "0.5", KnobRequirements: `Site == "sea"`}, enabled: true,
			check: func(c Config) bool {
				return c.MaxMembers == 8 && c.MaxPonds == 2 && c.QueryInterval == 500*time.Millisecond &&
					c.Grace == 10*time.Second && c.MinInterval == 500*time.Millisecond && c.Requirements == `Site == "sea"`
			}},
		{name: "bad boolean", knobs: map[string]string{KnobEnable: "maybe"}, err: "POND_POLICY = \"maybe\": want true or false"},
		{name: "zero members", knobs: map[string]string{KnobEnable: "true", KnobMaxMembers: "0"}, err: "POND_POLICY_MAX_MEMBERS"},
		{name: "bad duration", knobs: map[string]string{KnobEnable: "true", KnobGrace: "soon"}, err: "POND_POLICY_GRACE = \"soon\": want a duration"},
		{name: "negative duration", knobs: map[string]string{KnobEnable: "true", KnobQueryInterval: "-1s"}, err: "must not be negative"},
		{name: "zero check interval", knobs: map[string]string{KnobEnable: "true", KnobCheckInterval: "0"}, err: "POND_POLICY_CHECK_INTERVAL: must be more than zero"},
		{name: "bad requirements", knobs: map[string]string{KnobEnable: "true", KnobRequirements: "Memory >"}, err: "POND_POLICY_REQUIREMENTS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			get := func(k string) (string, bool) { v, ok := tt.knobs[k]; return v, ok }
			enabled, cfg, err := ParseConfig(get)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if enabled != tt.enabled || !tt.check(cfg) {
				t.Fatalf("enabled=%v config=%+v", enabled, cfg)
			}
		})
	}
}
