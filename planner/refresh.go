package planner

import (
	"context"
	"log/slog"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// refresh reads every managed instance of prior from its provider.
func (e *Engine) refresh(ctx context.Context, prior *state.State, infos map[string]*resourceInfo, opts PlanOptions) (*state.State, []*ResourceChange, hcl.Diagnostics) {
	refreshed := prior.DeepCopy()
	if !opts.Refresh {
		return refreshed, nil, nil
	}
	var (
		mu    sync.Mutex
		diags hcl.Diagnostics
		drift []*ResourceChange
		gone  = map[*state.Instance]bool{}
		wg    sync.WaitGroup
		sem   = make(chan struct{}, opts.Parallelism)
	)
	for _, r := range refreshed.Resources {
		if r.Mode != state.ModeManaged {
			continue
		}
		for _, inst := range r.Instances {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c, d := e.refreshInstance(ctx, r, inst)
				mu.Lock()
				defer mu.Unlock()
				diags = append(diags, d...)
				if c == nil {
					return
				}
				drift = append(drift, c)
				if c.Action == Delete {
					gone[inst] = true
				}
			}()
		}
	}
	wg.Wait()
	for _, r := range refreshed.Resources {
		kept := r.Instances[:0]
		for _, inst := range r.Instances {
			if !gone[inst] {
				kept = append(kept, inst)
			}
		}
		r.Instances = kept
	}
	sortChanges(drift)
	return refreshed, drift, diags
}

// refreshInstance reads one instance from its provider and records what it
// read in inst. It returns the drift it found: an Update when the object
// changed, a Delete when it is gone, nil when it is as stored.
func (e *Engine) refreshInstance(ctx context.Context, r *state.Resource, inst *state.Instance) (*ResourceChange, hcl.Diagnostics) {
	ra := r.Addr()
	addr := ra.Instance(inst.IndexKey)
	pi, schema, d := e.providerForState(ctx, r)
	if d.HasErrors() {
		return nil, d
	}
	cur, err := decodeAttrs(inst.Attributes, schema)
	if err != nil {
		return nil, hcl.Diagnostics{errDiag("Invalid state for "+addr.String(), err, nil)}
	}
	e.hooks.PreRefresh(addr)
	if e.logger.Enabled(ctx, slog.LevelDebug) {
		e.logger.DebugContext(ctx, "refreshing", "address", addr.String())
	}
	resp := pi.p.ReadResource(ctx, providers.ReadRequest{TypeName: r.Type, Address: addr.String(), Lineage: e.stateLineage(), Current: cur})
	e.hooks.PostRefresh(addr, providers.Err(resp.Diagnostics))
	diags := providerDiags(resp.Diagnostics, "Failed to refresh "+addr.String(), e.declRange(ra.String()))
	if diags.HasErrors() {
		return nil, diags
	}
	nv := resp.New
	if nv.IsNull() {
		return &ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(r.Provider), Action: Delete, Before: cur, After: cty.NullVal(schema.ImpliedType()), SensitivePaths: hashedPaths(cur, inst.SensitiveValues)}, diags
	}
	nv, err = convert.Convert(nv, schema.ImpliedType())
	if err != nil {
		return nil, append(diags, errDiag("Provider returned an invalid value for "+addr.String(), err, nil))
	}
	// The state holds no sensitive value, and a provider cannot know one:
	// what it read at a sensitive path is stored as the state had it.
	sens := hashedPaths(nv, inst.SensitiveValues)
	nv, hashes, err := redact(nv, sens, inst.SensitiveValues, e.hashKey)
	if err != nil {
		return nil, append(diags, errDiag("Cannot store state of "+addr.String(), err, nil))
	}
	var drift *ResourceChange
	if !valuesEqual(nv, cur) {
		drift = &ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(r.Provider), Action: Update, Before: cur, After: nv, Sensitive: sensitiveAttrs(schema), SensitivePaths: uniquePaths(append(sens, hashedPaths(cur, inst.SensitiveValues)...))}
	}
	inst.SensitiveValues = hashes
	raw, err := encodeAttrs(nv, schema)
	if err != nil {
		return drift, append(diags, errDiag("Cannot store state of "+addr.String(), err, nil))
	}
	inst.Attributes = raw
	return drift, diags
}
