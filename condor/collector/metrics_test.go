package collector

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pond-htc/pond/condor/wire"
)

// TestMetricsAds: the collector's metrics count the ads it holds by type
// (expired ones left out, made-up types bounded to "other") and the
// updates it took.
func TestMetricsAds(t *testing.T) {
	ck := &clock{t: time.Unix(1_800_000_000, 0)}
	c := New(Options{Lifetime: time.Minute, Now: ck.now})
	update := func(typ, src string, lifetime int, ads ...wire.Ad) {
		t.Helper()
		if _, err := c.Update(context.Background(), &wire.UpdateRequest{Type: typ, Source: src, Ads: ads, Lifetime: lifetime}); err != nil {
			t.Fatal(err)
		}
	}
	update(wire.TypeMachine, "startd@a", 0, wire.Ad{"Name": `"slot1@a"`}, wire.Ad{"Name": `"slot2@a"`})
	update("machine", "startd@b", 300, wire.Ad{"Name": `"slot1@b"`})
	update(wire.TypeSchedd, "schedd@a", 0, wire.Ad{"Name": `"a"`})
	update(wire.TypeSchedd, "schedd@a", 0, wire.Ad{"Name": `"a"`})
	update("Made-Up-1", "x", 0, wire.Ad{"Name": `"x1"`})
	update("Made-Up-2", "y", 0, wire.Ad{"Name": `"y1"`})
	ck.t = ck.t.Add(2 * time.Minute) // all but slot1@b expired
	update(wire.TypeSchedd, "schedd@a", 0, wire.Ad{"Name": `"a"`})
	want := `
# HELP pond_collector_ads Ads the collector holds (not yet expired) by type.
# TYPE pond_collector_ads gauge
pond_collector_ads{type="Machine"} 1
pond_collector_ads{type="Scheduler"} 1
# HELP pond_collector_updates_total Updates the collector took, by ad type.
# TYPE pond_collector_updates_total counter
pond_collector_updates_total{type="Machine"} 2
pond_collector_updates_total{type="Scheduler"} 3
pond_collector_updates_total{type="other"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
