package negotiator

import (
	"testing"

	"github.com/pond-htc/pond/condor/config"
)

// TestNiceUserPrioFactor: the submitters of the nice-user accounting
// group get NICE_USER_PRIO_FACTOR, others DEFAULT_PRIO_FACTOR, so that a
// nice user's jobs run only on what others leave.
func TestNiceUserPrioFactor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		sub    string
		want   float64
	}{
		{"owner", "", "alice@pool", 1000},
		{"accounting group", "", "physics.alice@pool", 1000},
		{"nice user", "", "nice-user.alice@pool", 1e10},
		{"nice user, configured", "NICE_USER_PRIO_FACTOR = 50\n", "nice-user.alice@pool", 50},
		{"a group named like it", "", "nice-users.alice@pool", 1000},
		{"default factor configured", "DEFAULT_PRIO_FACTOR = 10\n", "alice@pool", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.New(config.Options{})
			if err := cfg.ParseInto("test.cfg", []byte(tt.config)); err != nil {
				t.Fatal(err)
			}
			n, err := New(Options{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			n.SetAccounting(map[string]float64{tt.sub: 2})
			if got := n.Priorities()[tt.sub]; got != 2*tt.want {
				t.Errorf("priority of %s = %v, want %v", tt.sub, got, 2*tt.want)
			}
		})
	}
	cfg := config.New(config.Options{})
	if err := cfg.ParseInto("bad.cfg", []byte("NICE_USER_PRIO_FACTOR = lots\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Config: cfg}); err == nil {
		t.Error("NICE_USER_PRIO_FACTOR = lots: no error")
	}
}
