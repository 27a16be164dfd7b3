package planner

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

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
	// Forgotten counts the instances dropped from the state, not
	// destroyed.
	Forgotten int
	// Imported counts the instances import blocks adopted into the state.
	Imported int
	// Checks are the outcomes of the check blocks against the new state,
	// unevaluated (unknown) when the apply did not evaluate them.
	Checks []CheckResult
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
	e.useLineage(p.Prior)
	working := p.Refreshed.DeepCopy()
	forgotten := 0
	for _, c := range p.Changes {
		// Forgetting calls no provider: the instance leaves the state.
		if c.Action == Forget && working.RemoveInstance(c.Addr) {
			e.logger.Info("forgot", "address", c.Addr.String())
			forgotten++
		}
	}
	live := newLiveState(working, e.hashKey)
	g, infos, diags := e.buildGraph(ctx)
	if diags.HasErrors() {
		return nil, diags
	}
	sc := newScope(e.cfg, e.opts.Vars, e.opts.Functions, e.managed)
	e.seedScope(sc, live, infos, p)
	nodes, order, err := buildApplyGraph(p, infos)
	if err != nil {
		return nil, hcl.Diagnostics{errDiag("Cannot order the changes", err, nil)}
	}
	w := &applyWalk{e: e, opts: opts, nodes: nodes, infos: infos, graph: g, sc: sc, working: working, live: live, diags: diags}
	w.res.Forgotten = forgotten
	w.res.Imported = p.Imports()
	e.logger.Info("applying", "steps", len(order), "parallelism", par)
	(&walker{
		order:    order,
		deps:     func(id string) []string { return nodes[id].deps },
		par:      par,
		stop:     w.stopped,
		skipped:  w.notAttempted,
		panicked: w.panicked,
		run:      func(id string) bool { return w.run(ctx, id) },
	}).walk()
	// An interrupt that came once every change had started, each of which
	// ran to its end, stopped nothing: the apply is whole, outputs and
	// checks included.
	w.res.Stopped = w.stopped() && len(w.res.NotAttempted) > 0
	if p.Mode == NormalMode && !w.res.Stopped && !w.diags.HasErrors() {
		// The checks see the new state: the values the apply set.
		var d hcl.Diagnostics
		w.res.Checks, d = e.evalChecks(ctx, sc)
		w.diags = append(w.diags, d...)
	} else {
		w.res.Checks = e.unevaluatedChecks()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finish(p)
	e.fixDependencies(working, infos)
	// The state keeps the checks' outcomes of this apply, unknown when
	// it did not evaluate them, as Terraform's does.
	working.CheckResults = StateCheckResults(w.res.Checks)
	w.dirty = true
	w.persist(ctx, true)
	if w.saveErr != nil {
		// Once, however many writes failed: the last one did.
		w.diags = append(w.diags, errDiag("Failed to save state", w.saveErr, nil))
	}
	w.res.State = working
	sort.Strings(w.res.NotAttempted)
	e.logger.Info("applied", "added", w.res.Added, "changed", w.res.Changed, "destroyed", w.res.Destroyed, "stopped", w.res.Stopped, "not_attempted", len(w.res.NotAttempted), "errors", w.diags.HasErrors())
	return &w.res, w.diags
}

// applyWalk carries the state of one apply.
type applyWalk struct {
	e       *Engine
	opts    ApplyOptions
	nodes   map[string]*applyNode
	infos   map[string]*resourceInfo
	graph   *graph
	sc      *scope
	working *state.State
	live    *liveState

	// mu guards what follows, and the live state's instances while a node
	// records its result.
	mu        sync.Mutex
	diags     hcl.Diagnostics
	res       ApplyResult
	lastWrite time.Time
	dirty     bool
	// saveErr is why the last write of the state failed; nil once one
	// succeeds.
	saveErr error
}

