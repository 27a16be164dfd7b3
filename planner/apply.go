package planner

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// StateWriter persists intermediate and final states during apply.
type StateWriter interface {
	WriteState(ctx context.Context, s *state.State) error
}

// ApplyOptions control an apply.
type ApplyOptions struct {
	// Stop, when closed, asks apply to start nothing new; work in flight
	// finishes and the state is saved.
	Stop <-chan struct{}
	// Writer persists states as apply goes; may be nil.
	Writer StateWriter
	// PersistInterval bounds how often intermediate states are written.
	PersistInterval time.Duration
}

// ApplyResult summarises an apply.
type ApplyResult struct {
	Added, Changed, Destroyed int
	// State is the final state, as written.
	State *state.State
	// Stopped is true when apply was interrupted before finishing.
	Stopped bool
	// NotAttempted lists changes skipped because a dependency failed or
	// apply was interrupted.
	NotAttempted []string
}

// Apply makes the changes of plan p. The plan must have been made by this
// engine. Apply returns the final state even when some changes failed.
func (e *Engine) Apply(ctx context.Context, p *Plan, opts ApplyOptions) (*ApplyResult, hcl.Diagnostics) {
	if !p.Complete {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Plan is incomplete", Detail: "An incomplete plan cannot be applied."}}
	}
	if opts.PersistInterval == 0 {
		opts.PersistInterval = 2 * time.Second
	}
	par := p.Options.Parallelism
	if par <= 0 {
		par = 10
	}
	working := p.Refreshed.DeepCopy()
	live := newLiveState(working)
	_, infos, diags := e.buildGraph(ctx)
	if diags.HasErrors() {
		return nil, diags
	}
	sc := newScope(e.cfg, e.opts.Vars, e.opts.Functions, e.managed)
	e.seedScope(sc, live, infos, p)
	nodes, order, err := buildApplyGraph(p, infos)
	if err != nil {
		return nil, hcl.Diagnostics{errDiag("Cannot order the changes", err, nil)}
	}
	res := &ApplyResult{}
	var (
		mu        sync.Mutex
		lastWrite time.Time
		dirty     bool
	)
	persist := func(force bool) {
		// mu held by caller
		if opts.Writer == nil || (!force && (!dirty || time.Since(lastWrite) < opts.PersistInterval)) {
			return
		}
		if err := opts.Writer.WriteState(context.WithoutCancel(ctx), working.DeepCopy()); err != nil {
			diags = append(diags, errDiag("Failed to save state", err, nil))
			return
		}
		lastWrite = time.Now()
		dirty = false
	}
	stopped := func() bool {
		select {
		case <-opts.Stop:
			return true
		default:
			return false
		}
	}
	notAttempted := func(id string) {
		mu.Lock()
		res.NotAttempted = append(res.NotAttempted, nodes[id].change.Addr.String())
		mu.Unlock()
	}
	(&walker{
		order:   order,
		deps:    func(id string) []string { return nodes[id].deps },
		par:     par,
		stop:    stopped,
		skipped: notAttempted,
		panicked: func(id string, r any, stack []byte) {
			mu.Lock()
			diags = append(diags, panicDiag(nodes[id].change.Addr.String(), r, stack))
			mu.Unlock()
		},
		run: func(id string) bool {
			n := nodes[id]
			ok, d := e.applyNode(ctx, n, infos, sc, live, &mu)
			mu.Lock()
			defer mu.Unlock()
			diags = append(diags, d...)
			if ok {
				switch {
				case n.destroy:
					res.Destroyed++
				case n.change.Action == Create || n.change.Action.IsReplace():
					res.Added++
				case n.change.Action == Update:
					res.Changed++
				}
			}
			dirty = true
			persist(false)
			return ok
		},
	}).walk()
	res.Stopped = stopped()
	mu.Lock()
	defer mu.Unlock()
	if !res.Stopped && p.Mode != DestroyMode {
		outs, d := e.finalOutputs(sc, p)
		diags = append(diags, d...)
		working.Outputs = outs
	} else if p.Mode == DestroyMode && !diags.HasErrors() {
		working.Outputs = map[string]*state.Output{}
		// Data sources go with what they described, unless the destroy was
		// limited to some resources.
		if len(p.Options.Targets) == 0 {
			kept := working.Resources[:0]
			for _, r := range working.Resources {
				if r.Mode != state.ModeData {
					kept = append(kept, r)
				}
			}
			working.Resources = kept
		}
	}
	e.fixDependencies(working, infos)
	dirty = true
	persist(true)
	res.State = working
	sort.Strings(res.NotAttempted)
	return res, diags
}

