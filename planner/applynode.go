package planner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/providers"
)

// nodeRun is one apply node being carried out.
type nodeRun struct {
	e      *Engine
	n      *applyNode
	info   *resourceInfo // nil when the instance is no longer configured
	pi     *providerInst
	schema *providers.Schema
	action Action
	start  time.Time
	live   *liveState
	// mu is held while the node records its result in live.
	mu *sync.Mutex
	// diags are the warnings of the provider calls made so far.
	diags hcl.Diagnostics
}

// applyNode carries out one node. It reports whether it succeeded.
func (e *Engine) applyNode(ctx context.Context, n *applyNode, infos map[string]*resourceInfo, sc *scope, live *liveState, mu *sync.Mutex) (bool, hcl.Diagnostics) {
	r := &nodeRun{e: e, n: n, info: infos[n.change.Addr.ResourceAddress().String()], action: n.change.Action, live: live, mu: mu}
	if n.destroy {
		r.action = Delete
	}
	if d := r.resolveProvider(ctx); d.HasErrors() {
		return false, d
	}
	r.start = time.Now()
	e.logger.Debug("applying", "address", n.change.Addr.String(), "action", r.action.String())
	e.hooks.PreApply(n.change.Addr, r.action)
	if n.destroy {
		return r.destroy(ctx)
	}
	if r.info == nil {
		return r.fail("Cannot apply "+n.change.Addr.String(), errors.New("resource is not in the configuration"))
	}
	cfgVal, ok, d := r.config(sc)
	if !ok {
		return false, d
	}
	if n.change.Action == Read {
		return r.read(ctx, sc, cfgVal)
	}
	return r.createOrUpdate(ctx, sc, cfgVal)
}

// resolveProvider finds the node's provider and schema: the configured
// resource's, or for an instance no longer configured, the one its state
// records.
func (r *nodeRun) resolveProvider(ctx context.Context) hcl.Diagnostics {
	if r.info != nil {
		r.pi, r.schema = r.info.prov, r.info.schema
		return nil
	}
	addr := r.n.change.Addr
	r.mu.Lock()
	sr := r.live.resource(addr.ResourceAddress())
	r.mu.Unlock()
	if sr == nil {
		return hcl.Diagnostics{errDiag("Cannot apply "+addr.String(), errors.New("resource is neither configured nor in state"), nil)}
	}
	var d hcl.Diagnostics
	r.pi, r.schema, d = r.e.providerForState(ctx, sr)
	return d
}

func (r *nodeRun) progress(msg string) { r.e.hooks.Progress(r.n.change.Addr, r.action, msg) }

// subject is where the node's diagnostics point: the resource's block, if
// it is still configured.
func (r *nodeRun) subject() *hcl.Range {
	if r.info == nil {
		return nil
	}
	return r.info.cfg.DeclRange.Ptr()
}

// fail reports the node's failure to the hooks and as a diagnostic at the
// resource's block.
func (r *nodeRun) fail(summary string, err error) (bool, hcl.Diagnostics) {
	return r.failWith(hcl.Diagnostics{errDiag(summary, err, r.subject())})
}

// failWith reports the node's failure, with diags holding its errors.
func (r *nodeRun) failWith(diags hcl.Diagnostics) (bool, hcl.Diagnostics) {
	err := providers.Err(diags)
	r.e.logger.Debug("apply failed", "address", r.n.change.Addr.String(), "action", r.action.String(), "elapsed", time.Since(r.start), "err", err)
	r.e.hooks.PostApply(r.n.change.Addr, r.action, "", time.Since(r.start), err)
	return false, append(r.diags, diags...)
}

// done reports the node's success to the hooks, with the warnings gathered.
func (r *nodeRun) done(id string) (bool, hcl.Diagnostics) {
	r.e.logger.Debug("applied", "address", r.n.change.Addr.String(), "action", r.action.String(), "elapsed", time.Since(r.start), "id", id)
	r.e.hooks.PostApply(r.n.change.Addr, r.action, id, time.Since(r.start), nil)
	return true, r.diags
}

// providerDiags completes the diagnostics of one of the node's provider
// calls, keeps their warnings, and reports whether they hold an error.
func (r *nodeRun) providerDiags(ds hcl.Diagnostics, summary string) (hcl.Diagnostics, bool) {
	d := providerDiags(ds, summary, r.subject())
	if r.info != nil {
		// A diagnostic about one argument is placed at it, as in plan.
		d = r.e.atProviderAttributes(atAttributes(d, r.info.cfg.Config), r.info.provKey)
	}
	if d.HasErrors() {
		return d, true
	}
	r.diags = appendNew(r.diags, d)
	return nil, false
}

// config evaluates the instance's configuration with the values known now.
func (r *nodeRun) config(sc *scope) (cty.Value, bool, hcl.Diagnostics) {
	addr := r.n.change.Addr
	var each map[string]cty.Value
	if r.info.cfg.ForEach != nil {
		v, d := sc.evalExpr(r.info.cfg.ForEach)
		if d.HasErrors() {
			return cty.NilVal, false, d
		}
		m, err := forEachMap(v)
		if err != nil {
			_, d := r.fail("Invalid for_each argument", err)
			return cty.NilVal, false, d
		}
		each = m
	}
	cfgVal, d := evalInstanceConfig(sc, r.info, addr.Key, each)
	if d.HasErrors() {
		r.e.hooks.PostApply(addr, r.action, "", time.Since(r.start), errors.New(d.Error()))
		return cty.NilVal, false, d
	}
	return cfgVal, true, nil
}

