package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// node kinds in the configuration graph.
const (
	localPrefix  = "local."
	outputPrefix = "output."
)

// resourceInfo is what the planner derives once per configured resource.
type resourceInfo struct {
	cfg     *config.Resource
	addr    ResourceAddr
	provKey string
	prov    *providerInst
	schema  *providers.Schema
	spec    hcldec.Spec
	travs   []hcl.Traversal // references in the body and meta-arguments
	body    []hcl.Traversal // references in the body
	deps    []string        // resource-level direct dependencies
}

// buildGraph resolves providers and schemas for every resource and returns
// the configuration graph of resources, locals and outputs.
func (e *Engine) buildGraph(ctx context.Context) (*graph, map[string]*resourceInfo, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	g := newGraph()
	infos := map[string]*resourceInfo{}
	addrs := make([]string, 0, len(e.cfg.Resources))
	for a := range e.cfg.Resources {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		r := e.cfg.Resources[a]
		key, d := e.providerKeyFor(r)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		pi, d := e.provider(ctx, key)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		schema := pi.resourceSchema(r.Mode, r.Type)
		if schema == nil {
			kind := "resource"
			if r.Mode == config.DataResource {
				kind = "data source"
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported " + kind + " type",
				Detail:   fmt.Sprintf("The provider %q does not support %s type %q.", key, kind, r.Type),
				Subject:  r.TypeRange.Ptr(),
			})
			continue
		}
		info := &resourceInfo{cfg: r, addr: ResourceAddr{Mode: r.Mode, Type: r.Type, Name: r.Name}, provKey: key, prov: pi, schema: schema, spec: schema.DecoderSpec()}
		info.body = hcldec.Variables(r.Config, info.spec)
		infos[a] = info
		g.add(a)
	}
	for name := range e.cfg.Locals {
		g.add(localPrefix + name)
	}
	for name := range e.cfg.Outputs {
		g.add(outputPrefix + name)
	}
	connect := func(from string, travs []hcl.Traversal) {
		for _, t := range travs {
			switch root := t.RootName(); {
			case root == "local":
				if n, ok := attrName(t, 1); ok {
					if _, ok := e.cfg.Locals[n]; ok {
						g.connect(from, localPrefix+n)
					}
				}
			default:
				for _, a := range refAddrs([]hcl.Traversal{t}, e.managed) {
					if _, ok := infos[a]; ok {
						g.connect(from, a)
					} else if _, ok := e.cfg.Resources[a]; !ok {
						diags = append(diags, undeclared(t, "resource", a))
					}
				}
			}
		}
	}
	for a, info := range infos {
		travs := append([]hcl.Traversal{}, info.body...)
		if info.cfg.Count != nil {
			travs = append(travs, info.cfg.Count.Variables()...)
		}
		if info.cfg.ForEach != nil {
			travs = append(travs, info.cfg.ForEach.Variables()...)
		}
		travs = append(travs, info.cfg.DependsOn...)
		info.travs = travs
		connect(a, travs)
	}
	for name, l := range e.cfg.Locals {
		connect(localPrefix+name, l.Expr.Variables())
	}
	for name, o := range e.cfg.Outputs {
		travs := append(o.Expr.Variables(), o.DependsOn...)
		connect(outputPrefix+name, travs)
	}
	// Direct resource dependencies, seen through locals.
	for a, info := range infos {
		info.deps = resourceDeps(g, a, infos)
	}
	return g, infos, diags
}

