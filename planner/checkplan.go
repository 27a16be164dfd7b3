package planner

import (
	"context"
	"sort"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/providers"
)

// checkPlan gives each provider that checks whole plans
// (providers.PlanChecker) the plan's instances of it, and places its
// diagnostics at the instances' arguments they name.
func (e *Engine) checkPlan(ctx context.Context, p *Plan, infos map[string]*resourceInfo) hcl.Diagnostics {
	byProv := map[string][]providers.PlannedInstance{}
	for _, c := range p.Changes {
		if c.Addr.IsData() || c.Action == Read {
			continue
		}
		byProv[c.ProviderKey] = append(byProv[c.ProviderKey], providers.PlannedInstance{
			TypeName: c.Addr.Type, Address: c.Addr.String(), Prior: c.Before, Planned: c.After,
		})
	}
	keys := make([]string, 0, len(byProv))
	for k := range byProv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var diags hcl.Diagnostics
	for _, key := range keys {
		pi, d := e.provider(ctx, key)
		if d.HasErrors() || pi == nil {
			continue
		}
		pc, ok := pi.p.(providers.PlanChecker)
		if !ok {
			continue
		}
		resp := pc.CheckPlan(ctx, providers.CheckPlanRequest{Instances: byProv[key]})
		var subject *hcl.Range
		if c, ok := e.cfg.Providers[key]; ok {
			subject = c.DeclRange.Ptr()
		}
		for _, d := range providerDiags(resp.Diagnostics, "Plan refused by provider "+key, subject) {
			if ref, ok := d.Extra.(providers.InstanceAttributeRef); ok {
				d.Subject = e.attributeRange(infos, ref, d.Subject)
			}
			diags = append(diags, d)
		}
	}
	return diags
}

// attributeRange returns the range of the value of an instance's argument
// in the configuration, else of the instance's block, else def.
func (e *Engine) attributeRange(infos map[string]*resourceInfo, ref providers.InstanceAttributeRef, def *hcl.Range) *hcl.Range {
	for _, info := range infos {
		if !matchesInstance(info, ref.Address) {
			continue
		}
		d := &hcl.Diagnostic{Subject: info.cfg.DeclRange.Ptr(), Extra: providers.AttributeRef(ref.Name)}
		atAttributes(hcl.Diagnostics{d}, info.cfg.Config)
		return d.Subject
	}
	return def
}

// matchesInstance reports whether address is an instance of info's
// resource.
func matchesInstance(info *resourceInfo, address string) bool {
	ra := info.addr.String()
	if address == ra {
		return true
	}
	return len(address) > len(ra) && address[:len(ra)] == ra && address[len(ra)] == '['
}