// seedScope fills sc with the expansion of every resource as planned and the
// values known before apply starts.
func (e *Engine) seedScope(sc *scope, live *liveState, infos map[string]*resourceInfo, p *Plan) {
	keys := map[string][]any{}
	for _, c := range p.Changes {
		if c.Action == Delete {
			continue
		}
		ra := c.Addr.Resource.String()
		keys[ra] = append(keys[ra], c.Addr.Key)
	}
	for a, info := range infos {
		exp := &expansion{mode: expandSingle}
		switch {
		case info.cfg.Count != nil:
			exp.mode = expandCount
		case info.cfg.ForEach != nil:
			exp.mode = expandForEach
		}
		ks := keys[a]
		// Instances that exist in state and are not deleted count too (not in
		// the changes when a -target left them out).
		if r, insts := live.instances(info.addr); r != nil {
			have := map[string]bool{}
			for _, k := range ks {
				have[keyString(k)] = true
			}
			for _, inst := range insts {
				k := normalizeKey(inst.IndexKey)
				if !have[keyString(k)] && !deletedIn(p, info.addr.Instance(k)) {
					ks = append(ks, k)
				}
			}
			for _, inst := range insts {
				if v, err := decodeAttrs(inst.Attributes, info.schema); err == nil {
					sc.instances[info.addr.Instance(normalizeKey(inst.IndexKey)).String()] = v
				}
			}
		}
		sortKeys(ks)
		if exp.mode == expandSingle && len(ks) == 0 {
			ks = []any{nil}
		}
		exp.keys = ks
		sc.keys[a] = exp
	}
	for _, c := range p.Changes {
		if c.Action != Delete && c.Action != NoOp {
			sc.instances[c.Addr.String()] = c.After
		}
	}
}

func deletedIn(p *Plan, addr InstanceAddr) bool {
	for _, c := range p.Changes {
		if c.Action == Delete && c.Addr.String() == addr.String() {
			return true
		}
	}
	return false
}

func sortKeys(ks []any) {
	sort.Slice(ks, func(i, j int) bool {
		a, aok := ks[i].(int)
		b, bok := ks[j].(int)
		if aok && bok {
			return a < b
		}
		return keyString(ks[i]) < keyString(ks[j])
	})
}