// resourceDeps returns the resources v depends on directly or through local
// values only.
func resourceDeps(g *graph, v string, infos map[string]*resourceInfo) []string {
	seen := map[string]bool{}
	set := map[string]struct{}{}
	var visit func(string)
	visit = func(x string) {
		for _, d := range g.dependencies(x) {
			if seen[d] {
				continue
			}
			seen[d] = true
			if _, ok := infos[d]; ok {
				set[d] = struct{}{}
			} else if strings.HasPrefix(d, localPrefix) {
				visit(d)
			}
		}
	}
	visit(v)
	var out []string
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// Plan computes a plan against prior, the stored state (nil when none).
func (e *Engine) Plan(ctx context.Context, prior *state.State, opts PlanOptions) (*Plan, hcl.Diagnostics) {
	if prior == nil {
		prior = state.New()
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = 10
	}
	p := &Plan{Mode: opts.Mode, Prior: prior, Options: opts}
	g, infos, diags := e.buildGraph(ctx)
	if diags.HasErrors() {
		return p, diags
	}
	order, err := g.topo()
	if err != nil {
		ce := err.(*CycleError)
		return p, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cycle in configuration",
			Detail:   fmt.Sprintf("These objects refer to each other in a cycle: %s.", strings.Join(ce.Cycle, ", ")),
			Subject:  e.declRange(ce.Cycle[0]),
		})
	}
	refreshed, drift, d := e.refresh(ctx, prior, infos, opts)
	diags = append(diags, d...)
	p.Refreshed = refreshed
	p.Drift = drift
	if diags.HasErrors() {
		return p, diags
	}
	w := &planWalk{e: e, p: p, infos: infos, sc: newScope(e.cfg, e.opts.Vars, e.opts.Functions, e.managed), live: newLiveState(refreshed), changed: map[string]bool{}}
	var mu sync.Mutex
	(&walker{
		order: order,
		deps:  g.dependencies,
		par:   runtime.GOMAXPROCS(0),
		stop:  func() bool { return ctx.Err() != nil },
		panicked: func(v string, r any, stack []byte) {
			mu.Lock()
			diags = append(diags, panicDiag(v, r, stack))
			mu.Unlock()
		},
		run: func(v string) bool {
			info, ok := infos[v]
			if !ok {
				return true
			}
			d := w.resource(ctx, info)
			mu.Lock()
			diags = append(diags, d...)
			mu.Unlock()
			return !d.HasErrors()
		},
	}).walk()
	if err := ctx.Err(); err != nil {
		return p, append(diags, errDiag("Planning interrupted", err, nil))
	}
	diags = append(diags, w.orphans(ctx)...)
	if diags.HasErrors() {
		return p, diags
	}
	switch opts.Mode {
	case DestroyMode:
		w.destroyAll()
	case RefreshOnlyMode:
		p.Changes = nil
	}
	d = w.applyTargets(g)
	diags = append(diags, d...)
	diags = append(diags, w.checkPreventDestroy()...)
	sort.Slice(p.Changes, func(i, j int) bool { return p.Changes[i].Addr.String() < p.Changes[j].Addr.String() })
	p.OutputChanges, d = e.planOutputs(w.sc, refreshed, opts.Mode == DestroyMode)
	diags = append(diags, d...)
	p.Complete = !diags.HasErrors()
	return p, diags
}

func (e *Engine) declRange(v string) *hcl.Range {
	if r, ok := e.cfg.Resources[v]; ok {
		return r.DeclRange.Ptr()
	}
	if l, ok := e.cfg.Locals[strings.TrimPrefix(v, localPrefix)]; ok {
		return l.DeclRange.Ptr()
	}
	if o, ok := e.cfg.Outputs[strings.TrimPrefix(v, outputPrefix)]; ok {
		return o.DeclRange.Ptr()
	}
	return nil
}

// refresh reads every managed instance of prior from its provider.
func (e *Engine) refresh(ctx context.Context, prior *state.State, infos map[string]*resourceInfo, opts PlanOptions) (*state.State, []*ResourceChange, hcl.Diagnostics) {
	refreshed := prior.DeepCopy()
	if !opts.Refresh {
		return refreshed, nil, nil
	}
	type job struct {
		res  *state.Resource
		inst *state.Instance
	}
	var jobs []job
	for _, r := range refreshed.Resources {
		if r.Mode != state.ModeManaged {
			continue
		}
		for _, inst := range r.Instances {
			jobs = append(jobs, job{r, inst})
		}
	}
	var (
		mu    sync.Mutex
		diags hcl.Diagnostics
		drift []*ResourceChange
		gone  = map[*state.Instance]bool{}
		wg    sync.WaitGroup
		sem   = make(chan struct{}, opts.Parallelism)
	)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func(j job) {
			defer wg.Done()
			defer func() { <-sem }()
			ra := stateResourceAddr(j.res)
			addr := ra.Instance(normalizeKey(j.inst.IndexKey))
			pi, schema, d := e.providerForState(ctx, j.res)
			if d.HasErrors() {
				mu.Lock()
				diags = append(diags, d...)
				mu.Unlock()
				return
			}
			cur, err := decodeAttrs(j.inst.Attributes, schema)
			if err != nil {
				mu.Lock()
				diags = append(diags, errDiag("Invalid state for "+addr.String(), err, nil))
				mu.Unlock()
				return
			}
			e.hooks.PreRefresh(addr)
			resp, err := pi.p.ReadResource(ctx, providers.ReadRequest{TypeName: j.res.Type, Address: addr.String(), Current: cur})
			e.hooks.PostRefresh(addr, err)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				diags = append(diags, errDiag("Failed to refresh "+addr.String(), err, e.declRange(ra.String())))
				return
			}
			nv := resp.New
			if nv.IsNull() {
				gone[j.inst] = true
				drift = append(drift, &ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(j.res.Provider), Action: Delete, Before: cur, After: cty.NullVal(schema.ImpliedType())})
				return
			}
			nv, err = convert.Convert(nv, schema.ImpliedType())
			if err != nil {
				diags = append(diags, errDiag("Provider returned an invalid value for "+addr.String(), err, nil))
				return
			}
			if !valuesEqual(nv, cur) {
				drift = append(drift, &ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(j.res.Provider), Action: Update, Before: cur, After: nv, Sensitive: sensitiveAttrs(schema)})
			}
			raw, err := encodeAttrs(nv, schema)
			if err != nil {
				diags = append(diags, errDiag("Cannot store state of "+addr.String(), err, nil))
				return
			}
			j.inst.Attributes = raw
		}(j)
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
	sort.Slice(drift, func(i, j int) bool { return drift[i].Addr.String() < drift[j].Addr.String() })
	return refreshed, drift, diags
}