// destroy deletes the instance, or the old object of a replacement.
func (r *nodeRun) destroy(ctx context.Context) (bool, hcl.Diagnostics) {
	c := r.n.change
	addr, ra := c.Addr, c.Addr.ResourceAddress()
	resp := r.pi.p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ra.Type, Address: addr.String(), Lineage: r.e.stateLineage(), Prior: c.Before, Planned: cty.NullVal(r.schema.ImpliedType()), Config: cty.NullVal(r.schema.ImpliedType()), Progress: r.progress})
	if d, failed := r.providerDiags(resp.Diagnostics, "Failed to destroy "+addr.String()); failed {
		if resp.New != cty.NilVal && !resp.New.IsNull() {
			r.mu.Lock()
			_ = r.live.set(ra, providerKeyOfState("provider."+c.ProviderKey), addr.Key, markSensitive(resp.New, c.SensitivePaths), r.schema, c.Deps, c.CreateBeforeDestroy)
			r.mu.Unlock()
		}
		return r.failWith(d)
	}
	r.mu.Lock()
	if !c.Action.IsReplace() || c.Action == DeleteThenCreate {
		r.live.remove(ra, addr.Key)
	}
	r.mu.Unlock()
	return r.done("")
}

// read reads a data source whose read was deferred to apply.
func (r *nodeRun) read(ctx context.Context, sc *scope, cfgVal cty.Value) (bool, hcl.Diagnostics) {
	addr, ra := r.n.change.Addr, r.n.change.Addr.ResourceAddress()
	cfgVal, sens := unmarkSensitive(cfgVal)
	resp := r.pi.p.ReadDataSource(ctx, providers.ReadDataRequest{TypeName: ra.Type, Address: addr.String(), Config: cfgVal})
	if d, failed := r.providerDiags(resp.Diagnostics, "Failed to read "+addr.String()); failed {
		return r.failWith(d)
	}
	v, err := convert.Convert(resp.Value, r.schema.ImpliedType())
	if err != nil {
		return r.fail("Provider returned an invalid value for "+addr.String(), err)
	}
	v = markSensitive(v, sens)
	sc.setInstance(addr, v)
	r.mu.Lock()
	err = r.live.set(ra, r.info.provKey, addr.Key, v, r.schema, r.info.deps, false)
	r.mu.Unlock()
	if err != nil {
		return r.fail("Cannot store "+addr.String(), err)
	}
	return r.done("")
}

// createOrUpdate plans the instance again with the values known now and
// applies that plan: a create (also the new object of a replacement) or an
// update in place.
func (r *nodeRun) createOrUpdate(ctx context.Context, sc *scope, cfgVal cty.Value) (bool, hcl.Diagnostics) {
	c, info, schema := r.n.change, r.info, r.schema
	addr, ra := c.Addr, c.Addr.ResourceAddress()
	prior := c.Before
	if c.Action.IsReplace() {
		prior = cty.NullVal(schema.ImpliedType())
	}
	// The provider gets the configuration without marks and the paths of
	// its sensitive values; what it returns is marked again at those paths
	// before it is seen or stored.
	cfgVal, sens := unmarkSensitive(cfgVal)
	cfgVal = ignoreChanges(cfgVal, prior, info.cfg.Lifecycle)
	presp := r.pi.p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: ra.Type, Address: addr.String(), Lineage: r.e.stateLineage(), Prior: prior, Config: cfgVal, ProposedNew: proposedNew(schema, prior, cfgVal), Sensitive: sens})
	if d, failed := r.providerDiags(presp.Diagnostics, "Failed to plan "+addr.String()); failed {
		return r.failWith(d)
	}
	resp := r.pi.p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ra.Type, Address: addr.String(), Lineage: r.e.stateLineage(), Prior: prior, Planned: presp.Planned, Config: cfgVal, Sensitive: sens, Progress: r.progress})
	if d, failed := r.providerDiags(resp.Diagnostics, "Failed to "+verb(r.action)+" "+addr.String()); failed {
		if resp.New != cty.NilVal && !resp.New.IsNull() {
			// Keep what was partly made, to be replaced next time.
			r.mu.Lock()
			if serr := r.live.set(ra, info.provKey, addr.Key, markSensitive(resp.New, sens), schema, info.deps, info.cfg.Lifecycle.CreateBeforeDestroy); serr == nil {
				r.live.markTainted(ra, addr.Key)
			}
			r.mu.Unlock()
		}
		return r.failWith(d)
	}
	nv, err := convert.Convert(resp.New, schema.ImpliedType())
	if err != nil {
		return r.fail("Provider returned an invalid value for "+addr.String(), err)
	}
	nv = markSensitive(nv, sens)
	sc.setInstance(addr, nv)
	r.mu.Lock()
	err = r.live.set(ra, info.provKey, addr.Key, nv, schema, info.deps, info.cfg.Lifecycle.CreateBeforeDestroy)
	r.mu.Unlock()
	if err != nil {
		return r.fail("Cannot store "+addr.String(), err)
	}
	return r.done(idOf(unmarkForProvider(nv)))
}