// applyNode carries out one node. It reports whether it succeeded.
func (e *Engine) applyNode(ctx context.Context, n *applyNode, infos map[string]*resourceInfo, sc *scope, live *liveState, mu *sync.Mutex) (bool, hcl.Diagnostics) {
	c := n.change
	addr := c.Addr
	ra := addr.Resource
	action := c.Action
	if n.destroy {
		action = Delete
	}
	var (
		pi     *providerInst
		schema *providers.Schema
		info   = infos[ra.String()]
	)
	if info != nil {
		pi, schema = info.prov, info.schema
	} else {
		mu.Lock()
		sr := live.resource(ra)
		mu.Unlock()
		if sr == nil {
			return false, hcl.Diagnostics{errDiag("Cannot apply "+addr.String(), errors.New("resource is neither configured nor in state"), nil)}
		}
		var d hcl.Diagnostics
		pi, schema, d = e.providerForState(ctx, sr)
		if d.HasErrors() {
			return false, d
		}
	}
	ty := schema.ImpliedType()
	start := time.Now()
	e.hooks.PreApply(addr, action)
	progress := func(msg string) { e.hooks.Progress(addr, action, msg) }
	fail := func(summary string, err error) (bool, hcl.Diagnostics) {
		e.hooks.PostApply(addr, action, "", time.Since(start), err)
		var subject *hcl.Range
		if info != nil {
			subject = info.cfg.DeclRange.Ptr()
		}
		return false, hcl.Diagnostics{errDiag(summary, err, subject)}
	}
	if n.destroy {
		resp, err := pi.p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ra.Type, Address: addr.String(), Prior: c.Before, Planned: cty.NullVal(ty), Config: cty.NullVal(ty), Progress: progress})
		if err != nil {
			if resp != nil && resp.New != cty.NilVal && !resp.New.IsNull() {
				mu.Lock()
				_ = live.set(ra, providerKeyOfState("provider."+c.ProviderKey), addr.Key, resp.New, schema, c.Deps, c.CreateBeforeDestroy)
				mu.Unlock()
			}
			return fail("Failed to destroy "+addr.String(), err)
		}
		mu.Lock()
		if action == Delete && !c.Action.IsReplace() {
			live.remove(ra, addr.Key)
		} else if c.Action == DeleteThenCreate {
			live.remove(ra, addr.Key)
		}
		mu.Unlock()
		e.hooks.PostApply(addr, action, "", time.Since(start), nil)
		return true, nil
	}
	if info == nil {
		return fail("Cannot apply "+addr.String(), errors.New("resource is not in the configuration"))
	}
	var each map[string]cty.Value
	if info.cfg.ForEach != nil {
		v, d := sc.evalExpr(info.cfg.ForEach)
		if d.HasErrors() {
			return false, d
		}
		m, err := forEachMap(v)
		if err != nil {
			return fail("Invalid for_each argument", err)
		}
		each = m
	}
	cfgVal, d := evalInstanceConfig(sc, info, addr.Key, each)
	if d.HasErrors() {
		e.hooks.PostApply(addr, action, "", time.Since(start), errors.New(d.Error()))
		return false, d
	}
	if c.Action == Read {
		v, err := pi.p.ReadDataSource(ctx, providers.ReadDataRequest{TypeName: ra.Type, Address: addr.String(), Config: cfgVal})
		if err != nil {
			return fail("Failed to read "+addr.String(), err)
		}
		if v, err = convert.Convert(v, ty); err != nil {
			return fail("Provider returned an invalid value for "+addr.String(), err)
		}
		sc.setInstance(addr, v)
		mu.Lock()
		err = live.set(ra, info.provKey, addr.Key, v, schema, info.deps, false)
		mu.Unlock()
		if err != nil {
			return fail("Cannot store "+addr.String(), err)
		}
		e.hooks.PostApply(addr, action, "", time.Since(start), nil)
		return true, nil
	}
	prior := c.Before
	if c.Action.IsReplace() {
		prior = cty.NullVal(ty)
	}
	cfgVal = ignoreChanges(cfgVal, prior, info.cfg.Lifecycle)
	presp, err := pi.p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: ra.Type, Address: addr.String(), Prior: prior, Config: cfgVal, ProposedNew: proposedNew(schema, prior, cfgVal)})
	if err != nil {
		return fail("Failed to plan "+addr.String(), err)
	}
	resp, err := pi.p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ra.Type, Address: addr.String(), Prior: prior, Planned: presp.Planned, Config: cfgVal, Progress: progress})
	if err != nil {
		if resp != nil && resp.New != cty.NilVal && !resp.New.IsNull() {
			mu.Lock()
			if serr := live.set(ra, info.provKey, addr.Key, resp.New, schema, info.deps, info.cfg.Lifecycle.CreateBeforeDestroy); serr == nil {
				live.markTainted(ra, addr.Key)
			}
			mu.Unlock()
		}
		return fail("Failed to "+verb(action)+" "+addr.String(), err)
	}
	nv, err := convert.Convert(resp.New, ty)
	if err != nil {
		return fail("Provider returned an invalid value for "+addr.String(), err)
	}
	sc.setInstance(addr, nv)
	mu.Lock()
	err = live.set(ra, info.provKey, addr.Key, nv, schema, info.deps, info.cfg.Lifecycle.CreateBeforeDestroy)
	mu.Unlock()
	if err != nil {
		return fail("Cannot store "+addr.String(), err)
	}
	e.hooks.PostApply(addr, action, idOf(nv), time.Since(start), nil)
	return true, nil
}

func verb(a Action) string {
	switch a {
	case Create, DeleteThenCreate, CreateThenDelete:
		return "create"
	case Update:
		return "update"
	case Delete:
		return "destroy"
	case Read:
		return "read"
	}
	return "apply"
}

// fixDependencies records each configured resource's direct dependencies on
// its instances in state.
func (e *Engine) fixDependencies(s *state.State, infos map[string]*resourceInfo) {
	for _, r := range s.Resources {
		info, ok := infos[stateResourceAddr(r).String()]
		if !ok {
			continue
		}
		for _, inst := range r.Instances {
			inst.Dependencies = info.deps
			inst.CreateBeforeDestroy = info.cfg.Lifecycle.CreateBeforeDestroy
		}
	}
}