// providerKeyOfState turns a state provider string (provider.local.alias)
// into a provider key (local.alias).
func providerKeyOfState(s string) string { return strings.TrimPrefix(s, "provider.") }

// providerForState returns the provider and schema for a resource recorded
// in state.
func (e *Engine) providerForState(ctx context.Context, r *state.Resource) (*providerInst, *providers.Schema, hcl.Diagnostics) {
	pi, d := e.provider(ctx, providerKeyOfState(r.Provider))
	if d.HasErrors() {
		return nil, nil, d
	}
	m := config.ManagedResource
	if r.Mode == state.ModeData {
		m = config.DataResource
	}
	schema := pi.resourceSchema(m, r.Type)
	if schema == nil {
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported resource type in state", Detail: fmt.Sprintf("The provider %q no longer supports %q, recorded in state.", pi.key, r.Type)}}
	}
	return pi, schema, nil
}

func decodeAttrs(raw json.RawMessage, schema *providers.Schema) (cty.Value, error) {
	ty := schema.ImpliedType()
	if len(raw) == 0 || string(raw) == "null" {
		return cty.NullVal(ty), nil
	}
	v, err := unmarshalAttrs(raw, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("attributes do not match the schema: %w", err)
	}
	return v, nil
}

func encodeAttrs(v cty.Value, schema *providers.Schema) (json.RawMessage, error) {
	v, err := convert.Convert(v, schema.ImpliedType())
	if err != nil {
		return nil, err
	}
	b, err := ctyjson.Marshal(v, schema.ImpliedType())
	if err != nil {
		return nil, err
	}
	return b, nil
}

func sensitiveAttrs(s *providers.Schema) []string {
	var out []string
	for n, a := range s.Attributes {
		if a.Sensitive {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

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
		w.changed[c.Addr.Resource.String()] = true
	}
	w.mu.Unlock()
}

// expand evaluates count or for_each.
func (w *planWalk) expand(info *resourceInfo) (*expansion, map[string]cty.Value, hcl.Diagnostics) {
	r := info.cfg
	switch {
	case r.Count != nil:
		v, diags := w.sc.evalExpr(r.Count)
		if diags.HasErrors() {
			return nil, nil, diags
		}
		n, err := wholeNumber(v)
		if err != nil {
			return nil, nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid count argument", Detail: err.Error(), Subject: r.Count.Range().Ptr()})
		}
		keys := make([]any, n)
		for i := range keys {
			keys[i] = i
		}
		return &expansion{mode: expandCount, keys: keys}, nil, diags
	case r.ForEach != nil:
		v, diags := w.sc.evalExpr(r.ForEach)
		if diags.HasErrors() {
			return nil, nil, diags
		}
		m, err := forEachMap(v)
		if err != nil {
			return nil, nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid for_each argument", Detail: err.Error(), Subject: r.ForEach.Range().Ptr()})
		}
		keys := make([]any, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].(string) < keys[j].(string) })
		return &expansion{mode: expandForEach, keys: keys}, m, diags
	}
	return &expansion{mode: expandSingle, keys: []any{nil}}, nil, nil
}

