package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// Importing says that a change adopts an existing object, as an import
// block asks: the plan read it into the state, and applying the plan
// keeps it there.
type Importing struct {
	// ID is the object's ID, as pondctl import takes it.
	ID string
}

// importTarget is one instance an import block names.
type importTarget struct {
	addr  state.Address
	id    string
	block *config.Import
}

// expandImports evaluates the import blocks: each names one instance, or
// one per element of its for_each. It reports the targets that two blocks
// (or two elements) name, and two targets with the same object.
func (e *Engine) expandImports() ([]*importTarget, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var out []*importTarget
	sc := newScope(e.cfg, e.opts.Vars, e.opts.Functions, e.managed)
	for _, im := range e.cfg.Imports {
		each := map[string]cty.Value{"": cty.NilVal}
		if im.ForEach != nil {
			v, d := sc.evalExpr(im.ForEach)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			v, _ = v.UnmarkDeep()
			m, err := forEachMap(v)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid for_each argument", Detail: err.Error(), Subject: im.ForEach.Range().Ptr()})
				continue
			}
			each = m
		}
		keys := make([]string, 0, len(each))
		for k := range each {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var inst *instanceData
			if im.ForEach != nil {
				inst = &instanceData{eachKey: cty.StringVal(k), eachValue: each[k]}
			}
			t, d := e.importTarget(sc, im, inst)
			diags = append(diags, d...)
			if t != nil {
				out = append(out, t)
			}
		}
	}
	byAddr := map[string]*importTarget{}
	byObject := map[string]*importTarget{}
	for _, t := range out {
		if prev := byAddr[t.addr.String()]; prev != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate import configuration", Detail: fmt.Sprintf("%s is imported by the import block at %s too: an address can hold one object only.", t.addr, config.RangeString(prev.block.DeclRange)), Subject: t.block.ToRange.Ptr()})
			continue
		}
		byAddr[t.addr.String()] = t
		obj := t.addr.Type + "\x00" + t.id
		if prev := byObject[obj]; prev != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate import of one object", Detail: fmt.Sprintf("The %s with ID %q is imported into both %s and %s: two addresses would manage one object, and each apply would fight the other.", t.addr.Type, t.id, prev.addr, t.addr), Subject: t.block.ToRange.Ptr()})
			continue
		}
		byObject[obj] = t
	}
	return out, diags
}

// importTarget evaluates one instance of an import block.
func (e *Engine) importTarget(sc *scope, im *config.Import, inst *instanceData) (*importTarget, hcl.Diagnostics) {
	eval := func(expr hcl.Expression, want cty.Type, what string) (cty.Value, hcl.Diagnostics) {
		ectx, diags := sc.evalContext(expr.Variables(), inst)
		if diags.HasErrors() {
			return cty.NilVal, diags
		}
		v, d := expr.Value(ectx)
		diags = append(diags, d...)
		if diags.HasErrors() {
			return cty.NilVal, diags
		}
		v, _ = v.UnmarkDeep()
		if want != cty.DynamicPseudoType {
			cv, err := convert.Convert(v, want)
			if err != nil {
				return cty.NilVal, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid import " + what, Detail: fmt.Sprintf("The %s must be a %s: %s.", what, want.FriendlyName(), err), Subject: expr.Range().Ptr()})
			}
			v = cv
		}
		if v.IsNull() || !v.IsWhollyKnown() {
			return cty.NilVal, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid import " + what, Detail: fmt.Sprintf("The %s must be known when planning, and not null.", what), Subject: expr.Range().Ptr()})
		}
		return v, diags
	}
	idv, diags := eval(im.ID, cty.String, "id")
	if diags.HasErrors() {
		return nil, diags
	}
	if idv.AsString() == "" {
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid import id", Detail: "The id must not be empty.", Subject: im.ID.Range().Ptr()})
	}
	addr := im.To
	if im.ToKey != nil {
		kv, d := eval(im.ToKey, cty.DynamicPseudoType, "instance key")
		diags = append(diags, d...)
		if d.HasErrors() {
			return nil, diags
		}
		switch kv.Type() {
		case cty.String:
			addr = addr.Instance(kv.AsString())
		case cty.Number:
			bf := kv.AsBigFloat()
			i, acc := bf.Int64()
			if !bf.IsInt() || i < 0 || i > 1<<31-1 || acc != 0 {
				return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid import instance key", Detail: fmt.Sprintf("An instance key is a whole number from 0 or a string, not %s.", bf.Text('g', -1)), Subject: im.ToKey.Range().Ptr()})
			}
			addr = addr.Instance(int(i))
		default:
			return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid import instance key", Detail: "An instance key is a number or a string, not a " + kv.Type().FriendlyName() + ".", Subject: im.ToKey.Range().Ptr()})
		}
	}
	return &importTarget{addr: addr, id: idv.AsString(), block: im}, diags
}

