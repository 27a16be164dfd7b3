package planner

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

// movedObject is one managed instance of the state as the moves carry it.
type movedObject struct {
	addr, orig state.Address
	provider   string
	inst       *state.Instance
}

// applyMoves returns a copy of s with the moved blocks of order (as
// config.MoveOrder gives them) applied, and each instance that moved by
// its address after the moves. A block whose source
// is not in the state does nothing; an object whose destination is already
// taken stays where it is, with a warning, as Terraform does.
func applyMoves(s *state.State, order []*config.Moved) (*state.State, map[string]Move, hcl.Diagnostics) {
	if len(order) == 0 {
		return s, nil, nil
	}
	s = s.DeepCopy()
	var objs []*movedObject
	at := map[state.Address]*movedObject{}
	var kept []*state.Resource // data resources, untouched
	for _, r := range s.Resources {
		if r == nil {
			continue
		}
		if r.Mode != state.ModeManaged {
			kept = append(kept, r)
			continue
		}
		for _, inst := range r.Instances {
			if inst == nil {
				continue
			}
			a := r.InstanceAddr(inst.IndexKey)
			o := &movedObject{addr: a, orig: a, provider: r.Provider, inst: inst}
			objs = append(objs, o)
			at[a] = o
		}
	}
	var diags hcl.Diagnostics
	var blocked []string
	for _, m := range order {
		// The objects this block moves, and where to; moved together.
		var moving []*movedObject
		var dests []state.Address
		for _, o := range objs {
			dst, ok := moveTarget(m, o.addr)
			if !ok {
				continue
			}
			moving = append(moving, o)
			dests = append(dests, dst)
		}
		leaving := map[*movedObject]bool{}
		for _, o := range moving {
			leaving[o] = true
		}
		for i, o := range moving {
			if other := at[dests[i]]; other != nil && !leaving[other] {
				blocked = append(blocked, fmt.Sprintf("  - %s could not move to %s (%s)", o.addr, dests[i], config.RangeString(m.DeclRange)))
				leaving[o] = false
				dests[i] = o.addr
			}
		}
		for _, o := range moving {
			if leaving[o] {
				delete(at, o.addr)
			}
		}
		for i, o := range moving {
			o.addr = dests[i]
			at[o.addr] = o
		}
	}
	if len(blocked) > 0 {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Unresolved resource instance address changes",
			Detail:   "pond tried to move objects in the prior state as the moved blocks say, but some could not move because objects already exist at their destinations; they stay where they were:\n" + strings.Join(blocked, "\n"),
		})
	}
	out := s
	out.Resources = nil
	byRes := map[state.Address]*state.Resource{}
	prev := map[string]Move{}
	renamed := map[string]string{}
	whole := map[string]bool{} // source resources all of whose objects went to one resource
	for _, o := range objs {
		ra := o.addr.ResourceAddress()
		r := byRes[ra]
		if r == nil {
			r = &state.Resource{Mode: state.ModeManaged, Type: ra.Type, Name: ra.Name, Provider: o.provider}
			byRes[ra] = r
			out.Resources = append(out.Resources, r)
		}
		o.inst.IndexKey = o.addr.Key
		r.Instances = append(r.Instances, o.inst)
		if o.addr != o.orig {
			prev[o.addr.String()] = Move{From: o.orig, To: o.addr}
		}
		from, to := o.orig.ResourceAddress().String(), ra.String()
		if t, seen := renamed[from]; !seen {
			renamed[from], whole[from] = to, true
		} else if t != to {
			whole[from] = false
		}
	}
	for _, r := range out.Resources {
		if d := mixedKeys(r, order); d != nil {
			diags = append(diags, d)
		}
	}
	for from, to := range renamed {
		if whole[from] && from != to {
			out.RenameDependency(from, to)
		}
	}
	out.Resources = append(out.Resources, kept...)
	return out, prev, diags
}

// moveTarget returns where block m moves the object at a, if it moves it.
func moveTarget(m *config.Moved, a state.Address) (state.Address, bool) {
	if !m.From.HasKey() && !m.To.HasKey() {
		// A whole resource: every instance keeps its key.
		if a.ResourceAddress() == m.From.ResourceAddress() {
			return m.To.Instance(a.Key), true
		}
		return state.Address{}, false
	}
	if state.CompareAddresses(a, m.From) == 0 {
		return m.To, true
	}
	return state.Address{}, false
}

// mixedKeys reports a resource that the moves leave with instances of two
// kinds (unkeyed, count, for_each), which no configuration makes and the
// state cannot hold, at the first moved block that moves into it.
func mixedKeys(r *state.Resource, order []*config.Moved) *hcl.Diagnostic {
	kind := func(k any) string {
		switch k.(type) {
		case nil:
			return "unkeyed"
		case int:
			return "count"
		}
		return "for_each"
	}
	byKind := map[string]state.Address{}
	for _, inst := range r.Instances {
		byKind[kind(inst.IndexKey)] = r.InstanceAddr(inst.IndexKey)
	}
	if len(byKind) < 2 {
		return nil
	}
	var examples []string
	for _, k := range []string{"unkeyed", "count", "for_each"} {
		if a, ok := byKind[k]; ok {
			examples = append(examples, fmt.Sprintf("%s (%s)", a, k))
		}
	}
	d := &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Moves leave mixed instance keys",
		Detail:   fmt.Sprintf("After the moves, %s would hold instances of different kinds: %s. A resource's instances are all unkeyed, all from count or all from for_each: move every instance of the old kind too.", r.Addr(), strings.Join(examples, ", ")),
	}
	for _, m := range order {
		if m.To.ResourceAddress() == r.Addr().ResourceAddress() {
			d.Subject = m.DeclRange.Ptr()
			break
		}
	}
	return d
}
