package planner

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// Validate checks the configuration against the provider schemas without
// configuring any provider or reading any state: unknown resource types and
// arguments, wrong types, bad references and cycles.
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
		_, d = hcldec.Decode(info.cfg.Config, info.spec, ectx)
		diags = append(diags, d...)
	}
	return diags
}

// Import reads the object named id into state as the instance at addr,
// which must be declared in the configuration and not yet in prior.
func (e *Engine) Import(ctx context.Context, prior *state.State, addr state.Address, id string) (*state.State, hcl.Diagnostics) {
	ra := ResourceAddr{Mode: config.ManagedResource, Type: addr.Type, Name: addr.Name}
	if addr.IsData() {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot import a data source", Detail: "Only managed resources can be imported."}}
	}
	r, ok := e.cfg.Resources[ra.String()]
	if !ok {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Configuration for import target does not exist", Detail: fmt.Sprintf("The configuration does not declare %s. Add a block for it before importing.", ra)}}
	}
	switch {
	case r.Count != nil && addr.Key == nil, r.ForEach != nil && addr.Key == nil:
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Import target needs an instance key", Detail: fmt.Sprintf("%s uses count or for_each; name one instance, such as %s[0] or %s[\"key\"].", ra, ra, ra), Subject: r.DeclRange.Ptr()}}
	case r.Count == nil && r.ForEach == nil && addr.Key != nil:
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unexpected instance key", Detail: fmt.Sprintf("%s uses neither count nor for_each.", ra), Subject: r.DeclRange.Ptr()}}
	}
	if prior.Instance(addr) != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Resource already managed by pond", Detail: fmt.Sprintf("%s is already in the state. To import to this address, first remove it with \"pondctl state rm %s\".", addr, addr)}}
	}
	_, infos, diags := e.buildGraph(ctx)
	if diags.HasErrors() {
		return nil, diags
	}
	info := infos[ra.String()]
	v, err := info.prov.p.ImportResource(ctx, ra.Type, id)
	if err != nil {
		return nil, hcl.Diagnostics{errDiag("Failed to import "+addr.String(), err, r.DeclRange.Ptr())}
	}
	v, err = convert.Convert(v, info.schema.ImpliedType())
	if err != nil {
		return nil, hcl.Diagnostics{errDiag("Provider returned an invalid value for "+addr.String(), err, r.DeclRange.Ptr())}
	}
	next := prior.DeepCopy()
	if err := newLiveState(next).set(ra, info.provKey, addr.Key, v, info.schema, info.deps, r.Lifecycle.CreateBeforeDestroy); err != nil {
		return nil, hcl.Diagnostics{errDiag("Cannot store "+addr.String(), err, nil)}
	}
	return next, diags
}

// Schemas returns the schema of every provider the engine knows, by
// provider type name, without configuring any.
func Schemas(factories map[string]providers.Factory) map[string]*providers.ProviderSchema {
	out := map[string]*providers.ProviderSchema{}
	for name, f := range factories {
		p := f()
		out[name] = p.Schema()
		_ = p.Close()
	}
	return out
}
