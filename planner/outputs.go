package planner

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/planner/marks"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// planOutputs evaluates the root outputs against the planned values. In a
// destroy, whose plan is p, the outputs that depend on what it deletes go
// (all of them when it deletes everything) and the others keep the values
// the state holds.
func (e *Engine) planOutputs(sc *scope, prior *state.State, destroy bool, g *graph, p *Plan) ([]*OutputChange, hcl.Diagnostics) {
	var gone map[string]bool
	if destroy {
		gone = e.outputsGone(g, p)
	}
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
		switch {
		case destroy && gone[n]:
			oc.After = cty.NullVal(cty.DynamicPseudoType)
		case destroy:
			oc.After = before
		default:
			v, d := sc.evalExpr(o.Expr)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			secret := marks.Has(v)
			v, err := outputValue(v, o)
			if err != nil {
				diags = append(diags, err)
				continue
			}
			oc.After = v
			// The state holds the hash of a secret output, not its value.
			if po := prior.Outputs[n]; secret && po != nil && po.Hash != "" && v.IsWhollyKnown() {
				if h, err := e.outputHash(n, v); err == nil && h == po.Hash {
					oc.Before = v
				}
			}
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

// outputsGone returns the root outputs that a destroy, whose plan is p,
// takes away: every output when it deletes every resource (no -target nor
// -exclude),
// else those that refer, directly or through locals, resources and data
// sources, to a resource it deletes an instance of. The others keep their
// values, as the resources they describe are still there.
func (e *Engine) outputsGone(g *graph, p *Plan) map[string]bool {
	gone := map[string]bool{}
	if !p.Options.partial() || g == nil {
		for n := range e.cfg.Outputs {
			gone[n] = true
		}
		return gone
	}
	deleted := map[string]bool{}
	for _, c := range p.Changes {
		if c.Action == Delete {
			deleted[c.Addr.ResourceAddress().String()] = true
		}
	}
	for n := range e.cfg.Outputs {
		seen := map[string]bool{}
		stack := []string{outputPrefix + n}
		for len(stack) > 0 && !gone[n] {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, d := range g.dependencies(v) {
				if seen[d] {
					continue
				}
				seen[d] = true
				if deleted[d] {
					gone[n] = true
					break
				}
				stack = append(stack, d)
			}
		}
	}
	return gone
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

// finalOutputs evaluates outputs with the applied values.
func (e *Engine) finalOutputs(sc *scope, p *Plan) (map[string]*state.Output, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	outs := map[string]*state.Output{}
	for n, o := range e.cfg.Outputs {
		v, d := sc.evalExpr(o.Expr)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		secret := marks.Has(v)
		v, dd := outputValue(v, o)
		if dd != nil {
			diags = append(diags, dd)
			continue
		}
		if !v.IsWhollyKnown() {
			continue
		}
		if secret {
			h, err := e.outputHash(n, v)
			if err != nil {
				diags = append(diags, errDiag("Cannot store output "+n, err, o.DeclRange.Ptr()))
				continue
			}
			so, err := encodeOutput(cty.NullVal(v.Type()), true)
			if err != nil {
				diags = append(diags, errDiag("Cannot store output "+n, err, o.DeclRange.Ptr()))
				continue
			}
			so.Hash = h
			outs[n] = so
			continue
		}
		so, err := encodeOutput(v, o.Sensitive)
		if err != nil {
			diags = append(diags, errDiag("Cannot store output "+n, err, o.DeclRange.Ptr()))
			continue
		}
		outs[n] = so
	}
	return outs, diags
}

// outputValue returns an output's value without marks. As in Terraform, a
// value derived from a sensitive one may only be the value of an output
// declared sensitive, which pond does not print.
func outputValue(v cty.Value, o *config.Output) (cty.Value, *hcl.Diagnostic) {
	if !o.Sensitive && marks.Has(v) {
		return cty.NilVal, sensitiveDiag("Output refers to sensitive values",
			fmt.Sprintf("The value of output %q is derived from a sensitive value, which pond would print. Declare the output sensitive = true to keep it hidden, or wrap what may be shown in nonsensitive().", o.Name),
			o.DeclRange.Ptr())
	}
	uv, _ := v.UnmarkDeep()
	return uv, nil
}

// outputHash is the keyed hash the state keeps of an output whose value
// derives from a sensitive one.
func (e *Engine) outputHash(name string, v cty.Value) (string, error) {
	k, err := e.hashKey()
	if err != nil {
		return "", err
	}
	return providers.Hash(k, "output."+name, v)
}
