package planner

import "github.com/pond-htc/pond/state"

// useLineage records the lineage of the state the engine plans, applies
// or imports against, which every provider request names (see
// providers.ApplyRequest.Lineage). An engine works on one state.
func (e *Engine) useLineage(s *state.State) {
	if s == nil {
		return
	}
	e.mu.Lock()
	e.lineage = s.Lineage
	e.mu.Unlock()
}

// stateLineage is the lineage recorded by useLineage.
func (e *Engine) stateLineage() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lineage
}
