package local

import (
	"context"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/providers"
)

// TestCheckPlan checks that max_nodes counts the nodes of every pool of a
// plan together, that pools to be deleted and counts not yet known do not
// count, and that the error names the pool that grows the most, at its
// nodes argument.
func TestCheckPlan(t *testing.T) {
	p := configured(t, t.TempDir()) // max_nodes = 64
	pool := func(n int) cty.Value { return poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(int64(n))}) }
	running := func(n int) cty.Value {
		names := make([]cty.Value, n)
		for i := range names {
			names[i] = cty.StringVal(nodeName("x", i))
		}
		return poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(int64(n)), "members": cty.ListVal(names)})
	}
	none := cty.NullVal(pool(1).Type())
	in := func(addr string, prior, planned cty.Value) providers.PlannedInstance {
		return providers.PlannedInstance{TypeName: "pool", Address: addr, Prior: prior, Planned: planned}
	}
	unknown := poolConfig(map[string]cty.Value{"nodes": cty.UnknownVal(cty.Number)})
	for _, tc := range []struct {
		name  string
		insts []providers.PlannedInstance
		want  string // substring of the error; "" for none
		blame string // the address the error is at
	}{
		{"one within", []providers.PlannedInstance{in("pool.a", none, pool(64))}, "", ""},
		{"two within", []providers.PlannedInstance{in("pool.a", none, pool(32)), in("pool.b", none, pool(32))}, "", ""},
		{"two beyond", []providers.PlannedInstance{in("pool.a", none, pool(40)), in("pool.b", none, pool(30))},
			"would run 70 nodes in all (pool.a 40, pool.b 30), more than it allows (max_nodes = 64)", "pool.a"},
		{"the one that grows", []providers.PlannedInstance{in("pool.a", running(50), pool(50)), in("pool.b", running(10), pool(20))},
			"would run 70 nodes in all", "pool.b"},
		{"deleted ones do not count", []providers.PlannedInstance{in("pool.a", running(50), none), in("pool.b", none, pool(60))}, "", ""},
		{"unknown counts do not count", []providers.PlannedInstance{in("pool.a", none, unknown), in("pool.b", none, pool(60))}, "", ""},
		{"count instances", []providers.PlannedInstance{in("pool.w[0]", none, pool(30)), in("pool.w[1]", none, pool(30)), in("pool.w[2]", none, pool(30))},
			"would run 90 nodes in all (pool.w[0] 30, pool.w[1] 30, pool.w[2] 30)", "pool.w[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags := p.CheckPlan(context.Background(), providers.CheckPlanRequest{Instances: tc.insts}).Diagnostics
			err := providers.Err(diags)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `raise max_nodes in the provider "local" block`) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			ref, ok := diags[0].Extra.(providers.InstanceAttributeRef)
			if !ok || ref.Address != tc.blame || ref.Name != "nodes" {
				t.Fatalf("error at %#v, want the nodes of %s", diags[0].Extra, tc.blame)
			}
		})
	}
}
