package startd

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pond-htc/pond/condor/wire"
)

// TestMetricsSlots: pond_startd_slots counts the slots by the State and
// Activity their ads show, partitionable and dynamic slots included.
func TestMetricsSlots(t *testing.T) {
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1000"})
	var pclaim string
	for id, sl := range s.claims {
		if sl.partitionable {
			pclaim = id
		}
	}
	job := wire.Ad{"Owner": `"alice"`, "RequestCpus": "1", "RequestMemory": "400", "RequestDisk": "10", "Requirements": "true"}
	if _, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: pclaim, Job: job}); err != nil {
		t.Fatal(err)
	}
	type key struct{ state, activity string }
	n := map[key]int{}
	for _, ad := range s.Slots() {
		st, _ := ad.EvalAttr("State").StringValue()
		act, _ := ad.EvalAttr("Activity").StringValue()
		n[key{st, act}]++
	}
	if len(n) < 2 {
		t.Fatalf("slots in %d states, want a claimed and an unclaimed one: %v", len(n), n)
	}
	var lines []string
	for k, v := range n {
		lines = append(lines, fmt.Sprintf("pond_startd_slots{activity=%q,state=%q} %d", k.activity, k.state, v))
	}
	sort.Strings(lines)
	want := "# HELP pond_startd_slots The startd's slots (static, partitionable and dynamic) by state and activity.\n" +
		"# TYPE pond_startd_slots gauge\n" + strings.Join(lines, "\n") + "\n"
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), "pond_startd_slots"); err != nil {
		t.Error(err)
	}
}
