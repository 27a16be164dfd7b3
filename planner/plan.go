package planner

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// Mode is the kind of plan.
type Mode int

// Plan modes.
const (
	NormalMode Mode = iota
	DestroyMode
	RefreshOnlyMode
)

// String names the mode as the command-line option that asks for it does.
func (m Mode) String() string {
	switch m {
	case DestroyMode:
		return "destroy"
	case RefreshOnlyMode:
		return "refresh-only"
	}
	return "normal"
}

// ResourceChange is the planned change of one resource instance.
type ResourceChange struct {
	// Addr is the instance address, as the state commands print it.
	Addr state.Address
	// PrevAddr is the instance's address in the stored state when a moved
	// block moved it, else the zero Address.
	PrevAddr    state.Address
	ProviderKey string
	Action      Action
	// Before is the refreshed prior value (null when creating), After the
	// planned value (null when deleting); After may contain unknowns.
	Before cty.Value
	After  cty.Value
	// RequiresReplace lists the attributes that force replacement.
	RequiresReplace []cty.Path
	// Reason says why an action was chosen, when it is not obvious.
	Reason string
	// Deps are the resource-level addresses this instance depends on.
	Deps                []string
	CreateBeforeDestroy bool
	// Sensitive names the top-level attributes not to print.
	Sensitive []string
	// SensitivePaths are the paths, in Before and After, of the values
	// derived from sensitive values; Before and After hold them without
	// marks (Marked gives them marked).
	SensitivePaths []cty.Path
	// Importing is set when the change adopts an existing object, as an
	// import block asks.
	Importing *Importing
	// Cost is the provider's estimate of what the instance costs to run
	// after the change, when it gives one.
	Cost *providers.CostEstimate
}

// Moved reports whether a moved block moved the instance to Addr.
func (c *ResourceChange) Moved() bool { return c.PrevAddr != (state.Address{}) }

// Move is an instance that a moved block moved in the state.
type Move struct {
	From, To state.Address
}

// Marked returns Before and After with the values at SensitivePaths marked
// sensitive.
func (c *ResourceChange) Marked() (before, after cty.Value) {
	return markSensitive(c.Before, c.SensitivePaths), markSensitive(c.After, c.SensitivePaths)
}

// OutputChange is the planned change of a root output.
type OutputChange struct {
	Name      string
	Action    Action
	Before    cty.Value
	After     cty.Value
	Sensitive bool
}

// Plan is the result of planning.
type Plan struct {
	Mode Mode
	// Changes lists every instance change, no-ops included, in address order.
	Changes []*ResourceChange
	// Drift lists instances whose observed state differs from the stored
	// state (Action Update for changed, Delete for gone).
	Drift         []*ResourceChange
	OutputChanges []*OutputChange
	// Prior is the state as stored; Refreshed is it after refresh, with data
	// sources read during the plan.
	Prior     *state.State
	Refreshed *state.State
	// Options the plan was made with, so that a saved plan can be checked
	// and applied.
	Options PlanOptions
	// Complete is false when planning stopped on errors.
	Complete bool
	// Checks are the outcomes of the check blocks, in file order: every
	// check block, unevaluated (unknown) when the plan did not evaluate
	// them.
	Checks []CheckResult
	// Moves lists, in address order, the instances the moved blocks moved
	// in the state (Prior holds them at their old addresses, Refreshed at
	// their new ones). Applying the plan stores them at the new ones.
	Moves []Move
}

// HasChanges reports whether applying the plan would change anything:
// resources, outputs, or (in refresh-only mode) the stored state.
func (p *Plan) HasChanges() bool {
	if len(p.Moves) > 0 || p.Imports() > 0 {
		return true
	}
	if p.Mode == RefreshOnlyMode {
		return len(p.Drift) > 0 || p.outputsChanged()
	}
	for _, c := range p.Changes {
		if c.Action != NoOp {
			return true
		}
	}
	return p.outputsChanged()
}

func (p *Plan) outputsChanged() bool {
	for _, o := range p.OutputChanges {
		if o.Action != NoOp {
			return true
		}
	}
	return false
}

// Forgets returns the number of instances to forget.
func (p *Plan) Forgets() int {
	n := 0
	for _, c := range p.Changes {
		if c.Action == Forget {
			n++
		}
	}
	return n
}

// Counts returns the numbers of instances to add, change and destroy.
func (p *Plan) Counts() (add, change, destroy int) {
	for _, c := range p.Changes {
		switch c.Action {
		case Create:
			add++
		case Update:
			change++
		case Delete:
			destroy++
		case DeleteThenCreate, CreateThenDelete:
			add++
			destroy++
		}
	}
	return
}

// PlanOptions are the options of plan, apply and destroy.
type PlanOptions struct {
	Mode    Mode
	Targets []string
	// Excludes are the addresses -exclude names: they and what depends on
	// them (or, when destroying, what they depend on) are left out.
	Excludes []string
	Replace  []string
	// Refresh is whether to read every resource from its provider first.
	Refresh     bool
	Parallelism int
}

// partial reports whether -target or -exclude limits the plan to some
// resources.
func (o PlanOptions) partial() bool { return len(o.Targets) > 0 || len(o.Excludes) > 0 }

