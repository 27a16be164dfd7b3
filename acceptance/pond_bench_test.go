package acceptance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/sea"
)

// BenchmarkPondFormation measures forming a pond of 10 from a sea of N real
// agents: the tree query, the invitations, the acknowledgements (formed),
// until the central manager's collector holds every member's slot ads
// stamped with the pond's name (seen). The pond is released between
// iterations. Sizes of the sea default to 50, 100 and 200;
// PONDBENCH_SIZES=50,80 overrides them. Run it with the built binary:
//
//	make build && POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench PondFormation -benchtime 20x -timeout 30m ./acceptance/
func BenchmarkPondFormation(b *testing.B) {
	for _, n := range benchSizes(b, "PONDBENCH_SIZES", []int{50, 100, 200}, 10) {
		b.Run(fmt.Sprintf("sea=%d", n), func(b *testing.B) { benchPondFormation(b, n, 10) })
	}
}

func benchPondFormation(b *testing.B, seaSize, pondSize int) {
	w := newBenchWorkdir(b)
	// The sea boots in pools of at most 25 agents, one after the other:
	// two cores starting 200 agents at once starve their failure
	// detectors. The measurement starts once the whole sea is up.
	// Gossip with the LAN timing, the agents' default: the shorter
	// probe timeouts of the local profile make a sea this size on two cores
	// suspect its own members.
	var hcl strings.Builder
	hcl.WriteString("provider \"local\" {\n  gossip_profile = \"lan\"\n  max_nodes      = 1024\n}\n")
	hcl.WriteString("pool \"manager\" {\n  nodes = 1\n}\n")
	for i, left := 0, seaSize; left > 0; i++ {
		n := min(left, 25)
		left -= n
		dep := "pool.manager"
		if i > 0 {
			dep = fmt.Sprintf("pool.sea%d", i-1)
		}
		fmt.Fprintf(&hcl, "pool \"sea%d\" {\n  nodes      = %d\n  free       = true\n  attributes = { Bench = true }\n  depends_on = [%s]\n}\n", i, n, dep)
	}
	hcl.WriteString("output \"cm\" {\n  value = pool.manager.central_manager\n}\n")
	w.write("main.pond.hcl", hcl.String())
	if r := w.run("apply", "-auto-approve"); r.code != 0 {
		b.Fatalf("creating the sea: %s", r)
	}
	defer w.run("destroy", "-auto-approve")
	cm := w.output("cm")
	ctx := context.Background()
	p := sea.New()
	if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: cty.NullVal(p.Schema().Provider.ImpliedType()), SeaAddr: cm, WorkDir: w.dir}).Diagnostics); err != nil {
		b.Fatal(err)
	}
	schema := p.Schema().Resources["pond"]
	cfg := map[string]cty.Value{}
	for name, a := range schema.Attributes {
		cfg[name] = cty.NullVal(a.Type)
	}
	cfg["central_manager"] = cty.StringVal(cm)
	cfg["requirements"] = cty.StringVal("Bench == true")
	cfg["rank"] = cty.StringVal("KeyboardIdle")
	cfg["size"] = cty.NumberIntVal(int64(pondSize))
	planned := cty.ObjectVal(cfg)
	seaTLS, err := auth.FindClientTLS(w.getenv, w.dir)
	if err != nil {
		b.Fatal(err)
	}
	coll := wire.NewClient(cm, w.token()).WithTLS(seaTLS).Collector()
	// inCollector counts the machines whose slots the central manager's
	// collector holds stamped with the pond's name.
	inCollector := func(pond string) (int, error) {
		ads, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine,
			Constraint: fmt.Sprintf("PondName == %q", pond), Projection: []string{"Machine"}})
		machines := map[string]bool{}
		for _, ad := range ads {
			machines[ad["Machine"]] = true
		}
		return len(machines), err
	}
	// A sea that has just booted is still settling (a large one on two
	// cores for tens of seconds): wait until a tree query covers nearly
	// all of it before measuring.
	settled := time.Now()
	for {
		ans, err := api.NewClient(cm).WithTLS(seaTLS).WithToken(w.token()).Query(ctx, api.Query{Requirements: "Bench == true", K: 1, Deadline: time.Now().Add(5 * time.Second)})
		if err == nil && ans.Stats.Completeness >= 0.99 && float64(ans.Stats.Members) >= 0.99*float64(seaSize+1) {
			break
		}
		if time.Since(settled) > 3*time.Minute {
			b.Fatalf("no tree query covered 99%% of the sea within 3 minutes: %v", err)
		}
		time.Sleep(2 * time.Second)
	}
	b.Logf("sea of %d settled %s after it was created", seaSize, time.Since(settled).Round(time.Second))
	var formed, seen []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// Each iteration forms a pond of its own name, so that what the
		// collector holds of the last one cannot count for this one.
		pond := fmt.Sprintf("pond.bench%d", i)
		start := time.Now()
		resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pond", Address: pond, Prior: cty.NullVal(schema.ImpliedType()), Planned: planned, Config: planned})
		if err := providers.Err(resp.Diagnostics); err != nil {
			b.Fatal(err)
		}
		formed = append(formed, time.Since(start))
		// Seen by the central manager: its collector holds every member's
		// slots, stamped with the pond's name.
		for {
			n, err := inCollector(pond)
			if err == nil && n >= pondSize {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("the central manager's collector holds %d of %d members after a minute (%v)", n, pondSize, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		seen = append(seen, time.Since(start))
		b.StopTimer()
		// Release: it returns once every member has left and withdrawn its
		// ads; wait until the collector has dropped them, so iterations do
		// not overlap.
		if err := providers.Err(p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "pond", Address: pond, Prior: resp.New, Planned: cty.NullVal(schema.ImpliedType())}).Diagnostics); err != nil {
			b.Fatal(err)
		}
		back := time.Now()
		for {
			n, err := inCollector(pond)
			if err == nil && n == 0 {
				break
			}
			if time.Since(back) > time.Minute {
				b.Fatalf("the collector still holds %d members' ads a minute after the release (%v)", n, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.StartTimer()
	}
	report := func(lat []time.Duration, name string) {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), name+"-p50-ms")
		b.ReportMetric(float64(lat[(len(lat)*99)/100].Milliseconds()), name+"-p99-ms")
	}
	report(formed, "formed")
	report(seen, "seen")
}