func wholeNumber(v cty.Value) (int, error) {
	if !v.IsKnown() {
		return 0, fmt.Errorf("the count value depends on values that cannot be determined until apply, so pond cannot predict how many instances will be created")
	}
	if v.IsNull() {
		return 0, fmt.Errorf("count must not be null")
	}
	nv, err := convert.Convert(v, cty.Number)
	if err != nil {
		return 0, fmt.Errorf("count must be a whole number: %s", err)
	}
	bf := nv.AsBigFloat()
	if !bf.IsInt() {
		return 0, fmt.Errorf("count must be a whole number, not %s", bf.Text('g', -1))
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i < 0 || i > 1<<20 {
		return 0, fmt.Errorf("count must be between 0 and %d, not %s", 1<<20, bf.Text('g', -1))
	}
	return int(i), nil
}

func forEachMap(v cty.Value) (map[string]cty.Value, error) {
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("the for_each value depends on values that cannot be determined until apply, so pond cannot predict how many instances will be created")
	}
	if v.IsNull() {
		return nil, fmt.Errorf("for_each must not be null")
	}
	ty := v.Type()
	m := map[string]cty.Value{}
	switch {
	case ty.IsMapType() || ty.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			m[k.AsString()] = ev
		}
	case ty.IsSetType():
		if !ty.ElementType().Equals(cty.String) {
			sv, err := convert.Convert(v, cty.Set(cty.String))
			if err != nil {
				return nil, fmt.Errorf("for_each takes a map or a set of strings, not %s", ty.FriendlyName())
			}
			v = sv
		}
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			if ev.IsNull() {
				return nil, fmt.Errorf("for_each set must not contain null")
			}
			m[ev.AsString()] = ev
		}
	default:
		return nil, fmt.Errorf("for_each takes a map or a set of strings, not %s; use toset() to convert a list", ty.FriendlyName())
	}
	return m, nil
}

// evalInstanceConfig evaluates the configuration body of one instance.
func evalInstanceConfig(sc *scope, info *resourceInfo, key any, each map[string]cty.Value) (cty.Value, hcl.Diagnostics) {
	inst := &instanceData{}
	switch k := key.(type) {
	case int:
		inst.countIndex = cty.NumberIntVal(int64(k))
	case string:
		inst.eachKey = cty.StringVal(k)
		inst.eachValue = each[k]
		if inst.eachValue == cty.NilVal {
			inst.eachValue = cty.DynamicVal
		}
	}
	ectx, diags := sc.evalContext(info.body, inst)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	v, d := hcldec.Decode(info.cfg.Config, info.spec, ectx)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	// Computed-only attributes are absent from the decoder spec; fill them
	// in as null so the value has the implied type.
	return fillObject(v, info.schema), diags
}

// fillObject adds null values for the schema attributes missing from v.
func fillObject(v cty.Value, s *providers.Schema) cty.Value {
	ty := s.ImpliedType()
	if v.IsNull() {
		return cty.NullVal(ty)
	}
	if !v.IsKnown() {
		return cty.UnknownVal(ty)
	}
	vals := map[string]cty.Value{}
	if v.Type().Equals(ty) {
		return v
	}
	for name, aty := range ty.AttributeTypes() {
		if v.Type().IsObjectType() && v.Type().HasAttribute(name) {
			av := v.GetAttr(name)
			if av.Type().Equals(aty) {
				vals[name] = av
				continue
			}
			if cv, err := convert.Convert(av, aty); err == nil {
				vals[name] = cv
				continue
			}
			vals[name] = av
			continue
		}
		vals[name] = cty.NullVal(aty)
	}
	return cty.ObjectVal(vals)
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
		ks := keyString(key)
		seen[ks] = true
		cfgVal, d := evalInstanceConfig(w.sc, info, key, each)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if info.addr.Mode == config.DataResource {
			diags = append(diags, w.dataInstance(ctx, info, addr, cfgVal)...)
			continue
		}
		var priorInst *state.Instance
		if prior != nil {
			priorInst = prior[ks]
		}
		c, d := w.e.planInstance(ctx, info, addr, priorInst, cfgVal, w.p.Options)
		diags = append(diags, d...)
		if d.HasErrors() || c == nil {
			continue
		}
		w.add(c)
		if c.Action == Delete {
			w.sc.setInstance(addr, c.Before)
		} else {
			w.sc.setInstance(addr, c.After)
		}
	}
	// Instances in state whose key is no longer configured.
	for ks, inst := range prior {
		if seen[ks] || info.addr.Mode == config.DataResource {
			continue
		}
		addr := info.addr.Instance(normalizeKey(inst.IndexKey))
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
		w.add(&ResourceChange{Addr: addr, ProviderKey: info.provKey, Action: Delete, Before: before, After: cty.NullVal(info.schema.ImpliedType()), Reason: reason, Deps: inst.Dependencies, CreateBeforeDestroy: inst.CreateBeforeDestroy, Sensitive: sensitiveAttrs(info.schema)})
	}
	return diags
}