// planImports reads the objects the import blocks name into s (which it
// changes) as the instances they name: the plan then compares them with
// their configuration, as any object in the state. It returns the
// imported instances by address. An import block whose instance the state
// already holds, with the same ID, imports nothing.
func (e *Engine) planImports(ctx context.Context, s *state.State, infos map[string]*resourceInfo) (map[string]*importTarget, hcl.Diagnostics) {
	if len(e.cfg.Imports) == 0 {
		return nil, nil
	}
	targets, diags := e.expandImports()
	if diags.HasErrors() {
		return nil, diags
	}
	out := map[string]*importTarget{}
	for _, t := range targets {
		d := e.checkImportTarget(s, t)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if inst := s.Instance(t.addr); inst != nil {
			// Already imported, by an earlier apply of this block or
			// otherwise: nothing to do.
			continue
		}
		ra := t.addr.ResourceAddress()
		info := infos[ra.String()]
		r := e.cfg.Resources[ra.String()]
		cfgVal := e.importConfig(s, infos, info, t.addr.Key)
		e.logger.Info("importing", "address", t.addr.String(), "id", t.id)
		resp := info.prov.p.ImportResource(ctx, providers.ImportRequest{TypeName: ra.Type, ID: t.id, Address: t.addr.String(), Lineage: e.stateLineage(), Config: cfgVal})
		d = providerDiags(resp.Diagnostics, "Cannot import "+t.addr.String(), t.block.DeclRange.Ptr())
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		v, err := convert.Convert(resp.Imported, info.schema.ImpliedType())
		if err != nil {
			diags = append(diags, errDiag("Provider returned an invalid value for "+t.addr.String(), err, t.block.DeclRange.Ptr()))
			continue
		}
		if err := newLiveState(s, e.hashKey).set(ra, info.provKey, t.addr.Key, v, info.schema, info.deps, r.Lifecycle.CreateBeforeDestroy); err != nil {
			diags = append(diags, errDiag("Cannot store "+t.addr.String(), err, nil))
			continue
		}
		out[t.addr.String()] = t
	}
	return out, diags
}

// checkImportTarget reports an import whose target the configuration does
// not declare (or declares without the kind of key it has), whose address
// the state holds with another object, or whose object the state holds at
// another address.
func (e *Engine) checkImportTarget(s *state.State, t *importTarget) hcl.Diagnostics {
	ra := t.addr.ResourceAddress()
	bad := func(summary, detail string) hcl.Diagnostics {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: t.block.ToRange.Ptr()}}
	}
	r := e.cfg.Resources[ra.String()]
	if r == nil {
		return bad("Configuration for import target does not exist", fmt.Sprintf("The import block at %s imports into %s, whose configuration does not exist. Add a %s %q block, or run \"pondctl plan -generate-config-out=FILE\" to have pond write one.", e.rangeString(t.block.DeclRange), t.addr, ra.Type, ra.Name))
	}
	switch t.addr.Key.(type) {
	case nil:
		if r.Count != nil || r.ForEach != nil {
			return bad("Import target needs an instance key", fmt.Sprintf("%s uses count or for_each (%s): name one instance, such as %s[0] or %s[\"key\"].", ra, config.RangeString(r.DeclRange), ra, ra))
		}
	case int:
		if r.Count == nil {
			return bad("Unexpected instance key", fmt.Sprintf("%s does not use count (%s), so it has no instance %s.", ra, config.RangeString(r.DeclRange), t.addr))
		}
	case string:
		if r.ForEach == nil {
			return bad("Unexpected instance key", fmt.Sprintf("%s does not use for_each (%s), so it has no instance %s.", ra, config.RangeString(r.DeclRange), t.addr))
		}
	}
	if inst := s.Instance(t.addr); inst != nil {
		if id := instanceID(inst); id != t.id {
			return bad("Import target already managed", fmt.Sprintf("%s is already in the state, holding the object with ID %q, not %q. Remove the import block, or first drop the instance from the state with \"pondctl state rm %s\".", t.addr, id, t.id, t.addr))
		}
		return nil
	}
	for _, sr := range s.Resources {
		if sr == nil || sr.Mode != state.ModeManaged || sr.Type != ra.Type {
			continue
		}
		for _, inst := range sr.Instances {
			if instanceID(inst) == t.id {
				other := sr.InstanceAddr(inst.IndexKey)
				return bad("Object already managed by pond", fmt.Sprintf("The %s with ID %q is already in the state as %s: importing it into %s too would have two addresses manage one object. To give it the new address, use a moved block instead.", ra.Type, t.id, other, t.addr))
			}
		}
	}
	return nil
}

// instanceID is the id attribute a state instance records, or "".
func instanceID(inst *state.Instance) string {
	var attrs struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(inst.Attributes, &attrs); err != nil {
		return ""
	}
	return attrs.ID
}

// markImports marks the changes of the imported instances, reports an
// imported instance the configuration does not keep (its key is not in
// count or for_each), and leaves out of the state the imports that
// -target or -exclude left out of the plan.
func (w *planWalk) markImports(imports map[string]*importTarget) hcl.Diagnostics {
	if len(imports) == 0 {
		return nil
	}
	var diags hcl.Diagnostics
	planned := map[string]bool{}
	for _, c := range w.p.Changes {
		t := imports[c.Addr.String()]
		if t == nil {
			continue
		}
		planned[c.Addr.String()] = true
		if c.Action == Delete {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Configuration for import target does not exist", Detail: fmt.Sprintf("The configuration does not declare %s (%s): its key is not one of the resource's instances. Importing it would destroy it.", t.addr, c.Reason), Subject: t.block.ToRange.Ptr()})
			continue
		}
		c.Importing = &Importing{ID: t.id}
	}
	for addr, t := range imports {
		if !planned[addr] {
			w.p.Refreshed.RemoveInstance(t.addr)
		}
	}
	return diags
}

// Imports returns the number of instances the plan imports.
func (p *Plan) Imports() int {
	n := 0
	for _, c := range p.Changes {
		if c.Importing != nil {
			n++
		}
	}
	return n
}
