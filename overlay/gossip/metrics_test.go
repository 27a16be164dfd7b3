package gossip

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/pond-htc/pond/overlay/api"
)

// TestMetricsMembers: the sea's metrics count the members by status as
// the node sees them, the failures it saw, and the round trips it
// estimates to the alive members.
func TestMetricsMembers(t *testing.T) {
	ctx := context.Background()
	start := func(name string) *Sea {
		s, err := Start(ctx, Config{NodeName: name, BindAddr: "127.0.0.1:0", Profile: "fast"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		return s
	}
	a, b, c := start("a"), start("b"), start("c")
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, s := range []*Sea{b, c} {
		if _, err := s.Join(jctx, []string{a.GossipAddr()}, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	// Round trips are known once a has probed the others.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, okb := a.RTT("b")
		_, okc := a.RTT("c")
		if okb && okc {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a has no coordinates of b and c")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Shutdown()
	for !slices.ContainsFunc(a.Members(), func(m api.Member) bool { return m.Name == "b" && m.Status == "failed" }) {
		if time.Now().After(deadline) {
			t.Fatalf("a never saw b fail: %+v", a.Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The failure event reaches dispatch soon after the status.
	for a.failures.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	want := `
# HELP pond_gossip_member_failures_total Members this node saw fail their probes (serf's member-failed events).
# TYPE pond_gossip_member_failures_total counter
pond_gossip_member_failures_total 1
# HELP pond_gossip_members Members of the sea this node knows of, by status (alive, leaving, left, failed).
# TYPE pond_gossip_members gauge
pond_gossip_members{status="alive"} 2
pond_gossip_members{status="failed"} 1
pond_gossip_members{status="leaving"} 0
pond_gossip_members{status="left"} 0
`
	if err := testutil.CollectAndCompare(a, strings.NewReader(want), "pond_gossip_members", "pond_gossip_member_failures_total"); err != nil {
		t.Error(err)
	}
	body, err := testutil.CollectAndFormat(a, expfmt.TypeTextPlain, "pond_gossip_rtt_seconds")
	if err != nil || !strings.Contains(string(body), "pond_gossip_rtt_seconds_count 1\n") {
		t.Errorf("RTT histogram (one alive member besides a):\n%s", body)
	}
}
