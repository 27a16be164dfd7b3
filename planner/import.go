package planner

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// Import reads the object named id into state as the instance at addr,
// which must be declared in the configuration and not yet in prior.
func (e *Engine) Import(ctx context.Context, prior *state.State, addr state.Address, id string) (*state.State, hcl.Diagnostics) {
	ra := state.Address{Mode: state.ModeManaged, Type: addr.Type, Name: addr.Name}
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
	e.useLineage(prior)
	_, infos, diags := e.buildGraph(ctx)
	if diags.HasErrors() {
		return nil, diags
	}
	info := infos[ra.String()]
	cfgVal := e.importConfig(prior, infos, info, addr.Key)
	resp := info.prov.p.ImportResource(ctx, providers.ImportRequest{TypeName: ra.Type, ID: id, Address: addr.String(), Lineage: e.stateLineage(), Config: cfgVal})
	diags = append(diags, providerDiags(resp.Diagnostics, "Failed to import "+addr.String(), r.DeclRange.Ptr())...)
	if diags.HasErrors() {
		return nil, diags
	}
	v, err := convert.Convert(resp.Imported, info.schema.ImpliedType())
	if err != nil {
		return nil, append(diags, errDiag("Provider returned an invalid value for "+addr.String(), err, r.DeclRange.Ptr()))
	}
	next := prior.DeepCopy()
	if err := newLiveState(next, e.hashKey).set(ra, info.provKey, addr.Key, v, info.schema, info.deps, r.Lifecycle.CreateBeforeDestroy); err != nil {
		return nil, append(diags, errDiag("Cannot store "+addr.String(), err, nil))
	}
	return next, diags
}

// importConfig evaluates the configuration of the instance of info at key
// against prior: what it refers to that the state lacks is unknown. It is
// null when the configuration cannot be evaluated.
func (e *Engine) importConfig(prior *state.State, infos map[string]*resourceInfo, info *resourceInfo, key any) cty.Value {
	null := cty.NullVal(info.schema.ImpliedType())
	if prior == nil {
		prior = state.New()
	}
	sc := newScope(e.cfg, e.opts.Vars, e.opts.Functions, e.managed)
	e.seedScope(sc, newLiveState(prior, e.hashKey), infos, &Plan{})
	w := &planWalk{e: e, sc: sc, infos: infos}
	_, each, diags := w.expand(info)
	if diags.HasErrors() {
		return null
	}
	v, diags := evalInstanceConfig(sc, info, key, each)
	if diags.HasErrors() || v == cty.NilVal {
		return null
	}
	v, _ = unmarkSensitive(v)
	return v
}
