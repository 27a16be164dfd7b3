package planner

import (
	"context"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// planInstance plans one managed instance.
func (e *Engine) planInstance(ctx context.Context, info *resourceInfo, addr state.Address, priorInst *state.Instance, cfgVal cty.Value, opts PlanOptions) (*ResourceChange, hcl.Diagnostics) {
	schema := info.schema
	ty := schema.ImpliedType()
	prior := cty.NullVal(ty)
	tainted := false
	// The provider gets the configuration without marks, and the paths of
	// its sensitive values.
	cfgVal, sens := unmarkSensitive(cfgVal)
	var priorHashes map[string]string
	if priorInst != nil {
		v, err := decodeAttrs(priorInst.Attributes, schema)
		if err != nil {
			return nil, hcl.Diagnostics{errDiag("Invalid state for "+addr.String(), err, nil)}
		}
		// The state holds hashes of the sensitive values: those the
		// configuration still has come back from it.
		priorHashes = priorInst.SensitiveValues
		if v, err = restore(v, priorHashes, cfgVal, e.hashKey); err != nil {
			return nil, hcl.Diagnostics{errDiag("Cannot compare the sensitive values of "+addr.String(), err, nil)}
		}
		prior = v
		tainted = priorInst.Status == "tainted"
	}
	rangePtr := info.cfg.DeclRange.Ptr()
	vresp := info.prov.p.ValidateResourceConfig(ctx, providers.ValidateRequest{TypeName: info.cfg.Type, Config: cfgVal})
	diags := atAttributes(providerDiags(vresp.Diagnostics, "Invalid "+info.cfg.Type+" configuration", rangePtr), info.cfg.Config)
	if diags.HasErrors() {
		return nil, diags
	}
	if priorInst == nil && opts.Mode == DestroyMode {
		// Nothing to destroy: the provider is not asked to plan a
		// create the destroy drops (destroyAll), which it may refuse
		// (a site that cannot take it), failing a destroy of nothing.
		return &ResourceChange{Addr: addr, ProviderKey: info.provKey, Action: Create, Before: prior, After: cty.UnknownVal(ty), Deps: info.deps, Sensitive: sensitiveAttrs(schema), SensitivePaths: sens}, diags
	}
	if opts.Mode == DestroyMode {
		// The instance is deleted by what the state holds (destroyAll): its
		// configuration is not planned, so that a site whose checks fail
		// since it was created (a partition removed, a host gone) does not
		// keep its objects from being deleted.
		return &ResourceChange{Addr: addr, ProviderKey: info.provKey, Action: NoOp, Before: prior, After: prior, Deps: info.deps, CreateBeforeDestroy: info.cfg.Lifecycle.CreateBeforeDestroy, Sensitive: sensitiveAttrs(schema),
			SensitivePaths: uniquePaths(append(sens, hashedPaths(prior, priorHashes)...))}, diags
	}
	cfgVal = ignoreChanges(cfgVal, prior, info.cfg.Lifecycle)
	planned, replace, cost, d := e.planCall(ctx, info, addr, prior, cfgVal, sens)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return nil, diags
	}
	c := &ResourceChange{Addr: addr, ProviderKey: info.provKey, Before: prior, After: planned, Deps: info.deps, CreateBeforeDestroy: info.cfg.Lifecycle.CreateBeforeDestroy, Sensitive: sensitiveAttrs(schema),
		SensitivePaths: uniquePaths(append(sens, hashedPaths(prior, priorHashes)...)), Cost: cost}
	if prior.IsNull() {
		c.Action = Create
		return c, diags
	}
	for _, n := range schema.AttributeNames() {
		a := schema.Attributes[n]
		if !a.ForceNew {
			continue
		}
		pv, nv := prior.GetAttr(n), planned.GetAttr(n)
		if eq := pv.Equals(nv); !eq.IsKnown() || eq.False() {
			replace = append(replace, cty.GetAttrPath(n))
		}
	}
	forced := tainted || containsAddr(opts.Replace, addr)
	switch {
	case len(replace) > 0 || forced:
		c.RequiresReplace = replace
		if tainted {
			c.Reason = "because it is tainted"
		} else if forced {
			c.Reason = "as requested"
		}
		// Re-plan as a create so that computed attributes are unknown.
		c.After, _, c.Cost, d = e.planCall(ctx, info, addr, cty.NullVal(ty), cfgVal, sens)
		diags = appendNew(diags, d)
		if diags.HasErrors() {
			return nil, diags
		}
		c.Action = DeleteThenCreate
		if info.cfg.Lifecycle.CreateBeforeDestroy {
			c.Action = CreateThenDelete
		}
	default:
		if valuesEqual(planned, prior) {
			c.Action = NoOp
		} else {
			c.Action = Update
		}
	}
	return c, diags
}

// planCall asks the provider to plan the instance from prior to cfgVal, and
// returns the planned value, converted to the schema's type, the
// attributes the provider says force a replacement, and its estimate of
// the cost. sens are the paths of the configuration's sensitive values.
func (e *Engine) planCall(ctx context.Context, info *resourceInfo, addr state.Address, prior, cfgVal cty.Value, sens []cty.Path) (cty.Value, []cty.Path, *providers.CostEstimate, hcl.Diagnostics) {
	rangePtr := info.cfg.DeclRange.Ptr()
	resp := info.prov.p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: info.cfg.Type, Address: addr.String(), Lineage: e.stateLineage(), Prior: prior, Config: cfgVal, ProposedNew: proposedNew(info.schema, prior, cfgVal), Sensitive: sens})
	diags := e.atProviderAttributes(atAttributes(providerDiags(resp.Diagnostics, "Failed to plan "+addr.String(), rangePtr), info.cfg.Config), info.provKey)
	if diags.HasErrors() {
		return cty.NilVal, nil, nil, diags
	}
	planned, err := convert.Convert(resp.Planned, info.schema.ImpliedType())
	if err != nil {
		return cty.NilVal, nil, nil, append(diags, errDiag("Provider produced an invalid plan for "+addr.String(), err, rangePtr))
	}
	return planned, append([]cty.Path{}, resp.RequiresReplace...), resp.Cost, diags
}

func containsAddr(list []string, addr state.Address) bool {
	s := addr.String()
	for _, a := range list {
		if a == s {
			return true
		}
	}
	return false
}

// proposedNew merges configuration with prior state: attributes the
// configuration leaves null keep their prior value when computed, and are
// unknown when creating.
func proposedNew(s *providers.Schema, prior, cfg cty.Value) cty.Value {
	if cfg.IsNull() || !cfg.IsKnown() {
		return cfg
	}
	vals := map[string]cty.Value{}
	for name, aty := range s.ImpliedType().AttributeTypes() {
		cv := cfg.GetAttr(name)
		a := s.Attributes[name]
		if a != nil && a.Computed && cv.IsNull() {
			if prior.IsNull() {
				vals[name] = cty.UnknownVal(aty)
			} else {
				vals[name] = prior.GetAttr(name)
			}
			continue
		}
		vals[name] = cv
	}
	return cty.ObjectVal(vals)
}
