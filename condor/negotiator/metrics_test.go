package negotiator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pond-htc/pond/condor/metrics"
)

// TestMetricsCycle: a cycle's matches and the idle jobs it left, by
// reason, are counted; the priorities are the negotiator's.
func TestMetricsCycle(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	subs := []Submitter{{Name: "alice@x", Jobs: make([]Job, 5)}, {Name: "bob@x", Jobs: make([]Job, 4)}}
	matches := []Match{{Submitter: "alice@x"}, {Submitter: "bob@x"}, {Submitter: "bob@x", Preempt: true}}
	n.metrics.observe(CycleStats{Duration: 30 * time.Millisecond, Autoclusters: 2}, subs, matches, map[string]int{"lic": 3})
	n.SetAccounting(map[string]float64{"alice@x": 2, "bob@x": 4})
	prio := n.Priorities() // the usage times the priority factor
	want := fmt.Sprintf(`
# HELP pond_negotiator_matches_total Jobs the negotiator matched to slots (preemptions included).
# TYPE pond_negotiator_matches_total counter
pond_negotiator_matches_total 3
# HELP pond_negotiator_rejections_total Idle jobs a cycle considered and left unmatched, by reason.
# TYPE pond_negotiator_rejections_total counter
pond_negotiator_rejections_total{reason="concurrency_limit"} 3
pond_negotiator_rejections_total{reason="no_slot"} 4
# HELP pond_negotiator_submitter_priority Effective user priority of each submitter, lower is better (past the first 20 by priority, the others' mean as "other").
# TYPE pond_negotiator_submitter_priority gauge
pond_negotiator_submitter_priority{submitter="alice@x"} %v
pond_negotiator_submitter_priority{submitter="bob@x"} %v
`, prio["alice@x"], prio["bob@x"])
	if err := testutil.CollectAndCompare(n, strings.NewReader(want), "pond_negotiator_matches_total",
		"pond_negotiator_rejections_total", "pond_negotiator_submitter_priority"); err != nil {
		t.Error(err)
	}
	if c := testutil.CollectAndCount(n, "pond_negotiator_cycle_seconds"); c != 1 {
		t.Errorf("%d cycle histograms", c)
	}

	// Many submitters: MaxOwners of them by name, and "other".
	usage := map[string]float64{}
	for i := range metrics.MaxOwners + 5 {
		usage[fmt.Sprintf("u%02d@x", i)] = float64(i + 1)
	}
	n.SetAccounting(usage)
	if c := testutil.CollectAndCount(n, "pond_negotiator_submitter_priority"); c != metrics.MaxOwners+1 {
		t.Errorf("%d priority series, want %d", c, metrics.MaxOwners+1)
	}
}
