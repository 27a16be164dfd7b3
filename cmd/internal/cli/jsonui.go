package cli

import (
	"encoding/json"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/cmd/internal/ui/jsonview"
	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

// This file turns the planner's plans, hook events and diagnostics into
// the messages of the machine-readable UI (package jsonview) that plan,
// apply, destroy, refresh and test print with -json.

// startJSON makes the command print its messages, diagnostics included,
// as the machine-readable UI stream on stdout, and writes the stream's
// first message.
func (m *meta) startJSON() *jsonview.View {
	m.color = false
	m.view = jsonview.New(m.stdout)
	m.view.Version(Version)
	return m.view
}

// jsonResource identifies an instance in messages.
func jsonResource(addr state.Address) jsonview.Resource {
	r := addr
	r.Key = nil
	provider := resourceTypes[addr.Type]
	if addr.IsData() {
		provider = dataTypes[addr.Type]
	}
	return jsonview.Resource{
		Addr:            addr.String(),
		Resource:        addr.String(),
		ImpliedProvider: provider,
		ResourceType:    addr.Type,
		ResourceName:    addr.Name,
		ResourceKey:     addr.Key,
	}
}

// jsonAction names a planner action as the machine-readable UI does.
func jsonAction(a planner.Action) string {
	switch a {
	case planner.Create:
		return "create"
	case planner.Update:
		return "update"
	case planner.Delete:
		return "delete"
	case planner.DeleteThenCreate, planner.CreateThenDelete:
		return "replace"
	case planner.Read:
		return "read"
	case planner.Forget:
		return "remove"
	case planner.NoOp:
		return "noop"
	}
	return a.String()
}

// jsonDiagnostics converts diagnostics, with file names already made
// relative (meta.relDiags).
func jsonDiagnostics(diags hcl.Diagnostics) []jsonview.Diagnostic {
	out := make([]jsonview.Diagnostic, 0, len(diags))
	for _, jd := range config.DiagnosticsJSON(diags) {
		d := jsonview.Diagnostic{Severity: jd.Severity, Summary: jd.Summary, Detail: jd.Detail}
		if jd.Range != nil {
			d.Range = &jsonview.Range{
				Filename: jd.Range.Filename,
				Start:    jsonview.Pos{Line: jd.Range.Start.Line, Column: jd.Range.Start.Column, Byte: jd.Range.Start.Byte},
				End:      jsonview.Pos{Line: jd.Range.End.Line, Column: jd.Range.End.Column, Byte: jd.Range.End.Byte},
			}
		}
		out = append(out, d)
	}
	return out
}

// streamPlan writes a plan's messages: the drift, a planned_change for
// each instance the plan changes or moves, the change_summary and, when
// outputs change, their planned values.
func streamPlan(v *jsonview.View, p *planner.Plan) {
	for _, c := range p.Drift {
		v.ResourceDrift(jsonview.Change{Resource: jsonResource(c.Addr), Action: jsonAction(c.Action)})
	}
	shown := map[string]bool{}
	for _, c := range p.Changes {
		if c.Action == planner.NoOp && !c.Moved() {
			continue
		}
		jc := jsonview.Change{Resource: jsonResource(c.Addr), Action: jsonAction(c.Action), Reason: c.Reason}
		if c.Moved() {
			prev := jsonResource(c.PrevAddr)
			jc.PreviousResource = &prev
			if c.Action == planner.NoOp {
				jc.Action = "move"
			}
		}
		shown[c.Addr.String()] = true
		v.PlannedChange(jc)
	}
	// Moves of instances the plan leaves out (-target, -exclude) are made
	// all the same.
	for _, mv := range p.Moves {
		if !shown[mv.To.String()] {
			prev := jsonResource(mv.From)
			v.PlannedChange(jsonview.Change{Resource: jsonResource(mv.To), PreviousResource: &prev, Action: "move"})
		}
	}
	add, change, destroy := p.Counts()
	v.ChangeSummary(jsonview.Summary{Add: add, Change: change, Remove: destroy, Operation: "plan"})
	if outputsChange(p) {
		outs := map[string]jsonview.Output{}
		for _, o := range p.OutputChanges {
			jo := jsonview.Output{Sensitive: o.Sensitive, Action: jsonAction(o.Action)}
			if !o.Sensitive && o.Action != planner.Delete {
				jo.Type, jo.Value = jsonValue(o.After)
			}
			outs[o.Name] = jo
		}
		v.Outputs(outs)
	}
}

// jsonValue returns a value's type and value in cty's JSON forms, or
// nothing when the value is unknown, sensitive or cannot be encoded.
func jsonValue(val cty.Value) (json.RawMessage, json.RawMessage) {
	if val == cty.NilVal || !val.IsWhollyKnown() || val.ContainsMarked() {
		return nil, nil
	}
	ty, err := ctyjson.MarshalType(val.Type())
	if err != nil {
		return nil, nil
	}
	b, err := ctyjson.Marshal(val, val.Type())
	if err != nil {
		return nil, nil
	}
	return ty, b
}

// streamStateOutputs writes the outputs message of an apply: the root
// outputs of s, without the values of sensitive ones.
func streamStateOutputs(v *jsonview.View, s *state.State) {
	if s == nil || len(s.Outputs) == 0 {
		return
	}
	outs := make(map[string]jsonview.Output, len(s.Outputs))
	for name, o := range s.Outputs {
		jo := jsonview.Output{Sensitive: o.Sensitive}
		if !o.Sensitive {
			jo.Type, jo.Value = o.Type, o.Value
		}
		outs[name] = jo
	}
	v.Outputs(outs)
}

// hookJSON is the hook of an apply or refresh message.
func hookJSON(addr state.Address, action planner.Action, elapsed time.Duration, withElapsed bool) jsonview.Hook {
	h := jsonview.Hook{Resource: jsonResource(addr)}
	if action != planner.NoOp {
		h.Action = jsonAction(action)
	}
	if withElapsed {
		h.ElapsedSeconds = jsonview.Elapsed(elapsed)
	}
	return h
}