// dataInstance reads a data source now when its configuration is known and
// nothing it depends on changes; otherwise it plans the read for apply.
func (w *planWalk) dataInstance(ctx context.Context, info *resourceInfo, addr InstanceAddr, cfgVal cty.Value) hcl.Diagnostics {
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
			w.add(&ResourceChange{Addr: addr, ProviderKey: info.provKey, Action: Read, Before: cty.NullVal(ty), After: after, Deps: info.deps, Reason: "because its configuration depends on values not known until apply"})
		}
		w.sc.setInstance(addr, after)
		return nil
	}
	v, err := info.prov.p.ReadDataSource(ctx, providers.ReadDataRequest{TypeName: info.cfg.Type, Address: addr.String(), Config: cfgVal})
	if err != nil {
		return hcl.Diagnostics{errDiag("Failed to read "+addr.String(), err, info.cfg.DeclRange.Ptr())}
	}
	v, err = convert.Convert(v, ty)
	if err != nil {
		return hcl.Diagnostics{errDiag("Provider returned an invalid value for "+addr.String(), err, info.cfg.DeclRange.Ptr())}
	}
	w.sc.setInstance(addr, v)
	if err := w.live.set(info.addr, info.provKey, addr.Key, v, info.schema, info.deps, false); err != nil {
		return hcl.Diagnostics{errDiag("Cannot store "+addr.String(), err, nil)}
	}
	return nil
}

// planInstance plans one managed instance.
func (e *Engine) planInstance(ctx context.Context, info *resourceInfo, addr InstanceAddr, priorInst *state.Instance, cfgVal cty.Value, opts PlanOptions) (*ResourceChange, hcl.Diagnostics) {
	schema := info.schema
	ty := schema.ImpliedType()
	prior := cty.NullVal(ty)
	tainted := false
	if priorInst != nil {
		v, err := decodeAttrs(priorInst.Attributes, schema)
		if err != nil {
			return nil, hcl.Diagnostics{errDiag("Invalid state for "+addr.String(), err, nil)}
		}
		prior = v
		tainted = priorInst.Status == "tainted"
	}
	rangePtr := info.cfg.DeclRange.Ptr()
	if err := info.prov.p.ValidateResourceConfig(ctx, info.cfg.Type, cfgVal); err != nil {
		return nil, hcl.Diagnostics{errDiag("Invalid "+info.cfg.Type+" configuration", err, rangePtr)}
	}
	cfgVal = ignoreChanges(cfgVal, prior, info.cfg.Lifecycle)
	proposed := proposedNew(schema, prior, cfgVal)
	resp, err := info.prov.p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: info.cfg.Type, Address: addr.String(), Prior: prior, Config: cfgVal, ProposedNew: proposed})
	if err != nil {
		return nil, hcl.Diagnostics{errDiag("Failed to plan "+addr.String(), err, rangePtr)}
	}
	planned, err := convert.Convert(resp.Planned, ty)
	if err != nil {
		return nil, hcl.Diagnostics{errDiag("Provider produced an invalid plan for "+addr.String(), err, rangePtr)}
	}
	c := &ResourceChange{Addr: addr, ProviderKey: info.provKey, Before: prior, After: planned, Deps: info.deps, CreateBeforeDestroy: info.cfg.Lifecycle.CreateBeforeDestroy, Sensitive: sensitiveAttrs(schema)}
	if prior.IsNull() {
		c.Action = Create
		return c, nil
	}
	replace := append([]cty.Path{}, resp.RequiresReplace...)
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
		resp2, err := info.prov.p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: info.cfg.Type, Address: addr.String(), Prior: cty.NullVal(ty), Config: cfgVal, ProposedNew: proposedNew(schema, cty.NullVal(ty), cfgVal)})
		if err != nil {
			return nil, hcl.Diagnostics{errDiag("Failed to plan "+addr.String(), err, rangePtr)}
		}
		if c.After, err = convert.Convert(resp2.Planned, ty); err != nil {
			return nil, hcl.Diagnostics{errDiag("Provider produced an invalid plan for "+addr.String(), err, rangePtr)}
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
	return c, nil
}

