package cli

import (
	"slices"
	"strings"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/state"
)

// jsonCheckNote is the note Terraform puts first in each element of its
// checks representation, which it still calls experimental.
const jsonCheckNote = "EXPERIMENTAL: see docs for details"

// jsonCheck is one checkable object of the checks list of show -json, in
// Terraform's checks representation.
type jsonCheck struct {
	Note      string              `json:"//"`
	Address   jsonCheckAddress    `json:"address"`
	Status    string              `json:"status"`
	Instances []jsonCheckInstance `json:"instances,omitempty"`
}

// jsonCheckAddress is a checkable object's address: kind check, name the
// check block's label.
type jsonCheckAddress struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	ToDisplay string `json:"to_display"`
}

// jsonCheckInstance is one instance of a checkable object.
type jsonCheckInstance struct {
	Address  jsonCheckInstanceAddress `json:"address"`
	Status   string                   `json:"status"`
	Problems []jsonCheckProblem       `json:"problems,omitempty"`
}

type jsonCheckInstanceAddress struct {
	ToDisplay string `json:"to_display"`
}

// jsonCheckProblem is a failing assertion: its error message.
type jsonCheckProblem struct {
	Message string `json:"message"`
}

// checksJSON is the checks list of show -json from check results as the
// state records them: objects and their instances sorted by address,
// problems by message, as Terraform sorts them. It is nil when there is
// no check.
func checksJSON(results []*state.CheckResult) []jsonCheck {
	var out []jsonCheck
	for _, r := range results {
		if r == nil {
			continue
		}
		jc := jsonCheck{
			Note:    jsonCheckNote,
			Address: jsonCheckAddress{Kind: r.ObjectKind, Name: strings.TrimPrefix(r.ConfigAddr, r.ObjectKind+"."), ToDisplay: r.ConfigAddr},
			Status:  r.Status,
		}
		for _, o := range r.Objects {
			if o == nil {
				continue
			}
			inst := jsonCheckInstance{Address: jsonCheckInstanceAddress{ToDisplay: o.ObjectAddr}, Status: o.Status}
			for _, m := range o.FailureMessages {
				inst.Problems = append(inst.Problems, jsonCheckProblem{Message: m})
			}
			slices.SortFunc(inst.Problems, func(a, b jsonCheckProblem) int { return strings.Compare(a.Message, b.Message) })
			jc.Instances = append(jc.Instances, inst)
		}
		slices.SortFunc(jc.Instances, func(a, b jsonCheckInstance) int { return strings.Compare(a.Address.ToDisplay, b.Address.ToDisplay) })
		out = append(out, jc)
	}
	slices.SortFunc(out, func(a, b jsonCheck) int { return strings.Compare(a.Address.ToDisplay, b.Address.ToDisplay) })
	return out
}

// planChecksJSON is the checks list of show -json of a plan: the checks as
// the plan evaluated them.
func planChecksJSON(p *planner.Plan) []jsonCheck {
	return checksJSON(planner.StateCheckResults(p.Checks))
}
