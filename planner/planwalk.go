package planner

import (
	"context"
	"log/slog"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// planWalk carries the state of one plan walk.
type planWalk struct {
	e       *Engine
	p       *Plan
	infos   map[string]*resourceInfo
	sc      *scope
	live    *liveState
	mu      sync.Mutex
	changed map[string]bool // resource addresses with a non-no-op change
}

func (w *planWalk) add(c *ResourceChange) {
	w.mu.Lock()
	w.p.Changes = append(w.p.Changes, c)
	if c.Action != NoOp {
		w.changed[c.Addr.ResourceAddress().String()] = true
	}
	w.mu.Unlock()
}

// resource plans every instance of one configured resource.
func (w *planWalk) resource(ctx context.Context, info *resourceInfo) hcl.Diagnostics {
	exp, each, diags := w.expand(info)
	if diags.HasErrors() {
		return diags
	}
	w.sc.setExpansion(info.addr, exp)
	_, prior := w.live.instances(info.addr)
	seen := map[string]bool{}
	for _, key := range exp.keys {
		addr := info.addr.Instance(key)
		ks := state.KeyString(key)
		seen[ks] = true
		cfgVal, d := evalInstanceConfig(w.sc, info, key, each)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if info.addr.IsData() {
			diags = append(diags, w.dataInstance(ctx, info, addr, cfgVal)...)
			continue
		}
		var priorInst *state.Instance
		if prior != nil {
			priorInst = prior[ks]
		}
		c, d := w.e.planInstance(ctx, info, addr, priorInst, cfgVal, w.p.Options)
		// What the provider finds wrong with the configuration is usually
		// the same for every instance: say it once.
		diags = appendNew(diags, d)
		if d.HasErrors() || c == nil {
			continue
		}
		if w.e.logger.Enabled(ctx, slog.LevelDebug) {
			w.e.logger.DebugContext(ctx, "planned instance", "address", addr.String(), "action", c.Action.String())
		}
		w.add(c)
		// What refers to the instance sees its sensitive values marked.
		before, after := c.Marked()
		if c.Action == Delete {
			w.sc.setInstance(addr, before)
		} else {
			w.sc.setInstance(addr, after)
		}
	}
	// Instances in state whose key is no longer configured.
	for ks, inst := range prior {
		if seen[ks] || info.addr.IsData() {
			continue
		}
		addr := info.addr.Instance(inst.IndexKey)
		before, err := decodeAttrs(inst.Attributes, info.schema)
		if err != nil {
			diags = append(diags, errDiag("Invalid state for "+addr.String(), err, nil))
			continue
		}
		reason := "because its key is no longer in for_each"
		if exp.mode == expandCount {
			reason = "because its index is out of range for count"
		} else if exp.mode == expandSingle {
			reason = "because the resource no longer uses count or for_each"
		}
		w.add(&ResourceChange{Addr: addr, ProviderKey: info.provKey, Action: Delete, Before: before, After: cty.NullVal(info.schema.ImpliedType()), Reason: reason, Deps: inst.Dependencies, CreateBeforeDestroy: inst.CreateBeforeDestroy, Sensitive: sensitiveAttrs(info.schema), SensitivePaths: hashedPaths(before, inst.SensitiveValues)})
	}
	return diags
}

// dataInstance reads a data source now when its configuration is known and
// nothing it depends on changes; otherwise it plans the read for apply.
func (w *planWalk) dataInstance(ctx context.Context, info *resourceInfo, addr state.Address, cfgVal cty.Value) hcl.Diagnostics {
	cfgVal, sens := unmarkSensitive(cfgVal)
	deferred := !cfgVal.IsWhollyKnown()
	w.mu.Lock()
	for _, d := range info.deps {
		if w.changed[d] {
			deferred = true
		}
	}
	w.mu.Unlock()
	ty := info.schema.ImpliedType()
	if deferred || w.p.Mode == DestroyMode {
		after := proposedNew(info.schema, cty.NullVal(ty), cfgVal)
		if w.p.Mode == DestroyMode {
			after = cty.NullVal(ty)
		}
		if w.p.Mode != DestroyMode {
			w.add(&ResourceChange{Addr: addr, ProviderKey: info.provKey, Action: Read, Before: cty.NullVal(ty), After: after, Deps: info.deps, Reason: "because its configuration depends on values not known until apply", SensitivePaths: sens})
		}
		w.sc.setInstance(addr, markSensitive(after, sens))
		return nil
	}
	resp := info.prov.p.ReadDataSource(ctx, providers.ReadDataRequest{TypeName: info.cfg.Type, Address: addr.String(), Config: cfgVal})
	diags := w.e.atProviderAttributes(atAttributes(providerDiags(resp.Diagnostics, "Failed to read "+addr.String(), info.cfg.DeclRange.Ptr()), info.cfg.Config), info.provKey)
	if diags.HasErrors() {
		return diags
	}
	v, err := convert.Convert(resp.Value, ty)
	if err != nil {
		return append(diags, errDiag("Provider returned an invalid value for "+addr.String(), err, info.cfg.DeclRange.Ptr()))
	}
	v = markSensitive(v, sens)
	w.sc.setInstance(addr, v)
	if err := w.live.set(info.addr, info.provKey, addr.Key, v, info.schema, info.deps, false); err != nil {
		return append(diags, errDiag("Cannot store "+addr.String(), err, nil))
	}
	return diags
}

// orphans plans the deletion of resources recorded in state but no longer in
// the configuration.
func (w *planWalk) orphans(ctx context.Context) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, r := range w.p.Refreshed.Resources {
		ra := r.Addr()
		if _, ok := w.e.cfg.Resources[ra.String()]; ok {
			continue
		}
		if r.Mode == state.ModeData {
			continue
		}
		_, schema, d := w.e.providerForState(ctx, r)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		action := Delete
		if rm := w.e.removedBlock(ra); rm != nil && !rm.Destroy {
			action = Forget
		}
		for _, inst := range r.Instances {
			addr := ra.Instance(inst.IndexKey)
			before, err := decodeAttrs(inst.Attributes, schema)
			if err != nil {
				diags = append(diags, errDiag("Invalid state for "+addr.String(), err, nil))
				continue
			}
			if action == Forget {
				w.add(&ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(r.Provider), Action: Forget, Before: before, After: before, Reason: "because its removed block says destroy = false", Deps: inst.Dependencies, Sensitive: sensitiveAttrs(schema), SensitivePaths: hashedPaths(before, inst.SensitiveValues)})
				continue
			}
			w.add(&ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(r.Provider), Action: Delete, Before: before, After: cty.NullVal(schema.ImpliedType()), Reason: "because it is not in the configuration", Deps: inst.Dependencies, CreateBeforeDestroy: inst.CreateBeforeDestroy, Sensitive: sensitiveAttrs(schema), SensitivePaths: hashedPaths(before, inst.SensitiveValues)})
		}
	}
	return diags
}

// removedBlock returns the removed block of the resource at ra, or nil.
func (e *Engine) removedBlock(ra state.Address) *config.Removed {
	for _, rm := range e.cfg.Removed {
		if rm.From == ra.ResourceAddress() {
			return rm
		}
	}
	return nil
}

// destroyAll turns the plan into one that deletes every managed instance.
func (w *planWalk) destroyAll() {
	var out []*ResourceChange
	for _, c := range w.p.Changes {
		if c.Action == Read {
			continue
		}
		if c.Before.IsNull() {
			continue
		}
		if c.Action == Forget {
			// destroy = false holds in a destroy too: the objects are
			// forgotten, not destroyed.
			out = append(out, c)
			continue
		}
		c.After = cty.NullVal(c.Before.Type())
		c.Action = Delete
		c.Reason = ""
		out = append(out, c)
	}
	w.p.Changes = out
}
