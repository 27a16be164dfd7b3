package planner

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
	// Forget drops an instance from the state without destroying it, as a
	// removed block with destroy = false asks.
	Forget
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
	case Forget:
		return "forget"
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
