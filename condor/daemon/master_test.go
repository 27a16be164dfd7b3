package daemon_test

import (
	"testing"

	"github.com/pond-htc/pond/condor/daemon/testpool"
)

// TestDaemonAccessors checks that a master gives the daemons it runs and
// nil for the others.
func TestDaemonAccessors(t *testing.T) {
	t.Parallel()
	n := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, SCHEDD"})
	m := n.Master
	if m.Collector() == nil || m.Schedd() == nil {
		t.Errorf("running collector %v, schedd %v; want both", m.Collector(), m.Schedd())
	}
	if m.Negotiator() != nil || m.Startd() != nil {
		t.Errorf("negotiator %v, startd %v; want neither", m.Negotiator(), m.Startd())
	}
}