func containsAddr(list []string, addr InstanceAddr) bool {
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

// ignoreChanges replaces the ignored attributes of cfg by their prior values.
func ignoreChanges(cfg, prior cty.Value, lc config.Lifecycle) cty.Value {
	if prior.IsNull() || cfg.IsNull() || !cfg.IsKnown() || (!lc.IgnoreAllChanges && len(lc.IgnoreChanges) == 0) {
		return cfg
	}
	ignored := map[string]bool{}
	for _, t := range lc.IgnoreChanges {
		if len(t) == 0 {
			continue
		}
		switch s := t[0].(type) {
		case hcl.TraverseRoot:
			ignored[s.Name] = true
		case hcl.TraverseAttr:
			ignored[s.Name] = true
		}
	}
	vals := cfg.AsValueMap()
	for name := range vals {
		if lc.IgnoreAllChanges || ignored[name] {
			vals[name] = prior.GetAttr(name)
		}
	}
	return cty.ObjectVal(vals)
}

// orphans plans the deletion of resources recorded in state but no longer in
// the configuration.
func (w *planWalk) orphans(ctx context.Context) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, r := range w.p.Refreshed.Resources {
		ra := stateResourceAddr(r)
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
		for _, inst := range r.Instances {
			addr := ra.Instance(normalizeKey(inst.IndexKey))
			before, err := decodeAttrs(inst.Attributes, schema)
			if err != nil {
				diags = append(diags, errDiag("Invalid state for "+addr.String(), err, nil))
				continue
			}
			w.add(&ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(r.Provider), Action: Delete, Before: before, After: cty.NullVal(schema.ImpliedType()), Reason: "because it is not in the configuration", Deps: inst.Dependencies, CreateBeforeDestroy: inst.CreateBeforeDestroy, Sensitive: sensitiveAttrs(schema)})
		}
	}
	return diags
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
		c.After = cty.NullVal(c.Before.Type())
		c.Action = Delete
		c.Reason = ""
		out = append(out, c)
	}
	w.p.Changes = out
}

// applyTargets keeps only the changes -target asks for: the targets and what
// they depend on (or, when destroying, what depends on them).
func (w *planWalk) applyTargets(g *graph) hcl.Diagnostics {
	targets := w.p.Options.Targets
	if len(targets) == 0 {
		return nil
	}
	var diags hcl.Diagnostics
	keep := map[string]bool{} // resource addresses, or instance addresses
	for _, t := range targets {
		found := false
		for _, c := range w.p.Changes {
			if c.Addr.String() == t || c.Addr.Resource.String() == t {
				found = true
				keep[c.Addr.String()] = true
			}
		}
		if _, ok := w.e.cfg.Resources[t]; ok {
			found = true
		}
		if !found {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Target not found", Detail: fmt.Sprintf("-target %s matches nothing in the configuration or state.", t)})
		}
	}
	// Expand along dependencies at resource level.
	resKeep := map[string]bool{}
	for _, c := range w.p.Changes {
		if keep[c.Addr.String()] {
			resKeep[c.Addr.Resource.String()] = true
		}
	}
	for _, t := range targets {
		if _, ok := w.e.cfg.Resources[t]; ok {
			resKeep[t] = true
		}
	}
	if w.p.Mode == DestroyMode {
		changed := true
		for changed {
			changed = false
			for _, c := range w.p.Changes {
				a := c.Addr.Resource.String()
				if resKeep[a] {
					continue
				}
				for _, d := range c.Deps {
					if resKeep[d] {
						resKeep[a] = true
						changed = true
						break
					}
				}
			}
		}
	} else {
		var visit func(string)
		visit = func(a string) {
			for _, d := range resourceDeps(g, a, w.infos) {
				if !resKeep[d] {
					resKeep[d] = true
					visit(d)
				}
			}
		}
		for a := range resKeep {
			visit(a)
		}
	}
	var out []*ResourceChange
	for _, c := range w.p.Changes {
		ra := c.Addr.Resource.String()
		if keep[c.Addr.String()] || (resKeep[ra] && !targetsInstanceOnly(targets, ra)) {
			out = append(out, c)
		}
	}
	w.p.Changes = out
	return diags
}