// run carries out one node and counts and saves what it did.
func (w *applyWalk) run(ctx context.Context, id string) bool {
	n := w.nodes[id]
	ok, d := w.e.applyNode(ctx, n, w.infos, w.sc, w.live, &w.mu)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.diags = append(w.diags, d...)
	if ok {
		switch {
		case n.destroy:
			w.res.Destroyed++
		case n.change.Action == Create || n.change.Action.IsReplace():
			w.res.Added++
		case n.change.Action == Update:
			w.res.Changed++
		}
	}
	w.dirty = true
	w.persist(ctx, false)
	return ok
}

// persist writes the working state when it changed and the last write is
// older than the persist interval, or always when force is set. w.mu must
// be held.
func (w *applyWalk) persist(ctx context.Context, force bool) {
	if w.opts.Writer == nil || (!force && (!w.dirty || time.Since(w.lastWrite) < w.opts.PersistInterval)) {
		return
	}
	if err := w.opts.Writer.WriteState(context.WithoutCancel(ctx), w.working.DeepCopy()); err != nil {
		w.saveErr = err
		return
	}
	w.saveErr = nil
	w.lastWrite = time.Now()
	w.dirty = false
}

// stopped reports whether apply was asked to start nothing new.
func (w *applyWalk) stopped() bool {
	select {
	case <-w.opts.Stop:
		return true
	default:
		return false
	}
}

func (w *applyWalk) notAttempted(id string) {
	w.mu.Lock()
	w.res.NotAttempted = append(w.res.NotAttempted, w.nodes[id].change.Addr.String())
	w.mu.Unlock()
}

func (w *applyWalk) panicked(id string, r any, stack []byte) {
	w.mu.Lock()
	w.diags = append(w.diags, panicDiag(w.nodes[id].change.Addr.String(), r, stack))
	w.mu.Unlock()
}

// finish records the outputs in the working state once every node has run:
// their final values, or after a destroy those that do not depend on what
// it deleted (none after a whole destroy, which also removes the data
// sources). w.mu must be held.
func (w *applyWalk) finish(p *Plan) {
	switch {
	case !w.res.Stopped && p.Mode != DestroyMode:
		outs, d := w.e.finalOutputs(w.sc, p)
		w.diags = append(w.diags, d...)
		w.working.Outputs = outs
	case p.Mode == DestroyMode && !w.diags.HasErrors():
		gone := w.e.outputsGone(w.graph, p)
		for n := range w.working.Outputs {
			if _, ok := w.e.cfg.Outputs[n]; !ok || gone[n] {
				delete(w.working.Outputs, n)
			}
		}
		if w.working.Outputs == nil {
			w.working.Outputs = map[string]*state.Output{}
		}
		// Data sources go with what they described, unless the destroy was
		// limited to some resources.
		if !p.Options.partial() {
			kept := w.working.Resources[:0]
			for _, r := range w.working.Resources {
				if r.Mode != state.ModeData {
					kept = append(kept, r)
				}
			}
			w.working.Resources = kept
		}
	}
}

// seedScope fills sc with the expansion of every resource as planned and the
// values known before apply starts.
func (e *Engine) seedScope(sc *scope, live *liveState, infos map[string]*resourceInfo, p *Plan) {
	keys := map[string][]any{}
	for _, c := range p.Changes {
		if c.Action == Delete {
			continue
		}
		ra := c.Addr.ResourceAddress().String()
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
				have[state.KeyString(k)] = true
			}
			for _, inst := range insts {
				ia := info.addr.Instance(inst.IndexKey)
				if !have[state.KeyString(ia.Key)] && !deletedIn(p, ia) {
					ks = append(ks, ia.Key)
				}
			}
			for _, inst := range insts {
				if v, err := decodeAttrs(inst.Attributes, info.schema); err == nil {
					sc.instances[info.addr.Instance(inst.IndexKey).String()] = markSensitive(v, hashedPaths(v, inst.SensitiveValues))
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

func deletedIn(p *Plan, addr state.Address) bool {
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
		return state.KeyString(ks[i]) < state.KeyString(ks[j])
	})
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
		info, ok := infos[r.Addr().String()]
		if !ok {
			continue
		}
		for _, inst := range r.Instances {
			inst.Dependencies = info.deps
			inst.CreateBeforeDestroy = info.cfg.Lifecycle.CreateBeforeDestroy
		}
	}
}
