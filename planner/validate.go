package planner

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
)

// Validate checks the configuration against the provider schemas without
// configuring any provider or reading any state: unknown resource types and
// arguments, wrong types, bad references and cycles, and what each
// provider's ValidateResourceConfig finds wrong, with count.index, each.*
// and the variables unknown.
func (e *Engine) Validate(ctx context.Context) hcl.Diagnostics {
	e.validateOnly = true
	g, infos, diags := e.buildGraph(ctx)
	if diags.HasErrors() {
		return diags
	}
	if _, err := g.topo(); err != nil {
		ce := err.(*CycleError)
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cycle in configuration",
			Detail:   fmt.Sprintf("These objects refer to each other in a cycle: %s.", strings.Join(ce.Cycle, ", ")),
			Subject:  e.declRange(ce.Cycle[0]),
		})
	}
	sc := newScope(e.cfg, e.opts.Vars, e.opts.Functions, e.managed)
	for _, v := range g.order {
		info, ok := infos[v]
		if !ok {
			continue
		}
		inst := &instanceData{}
		if info.cfg.Count != nil {
			inst.countIndex = cty.UnknownVal(cty.Number)
		}
		if info.cfg.ForEach != nil {
			inst.eachKey, inst.eachValue = cty.UnknownVal(cty.String), cty.DynamicVal
		}
		ectx, d := sc.evalContext(info.body, inst)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		v, d := hcldec.Decode(info.cfg.Config, info.spec, ectx)
		diags = append(diags, d...)
		if d.HasErrors() || info.cfg.Mode == config.DataResource {
			continue
		}
		// What only the provider knows: ranges, combinations, and types it
		// cannot create yet. Values known only at plan time are unknown.
		resp := info.prov.p.ValidateResourceConfig(ctx, providers.ValidateRequest{TypeName: info.cfg.Type, Config: unmarkForProvider(fillObject(v, info.schema))})
		diags = append(diags, atAttributes(providerDiags(resp.Diagnostics, "Invalid "+info.cfg.Type+" configuration", info.cfg.DeclRange.Ptr()), info.cfg.Config)...)
	}
	return diags
}
