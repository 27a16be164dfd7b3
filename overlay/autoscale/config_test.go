package autoscale

import (
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/knobs"
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
		{name: "defaults", knobs: nil, check: func(c Config) bool {
			return c == Config{MaxMembers: 16, MaxPonds: 4, QueryInterval: 2 * time.Second, Grace: 30 * time.Second, CheckInterval: time.Second}
		}},
		{name: "blank knobs take the defaults", knobs: map[string]string{knobs.Policy: "on", knobs.PolicyMaxMembers: " ", knobs.PolicyGrace: ""}, enabled: true,
			check: func(c Config) bool { return c == DefaultConfig() }},
		{name: "on with defaults", knobs: map[string]string{knobs.Policy: "true"}, enabled: true,
			check: func(c Config) bool { return c == DefaultConfig() }},
		{name: "limits", knobs: map[string]string{knobs.Policy: "YES", knobs.PolicyMaxMembers: "8", knobs.PolicyMaxPonds: "2",
			knobs.PolicyQueryInterval: "500ms", knobs.PolicyGrace: "10", knobs.PolicyNegotiatorMinInterval: "0.5", knobs.PolicyRequirements: `Site == "sea"`}, enabled: true,
			check: func(c Config) bool {
				return c.MaxMembers == 8 && c.MaxPonds == 2 && c.QueryInterval == 500*time.Millisecond &&
					c.Grace == 10*time.Second && c.MinInterval == 500*time.Millisecond && c.Requirements == `Site == "sea"`
			}},
		{name: "bad boolean", knobs: map[string]string{knobs.Policy: "maybe"}, err: "POND_POLICY = \"maybe\": want true or false"},
		{name: "zero members", knobs: map[string]string{knobs.Policy: "true", knobs.PolicyMaxMembers: "0"}, err: "POND_POLICY_MAX_MEMBERS"},
		{name: "bad duration", knobs: map[string]string{knobs.Policy: "true", knobs.PolicyGrace: "soon"}, err: "POND_POLICY_GRACE = \"soon\": want a duration"},
		{name: "negative duration", knobs: map[string]string{knobs.Policy: "true", knobs.PolicyQueryInterval: "-1s"}, err: "must not be negative"},
		{name: "zero check interval", knobs: map[string]string{knobs.Policy: "true", knobs.PolicyCheckInterval: "0"}, err: "POND_POLICY_CHECK_INTERVAL = \"0\": must be more than zero"},
		{name: "bad requirements", knobs: map[string]string{knobs.Policy: "true", knobs.PolicyRequirements: "Memory >"}, err: "POND_POLICY_REQUIREMENTS"},
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