// Plan computes a plan against prior, the stored state (nil when none).
func (e *Engine) Plan(ctx context.Context, prior *state.State, opts PlanOptions) (*Plan, hcl.Diagnostics) {
	if prior == nil {
		prior = state.New()
	}
	e.useLineage(prior)
	if opts.Parallelism <= 0 {
		opts.Parallelism = 10
	}
	p := &Plan{Mode: opts.Mode, Prior: prior, Options: opts}
	e.logger.Info("planning", "mode", opts.Mode.String(), "refresh", opts.Refresh, "resources", len(e.cfg.Resources))
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
	if opts.Mode == NormalMode {
		// A destroy or a refresh starts nothing in the sea: it goes on
		// without it.
		if d := e.checkSea(ctx); d.HasErrors() {
			return p, append(diags, d...)
		}
	}
	moveOrder, d := e.cfg.MoveOrder()
	diags = append(diags, d...)
	if diags.HasErrors() {
		return p, diags
	}
	moved, prevAddrs, d := applyMoves(prior, moveOrder)
	diags = append(diags, d...)
	for _, from := range prevAddrs {
		p.Moves = append(p.Moves, from)
	}
	sort.Slice(p.Moves, func(i, j int) bool { return state.CompareAddresses(p.Moves[i].To, p.Moves[j].To) < 0 })
	var imports map[string]*importTarget
	if opts.Mode == NormalMode && len(e.cfg.Imports) > 0 {
		// Imports read their objects into the state before the refresh,
		// as pondctl import would, so that the plan compares them with
		// their configuration as any other.
		moved = moved.DeepCopy()
		imports, d = e.planImports(ctx, moved, infos)
		diags = append(diags, d...)
		if diags.HasErrors() {
			return p, diags
		}
	}
	refreshed, drift, d := e.refresh(ctx, moved, infos, opts)
	diags = append(diags, d...)
	p.Refreshed = refreshed
	p.Drift = drift
	if diags.HasErrors() {
		return p, diags
	}
	w := &planWalk{e: e, p: p, infos: infos, sc: newScope(e.cfg, e.opts.Vars, e.opts.Functions, e.managed), live: newLiveState(refreshed, e.hashKey), changed: map[string]bool{}}
	diags = append(diags, w.walk(ctx, order, g)...)
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
	diags = append(diags, w.applyExcludes(g)...)
	diags = append(diags, w.markImports(imports)...)
	diags = append(diags, w.notePrevAddrs(prevAddrs)...)
	diags = append(diags, w.checkPreventDestroy()...)
	diags = append(diags, e.checkPlan(ctx, p, infos)...)
	sortChanges(p.Changes)
	p.OutputChanges, d = e.planOutputs(w.sc, refreshed, opts.Mode == DestroyMode, g, p)
	diags = append(diags, d...)
	if opts.Mode == NormalMode && !diags.HasErrors() {
		p.Checks, d = e.evalChecks(ctx, w.sc)
		diags = append(diags, d...)
	} else {
		p.Checks = e.unevaluatedChecks()
	}
	p.Complete = !diags.HasErrors()
	add, change, destroy := p.Counts()
	e.logger.Info("planned", "complete", p.Complete, "add", add, "change", change, "destroy", destroy, "drift", len(p.Drift))
	return p, diags
}

// walk plans every resource of order, each once its dependencies are
// planned, as many at once as there are processors.
func (w *planWalk) walk(ctx context.Context, order []string, g *graph) hcl.Diagnostics {
	var (
		mu    sync.Mutex
		diags hcl.Diagnostics
	)
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
			info, ok := w.infos[v]
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
	return diags
}

// notePrevAddrs sets each change's previous address where a moved block
// moved it, and warns of the objects the plan forgets.
func (w *planWalk) notePrevAddrs(prevAddrs map[string]Move) hcl.Diagnostics {
	var forgotten []string
	for _, c := range w.p.Changes {
		if from, ok := prevAddrs[c.Addr.String()]; ok {
			c.PrevAddr = from.From
		}
		if c.Action == Forget {
			forgotten = append(forgotten, "  - "+c.Addr.String())
		}
	}
	if len(forgotten) == 0 {
		return nil
	}
	sort.Strings(forgotten)
	return hcl.Diagnostics{{
		Severity: hcl.DiagWarning,
		Summary:  "Some objects will no longer be managed by pond",
		Detail:   "If you apply this plan, pond will drop these objects from its state without destroying them:\n" + strings.Join(forgotten, "\n") + "\n\nAfterwards pond no longer manages them: their nodes keep running until you stop them, or import them to manage them again.",
	}}
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

// sortChanges sorts changes by address, formatting each address once
// rather than twice per comparison.
func sortChanges(cs []*ResourceChange) {
	sort.Sort(&changesByAddr{cs: cs, keys: addrKeys(cs)})
}

func addrKeys(cs []*ResourceChange) []string {
	keys := make([]string, len(cs))
	for i, c := range cs {
		keys[i] = c.Addr.String()
	}
	return keys
}

type changesByAddr struct {
	cs   []*ResourceChange
	keys []string
}

func (s *changesByAddr) Len() int           { return len(s.cs) }
func (s *changesByAddr) Less(i, j int) bool { return s.keys[i] < s.keys[j] }
func (s *changesByAddr) Swap(i, j int) {
	s.cs[i], s.cs[j] = s.cs[j], s.cs[i]
	s.keys[i], s.keys[j] = s.keys[j], s.keys[i]
}
