package cli

import (
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers/glidein"
)

// factoryPools names the pools whose central manager's pilot factory a
// glidein resource of cfg gives an entry to: those with a factory block
// whose pool argument refers to pool.NAME (pool.NAME.central_manager).
// The local provider gives those central managers the factory's delegated
// key and CA when it starts them.
func factoryPools(cfg *config.Config) []string {
	if cfg == nil {
		return nil
	}
	set := map[string]bool{}
	for _, r := range cfg.Resources {
		if r.Mode != config.ManagedResource || r.Type != glidein.ResourceType || r.Config == nil {
			continue
		}
		content, _, _ := r.Config.PartialContent(&hcl.BodySchema{
			Attributes: []hcl.AttributeSchema{{Name: "pool"}},
			Blocks:     []hcl.BlockHeaderSchema{{Type: "factory"}},
		})
		a := content.Attributes["pool"]
		if len(content.Blocks) == 0 || a == nil {
			continue
		}
		for _, tr := range a.Expr.Variables() {
			if tr.RootName() != "pool" || len(tr) < 2 {
				continue
			}
			if step, ok := tr[1].(hcl.TraverseAttr); ok {
				set[step.Name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
