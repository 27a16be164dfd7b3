package sea

import (
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/providers/providertest"
)

// TestConformance runs providertest's life cycle of a pond (plan, create,
// refresh, no-op plan, update in place, delete, read after delete) over a
// sea of in-process agents.
func TestConformance(t *testing.T) {
	s := querySea(t)
	cfg := func(attrs map[string]cty.Value) cty.Value { return pondConfig(t, s, attrs) }
	for _, tc := range []struct {
		name    string
		config  cty.Value
		updated cty.Value
	}{
		{name: "grown", config: cfg(nil), updated: cfg(map[string]cty.Value{"size": cty.NumberIntVal(3)})},
		{name: "renewed", config: cfg(map[string]cty.Value{"size": cty.NumberIntVal(2), "lease": cty.StringVal("1h"), "drain": cty.StringVal("evict")}),
			updated: cfg(map[string]cty.Value{"size": cty.NumberIntVal(2), "lease": cty.StringVal("2h"), "drain": cty.StringVal("evict"),
				"attributes": cty.MapVal(map[string]cty.Value{"Project": cty.StringVal(`"burst"`)})})},
		{name: "shrunk", config: cfg(map[string]cty.Value{"size": cty.NumberIntVal(3), "mode": cty.StringVal("first-fit")}),
			updated: cfg(map[string]cty.Value{"size": cty.NumberIntVal(1), "mode": cty.StringVal("first-fit")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			providertest.Run(t, New, providertest.Case{
				TypeName: "pond",
				Address:  pondAddr,
				SeaAddr:  s.api("cm"),
				Config:   tc.config,
				Updated:  tc.updated,
				Timeout:  time.Minute,
				Check: func(t *testing.T, state cty.Value) {
					size, _ := state.GetAttr("size").AsBigFloat().Int64()
					ms := strs(state.GetAttr("members"))
					if int64(len(ms)) != size {
						t.Errorf("members %v, want %d", ms, size)
					}
					for _, m := range ms {
						s.checkMember(t, m, pondAddr, state.GetAttr("id").AsString(), s.api("cm"))
					}
				},
			})
			for _, n := range []string{"n1", "n2", "n3", "n4", "picky"} {
				s.checkFree(t, n)
			}
		})
	}
}
