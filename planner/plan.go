package planner

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/state"
)

// Action is what a plan does to one resource instance.
type Action int

// Actions, as Terraform names them.
const (
	NoOp Action = iota
	Create
	Read
	Update
	DeleteThenCreate
	CreateThenDelete
	Delete
)

// String is the action as plan -json spells its first action.
func (a Action) String() string {
	switch a {
	case Create:
		return "create"
	case Read:
		return "read"
	case Update:
		return "update"
	case DeleteThenCreate:
		return "delete-create"
	case CreateThenDelete:
		return "create-delete"
	case Delete:
		return "delete"
	}
	return "no-op"
}

// JSONActions returns the actions list of plan -json's change.actions.
func (a Action) JSONActions() []string {
	switch a {
	case DeleteThenCreate:
		return []string{"delete", "create"}
	case CreateThenDelete:
		return []string{"create", "delete"}
	}
	return []string{a.String()}
}

// IsReplace reports whether a replaces the instance.
func (a Action) IsReplace() bool { return a == DeleteThenCreate || a == CreateThenDelete }

// Mode is the kind of plan.
type Mode int

// Plan modes.
const (
	NormalMode Mode = iota
	DestroyMode
	RefreshOnlyMode
)

// ResourceChange is the planned change of one resource instance.
type ResourceChange struct {
	Addr        InstanceAddr
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
}

// HasChanges reports whether applying the plan would change anything:
// resources, outputs, or (in refresh-only mode) the stored state.
func (p *Plan) HasChanges() bool {
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
	Replace []string
	// Refresh is whether to read every resource from its provider first.
	Refresh     bool
	Parallelism int
}
