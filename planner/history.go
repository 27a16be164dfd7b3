package planner

import "github.com/pond-htc/pond/state"

// HistoryHints returns what applying p does that the states before and
// after alone do not say, for the state's history: the instances it
// replaces, imports and forgets, and those moved blocks move.
func (p *Plan) HistoryHints() state.HistoryHints {
	h := state.HistoryHints{Actions: map[string]string{}, Moved: map[string]string{}}
	for _, c := range p.Changes {
		switch {
		case c.Importing != nil:
			h.Actions[c.Addr.String()] = state.ActionImport
		case c.Action.IsReplace():
			h.Actions[c.Addr.String()] = state.ActionReplace
		case c.Action == Forget:
			h.Actions[c.Addr.String()] = state.ActionForget
		}
	}
	for _, m := range p.Moves {
		h.Moved[m.To.String()] = m.From.String()
	}
	return h
}
