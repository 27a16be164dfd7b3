package negotiator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/wire"
)

// wireOnly hides a collector's parsed ads: the negotiator copies and
// parses its answers, as it did before QueryParsed.
type wireOnly struct{ c *collector.Collector }

func (w wireOnly) Query(ctx context.Context, req *wire.QueryAdsRequest) (*wire.QueryAdsResponse, error) {
	return w.c.Query(ctx, req)
}

// slotPool is a collector holding n slot ads of about a hundred
// attributes each, as a startd advertises them, one in ten of them
// claimed, with their claim ids private.
func slotPool(tb testing.TB, n int) *collector.Collector {
	tb.Helper()
	c := collector.New(collector.Options{})
	const perNode = 100
	for node := 0; node*perNode < n; node++ {
		var ads []wire.Ad
		private := map[string]wire.Ad{}
		for i := 0; i < perNode && node*perNode+i < n; i++ {
			name := fmt.Sprintf("slot%d@node%04d", i+1, node)
			state := "Unclaimed"
			if i%10 == 9 {
				state = "Claimed"
			}
			ad := wire.Ad{"MyType": `"Machine"`, "Name": fmt.Sprintf("%q", name), "Machine": fmt.Sprintf(`"node%04d"`, node),
				"State": fmt.Sprintf("%q", state), "Activity": `"Idle"`, "Cpus": "1", "Memory": fmt.Sprint(1024 + i), "Disk": "1000000",
				"Arch": `"X86_64"`, "OpSys": `"LINUX"`, "PondAddress": fmt.Sprintf(`"127.0.0.1:%d"`, 10000+node),
				"Start": "true", "Requirements": "START && TARGET.RequestMemory <= MY.Memory", "Rank": "0",
				"PartitionableSlot": "false", "SlotID": fmt.Sprint(i + 1)}
			for j := range 85 {
				ad[fmt.Sprintf("PondAttr%02d", j)] = fmt.Sprintf(`"value %d of a machine attribute (x86_64, LINUX, 9.0.%d)"`, j, j)
			}
			ads = append(ads, ad)
			private[name] = wire.Ad{"ClaimId": fmt.Sprintf(`"claim-%s"`, name)}
		}
		if _, err := c.Update(context.Background(), &wire.UpdateRequest{Type: wire.TypeMachine, Source: fmt.Sprintf("startd@node%04d", node),
			Ads: ads, Private: private}); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// TestParsedSlotsAgree: the slots a cycle takes from a collector in its
// process, parsed as the collector holds them, are those it took from
// the collector's printed answers: the same unclaimed and claimed slots,
// claim ids, startds, ads and last-heard times. A slot without a claim id
// or a startd address is left out either way.
func TestParsedSlotsAgree(t *testing.T) {
	c := slotPool(t, 250)
	ctx := context.Background()
	if _, err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@odd", Ads: []wire.Ad{
		{"MyType": `"Machine"`, "Name": `"slot1@odd"`, "State": `"Unclaimed"`, "PondAddress": `"127.0.0.1:1"`},
		{"MyType": `"Machine"`, "Name": `"slot2@odd"`, "State": `"Unclaimed"`},
	}, Private: map[string]wire.Ad{"slot2@odd": {"ClaimId": `"c2"`}}}); err != nil {
		t.Fatal(err)
	}
	type slotView struct {
		Name, Startd, ClaimID string
		Attrs                 string
	}
	view := func(ss []*Slot) []slotView {
		var out []slotView
		for _, s := range ss {
			var attrs []string
			for _, k := range []string{"Cpus", "Memory", "State", "Requirements", "PondAttr42", "LastHeardFrom", "ClaimId"} {
				v, _ := s.Ad.Lookup(k)
				attrs = append(attrs, fmt.Sprintf("%s=%v", k, v))
			}
			out = append(out, slotView{s.Name, s.Startd, s.ClaimID, strings.Join(attrs, " ")})
		}
		return out
	}
	n := &Negotiator{}
	for _, preempt := range []bool{false, true} {
		seenWire, seenParsed := map[string]int64{}, map[string]int64{}
		ws, wc, err := n.slots(ctx, collectorConn{local: wireOnly{c}}, seenWire, preempt)
		if err != nil {
			t.Fatal(err)
		}
		ps, pc, err := n.slots(ctx, collectorConn{local: c}, seenParsed, preempt)
		if err != nil {
			t.Fatal(err)
		}
		want := 225
		if got := len(ps); got != want {
			t.Errorf("preempt %v: %d unclaimed slots, want %d", preempt, got, want)
		}
		if diff := cmp.Diff(view(ws), view(ps)); diff != "" {
			t.Errorf("preempt %v: unclaimed slots differ (-wire +parsed):\n%s", preempt, diff)
		}
		if diff := cmp.Diff(view(wc), view(pc)); diff != "" {
			t.Errorf("preempt %v: claimed slots differ (-wire +parsed):\n%s", preempt, diff)
		}
		if preempt && len(pc) != 25 {
			t.Errorf("%d claimed slots, want 25", len(pc))
		}
		if diff := cmp.Diff(seenWire, seenParsed); diff != "" {
			t.Errorf("preempt %v: last heard differ (-wire +parsed):\n%s", preempt, diff)
		}
		if slices.ContainsFunc(ps, func(s *Slot) bool { return strings.HasSuffix(s.Name, "@odd") }) {
			t.Errorf("a slot without a claim id or an address was taken")
		}
	}
}

// BenchmarkSlotsFromLocalCollector10k is the part of a negotiation cycle
// that takes the unclaimed slots of a pool of 10,000 from the collector
// in its process: printed ads copied and parsed again (wire), against the
// collector's parsed ads (parsed).
func BenchmarkSlotsFromLocalCollector10k(b *testing.B) {
	c := slotPool(b, 10000)
	n := &Negotiator{}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		q    Querier
	}{{"wire", wireOnly{c}}, {"parsed", c}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				slots, _, err := n.slots(ctx, collectorConn{local: tc.q}, map[string]int64{}, false)
				if err != nil || len(slots) != 9000 {
					b.Fatalf("%d slots, %v", len(slots), err)
				}
			}
		})
	}
}
