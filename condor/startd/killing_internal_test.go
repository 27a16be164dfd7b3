package startd

import (
	"log/slog"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
)

// TestKillingTimeout checks how KILLING_TIMEOUT is read: seconds,
// HTCondor's 30 by default, and the default for a value that is not a
// number of seconds of 0 or more.
func TestKillingTimeout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, value string
		want        time.Duration
	}{
		{"unset", "", DefaultKillingTimeout},
		{"seconds", "3", 3 * time.Second},
		{"expression", "2 * 60", 2 * time.Minute},
		{"zero: at once", "0", 0},
		{"negative", "-5", DefaultKillingTimeout},
		{"not a number", "soon", DefaultKillingTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.New(config.Options{})
			if tt.value != "" {
				if err := cfg.Set("KILLING_TIMEOUT", tt.value); err != nil {
					t.Fatal(err)
				}
			}
			s := &Startd{log: slog.New(slog.DiscardHandler)}
			s.opts.Config = cfg
			if got := s.killingTimeout(); got != tt.want {
				t.Errorf("KILLING_TIMEOUT = %q: %v, want %v", tt.value, got, tt.want)
			}
		})
	}
}