// targetsInstanceOnly reports whether every target naming ra's instances
// names a single instance rather than the whole resource.
func targetsInstanceOnly(targets []string, ra string) bool {
	named := false
	for _, t := range targets {
		if t == ra {
			return false
		}
		if strings.HasPrefix(t, ra+"[") {
			named = true
		}
	}
	return named
}

// checkPreventDestroy refuses plans that destroy a protected instance.
func (w *planWalk) checkPreventDestroy() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, c := range w.p.Changes {
		if c.Action != Delete && !c.Action.IsReplace() {
			continue
		}
		r, ok := w.e.cfg.Resources[c.Addr.Resource.String()]
		if !ok || !r.Lifecycle.PreventDestroy {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Instance cannot be destroyed",
			Detail:   fmt.Sprintf("%s has lifecycle.prevent_destroy set, but the plan calls for it to be destroyed. To avoid this error and continue with the plan, either disable lifecycle.prevent_destroy or reduce the scope of the plan using -target.", c.Addr),
			Subject:  r.DeclRange.Ptr(),
		})
	}
	return diags
}

// planOutputs evaluates the root outputs against the planned values.
func (e *Engine) planOutputs(sc *scope, prior *state.State, destroy bool) ([]*OutputChange, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var out []*OutputChange
	names := make([]string, 0, len(e.cfg.Outputs))
	for n := range e.cfg.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := e.cfg.Outputs[n]
		before := cty.NullVal(cty.DynamicPseudoType)
		if po, ok := prior.Outputs[n]; ok && po != nil {
			if v, err := decodeOutput(po); err == nil {
				before = v
			}
		}
		oc := &OutputChange{Name: n, Before: before, Sensitive: o.Sensitive}
		if destroy {
			oc.After = cty.NullVal(cty.DynamicPseudoType)
		} else {
			v, d := sc.evalExpr(o.Expr)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			oc.After = v
		}
		oc.Action = outputAction(oc.Before, oc.After)
		out = append(out, oc)
	}
	// Outputs in state but no longer configured.
	for n, po := range prior.Outputs {
		if _, ok := e.cfg.Outputs[n]; ok {
			continue
		}
		before, _ := decodeOutput(po)
		out = append(out, &OutputChange{Name: n, Action: Delete, Before: before, After: cty.NullVal(cty.DynamicPseudoType), Sensitive: po.Sensitive})
	}
	return out, diags
}

func outputAction(before, after cty.Value) Action {
	switch {
	case before.IsNull() && after.IsNull():
		return NoOp
	case before.IsNull():
		return Create
	case after.IsNull():
		return Delete
	}
	if eq := before.Equals(after); eq.IsKnown() && eq.True() {
		return NoOp
	}
	return Update
}

func decodeOutput(o *state.Output) (cty.Value, error) {
	var sv ctyjson.SimpleJSONValue
	ty, err := ctyjson.UnmarshalType(o.Type)
	if err != nil {
		if err := sv.UnmarshalJSON(o.Value); err != nil {
			return cty.NilVal, err
		}
		return sv.Value, nil
	}
	return ctyjson.Unmarshal(o.Value, ty)
}

func encodeOutput(v cty.Value, sensitive bool) (*state.Output, error) {
	ty := v.Type()
	tb, err := ctyjson.MarshalType(ty)
	if err != nil {
		return nil, err
	}
	vb, err := ctyjson.Marshal(v, ty)
	if err != nil {
		return nil, err
	}
	return &state.Output{Value: vb, Type: tb, Sensitive: sensitive}, nil
}

// valuesEqual reports whether two values are known to be equal. RawEquals
// decides most cases cheaply; Equals handles what it cannot (numbers of
// different precision, say).
func valuesEqual(a, b cty.Value) bool {
	if a.RawEquals(b) {
		return true
	}
	eq := a.Equals(b)
	return eq.IsKnown() && eq.True()
}

// panicDiag reports a panic while planning or applying v.
func panicDiag(v string, r any, stack []byte) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Internal error while handling " + v,
		Detail:   fmt.Sprintf("%v\n\nThis is a bug in pond or one of its providers; please report it with this trace:\n\n%s", r, stack),
	}
}
