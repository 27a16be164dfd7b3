package knobs_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/knobs"
)

// TestAgentDefaults checks that the defaults the table documents are those
// the agent applies.
func TestAgentDefaults(t *testing.T) {
	for name, want := range map[string]string{knobs.Bind: agent.DefaultBind, knobs.API: agent.DefaultAPI} {
		if k, _ := knobs.Lookup(name); k.Default != want {
			t.Errorf("%s: the table's default is %q, the agent's %q", name, k.Default, want)
		}
	}
}

// TestStartdDefaults checks that the defaults the table documents for the
// knobs the startd reads, and their names, are the startd's.
func TestStartdDefaults(t *testing.T) {
	for _, tt := range []struct {
		name, startdName string
		want             any
	}{
		{knobs.BlackholeFailures, startd.KnobBlackholeFailures, startd.DefaultBlackholeFailures},
		{knobs.QuarantineTime, startd.KnobQuarantineTime, startd.DefaultQuarantineTime},
		{knobs.EndTime, startd.KnobEndTime, 0},
		{knobs.EndGrace, startd.KnobEndGrace, startd.DefaultEndGrace},
		{knobs.JobMaxPids, startd.KnobJobMaxPids, startd.DefaultJobMaxPids},
		{knobs.JobSupervisor, startd.KnobJobSupervisor, startd.DefaultJobSupervisor},
	} {
		if tt.name != tt.startdName {
			t.Errorf("the table's %s is the startd's %s", tt.name, tt.startdName)
		}
		k, _ := knobs.Lookup(tt.name)
		var got any
		switch w := tt.want.(type) {
		case string:
			got = k.Default
		case int:
			got, _ = strconv.Atoi(k.Default)
		case time.Duration:
			got, _ = knobs.ParseDuration(k.Default)
			_ = w
		}
		if got != tt.want {
			t.Errorf("%s: the table's default is %q, the startd's %v", tt.name, k.Default, tt.want)
		}
	}
}
