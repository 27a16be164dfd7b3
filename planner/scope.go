package planner

import (
	"fmt"
	"sort"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

// scope holds every value an expression may refer to, during a plan (planned
// values, possibly unknown) or an apply (values as they become known). It is
// safe for concurrent use.
type scope struct {
	cfg       *config.Config
	vars      map[string]cty.Value
	funcs     map[string]function.Function
	pathValue cty.Value
	managed   map[string]bool // managed resource type names

	mu sync.Mutex
	// instances maps instance address strings to their values.
	instances map[string]cty.Value
	// keys maps resource addresses to their expansion: nil slice for a
	// single instance, []any of ints (count) or strings (for_each).
	keys map[string]*expansion
	// locals caches local values; cleared when a value they may depend on
	// changes.
	locals map[string]cty.Value
}

// expansion records how a resource expanded.
type expansion struct {
	mode int // 0 single, 1 count, 2 for_each
	keys []any
}

const (
	expandSingle = iota
	expandCount
	expandForEach
)

func newScope(cfg *config.Config, vars map[string]cty.Value, funcs map[string]function.Function, managed map[string]bool) *scope {
	return &scope{
		cfg:   cfg,
		vars:  vars,
		funcs: funcs,
		pathValue: cty.ObjectVal(map[string]cty.Value{
			"module": cty.StringVal(cfg.Dir),
			"root":   cty.StringVal(cfg.Dir),
			"cwd":    cty.StringVal(cfg.Dir),
		}),
		managed:   managed,
		instances: map[string]cty.Value{},
		keys:      map[string]*expansion{},
		locals:    map[string]cty.Value{},
	}
}

func (s *scope) setExpansion(addr state.Address, e *expansion) {
	s.mu.Lock()
	s.keys[addr.String()] = e
	s.locals = map[string]cty.Value{}
	s.mu.Unlock()
}

func (s *scope) setInstance(addr state.Address, v cty.Value) {
	s.mu.Lock()
	s.instances[addr.String()] = v
	s.locals = map[string]cty.Value{}
	s.mu.Unlock()
}

// resourceValue is the value a reference to the whole resource sees: an
// object for a single instance, a tuple for count, an object keyed by
// for_each keys.
func (s *scope) resourceValue(addr state.Address) cty.Value {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[addr.String()]
	if e == nil {
		return cty.DynamicVal
	}
	get := func(k any) cty.Value {
		if v, ok := s.instances[addr.Instance(k).String()]; ok && v != cty.NilVal {
			return v
		}
		return cty.DynamicVal
	}
	switch e.mode {
	case expandCount:
		if len(e.keys) == 0 {
			return cty.EmptyTupleVal
		}
		vals := make([]cty.Value, len(e.keys))
		for i, k := range e.keys {
			vals[i] = get(k)
		}
		return cty.TupleVal(vals)
	case expandForEach:
		if len(e.keys) == 0 {
			return cty.EmptyObjectVal
		}
		m := make(map[string]cty.Value, len(e.keys))
		for _, k := range e.keys {
			m[k.(string)] = get(k)
		}
		return cty.ObjectVal(m)
	default:
		return get(nil)
	}
}

// instanceData is what count.index and each.* resolve to while evaluating
// one instance.
type instanceData struct {
	countIndex cty.Value
	eachKey    cty.Value
	eachValue  cty.Value
}

// evalExpr evaluates expr in a context holding what it refers to. Its
// diagnostics are those of building the context and, when that has no
// errors, those of evaluating expr.
func (s *scope) evalExpr(expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	ectx, diags := s.evalContext(expr.Variables(), nil)
	if diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	v, d := expr.Value(ectx)
	return v, append(diags, d...)
}

// evalContext builds an evaluation context holding exactly what the given
// traversals refer to.
func (s *scope) evalContext(travs []hcl.Traversal, inst *instanceData) (*hcl.EvalContext, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	ev := &evalVars{
		vars:       map[string]cty.Value{},
		localVals:  map[string]cty.Value{},
		varVals:    map[string]cty.Value{},
		resByType:  map[string]map[string]cty.Value{},
		dataByType: map[string]map[string]cty.Value{},
	}
	for _, t := range travs {
		diags = append(diags, s.resolve(ev, t, inst)...)
	}
	return &hcl.EvalContext{Variables: ev.variables(), Functions: s.funcs}, diags
}

// evalVars collects the values the traversals of one evaluation refer to.
type evalVars struct {
	vars       map[string]cty.Value // count, each, path
	localVals  map[string]cty.Value
	varVals    map[string]cty.Value
	resByType  map[string]map[string]cty.Value
	dataByType map[string]map[string]cty.Value
}

// variables returns the top-level variables of the evaluation context.
func (ev *evalVars) variables() map[string]cty.Value {
	vars := ev.vars
	if len(ev.varVals) > 0 {
		vars["var"] = cty.ObjectVal(ev.varVals)
	}
	if len(ev.localVals) > 0 {
		vars["local"] = cty.ObjectVal(ev.localVals)
	}
	for typ, m := range ev.resByType {
		vars[typ] = cty.ObjectVal(m)
	}
	if len(ev.dataByType) > 0 {
		d := map[string]cty.Value{}
		for typ, m := range ev.dataByType {
			d[typ] = cty.ObjectVal(m)
		}
		vars["data"] = cty.ObjectVal(d)
	}
	return vars
}

// resolve records in ev the value traversal t refers to.
func (s *scope) resolve(ev *evalVars, t hcl.Traversal, inst *instanceData) hcl.Diagnostics {
	switch t.RootName() {
	case "var":
		name, ok := attrName(t, 1)
		if !ok {
			return hcl.Diagnostics{badRef(t, "A reference to a variable must name it, as var.NAME.")}
		}
		v, ok := s.vars[name]
		if !ok {
			return hcl.Diagnostics{undeclared(t, "input variable", name)}
		}
		ev.varVals[name] = v
	case "local":
		name, ok := attrName(t, 1)
		if !ok {
			return hcl.Diagnostics{badRef(t, "A reference to a local value must name it, as local.NAME.")}
		}
		v, d := s.local(name, t.SourceRange(), nil)
		ev.localVals[name] = v
		return d
	case "count":
		if inst == nil || inst.countIndex == cty.NilVal {
			return hcl.Diagnostics{badRef(t, "count.index is only available in a resource that sets count.")}
		}
		ev.vars["count"] = cty.ObjectVal(map[string]cty.Value{"index": inst.countIndex})
	case "each":
		if inst == nil || inst.eachKey == cty.NilVal {
			return hcl.Diagnostics{badRef(t, "each.key and each.value are only available in a resource that sets for_each.")}
		}
		ev.vars["each"] = cty.ObjectVal(map[string]cty.Value{"key": inst.eachKey, "value": inst.eachValue})
	case "path":
		ev.vars["path"] = s.pathValue
	case "data":
		return s.resolveData(ev, t)
	default:
		return s.resolveResource(ev, t)
	}
	return nil
}

// resolveData records the value of the data source t refers to.
func (s *scope) resolveData(ev *evalVars, t hcl.Traversal) hcl.Diagnostics {
	typ, ok1 := attrName(t, 1)
	name, ok2 := attrName(t, 2)
	if !ok1 || !ok2 {
		return hcl.Diagnostics{badRef(t, "A reference to a data source must be of the form data.TYPE.NAME.")}
	}
	addr := state.Address{Mode: state.ModeData, Type: typ, Name: name}
	if _, ok := s.cfg.Resources[addr.String()]; !ok {
		return hcl.Diagnostics{undeclared(t, "data source", addr.String())}
	}
	if ev.dataByType[typ] == nil {
		ev.dataByType[typ] = map[string]cty.Value{}
	}
	ev.dataByType[typ][name] = s.resourceValue(addr)
	return nil
}

// resolveResource records the value of the managed resource t refers to.
func (s *scope) resolveResource(ev *evalVars, t hcl.Traversal) hcl.Diagnostics {
	root := t.RootName()
	if !s.managed[root] {
		if root == "self" || root == "terraform" {
			return hcl.Diagnostics{badRef(t, fmt.Sprintf("%q is not available here.", root))}
		}
		return hcl.Diagnostics{badRef(t, fmt.Sprintf("There is no variable, resource type or object named %q.", root))}
	}
	name, ok := attrName(t, 1)
	if !ok {
		return hcl.Diagnostics{badRef(t, "A reference to a resource must be of the form TYPE.NAME.")}
	}
	addr := state.Address{Mode: state.ModeManaged, Type: root, Name: name}
	if _, ok := s.cfg.Resources[addr.String()]; !ok {
		return hcl.Diagnostics{undeclared(t, "resource", addr.String())}
	}
	if ev.resByType[root] == nil {
		ev.resByType[root] = map[string]cty.Value{}
	}
	ev.resByType[root][name] = s.resourceValue(addr)
	return nil
}

// local evaluates a local value, detecting cycles through the visiting set.
func (s *scope) local(name string, rng hcl.Range, visiting map[string]bool) (cty.Value, hcl.Diagnostics) {
	s.mu.Lock()
	if v, ok := s.locals[name]; ok {
		s.mu.Unlock()
		return v, nil
	}
	s.mu.Unlock()
	l, ok := s.cfg.Locals[name]
	if !ok {
		return cty.DynamicVal, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Reference to undeclared local value",
			Detail:   fmt.Sprintf("A local value named %q has not been declared.", name),
			Subject:  rng.Ptr(),
		}}
	}
	if visiting == nil {
		visiting = map[string]bool{}
	}
	if visiting[name] {
		return cty.DynamicVal, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cycle in local values",
			Detail:   fmt.Sprintf("local.%s refers to itself through other local values.", name),
			Subject:  l.DeclRange.Ptr(),
		}}
	}
	visiting[name] = true
	defer delete(visiting, name)
	// Locals referring to locals are resolved recursively so that cycles
	// among them are caught here.
	var diags hcl.Diagnostics
	travs := l.Expr.Variables()
	nested := map[string]cty.Value{}
	rest := travs[:0:0]
	for _, t := range travs {
		if t.RootName() == "local" {
			if n, ok := attrName(t, 1); ok {
				v, d := s.local(n, t.SourceRange(), visiting)
				diags = append(diags, d...)
				nested[n] = v
				continue
			}
		}
		rest = append(rest, t)
	}
	if diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	ectx, d := s.evalContext(rest, nil)
	diags = append(diags, d...)
	if len(nested) > 0 {
		ectx.Variables["local"] = cty.ObjectVal(nested)
	}
	v, d := l.Expr.Value(ectx)
	diags = append(diags, d...)
	if !diags.HasErrors() {
		s.mu.Lock()
		s.locals[name] = v
		s.mu.Unlock()
	}
	return v, diags
}

func attrName(t hcl.Traversal, i int) (string, bool) {
	if len(t) <= i {
		return "", false
	}
	switch s := t[i].(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	}
	return "", false
}

func badRef(t hcl.Traversal, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid reference", Detail: detail, Subject: t.SourceRange().Ptr()}
}

func undeclared(t hcl.Traversal, kind, name string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Reference to undeclared " + kind,
		Detail:   fmt.Sprintf("No %s named %q is declared in this configuration.", kind, name),
		Subject:  t.SourceRange().Ptr(),
	}
}

// refAddrs returns the resource-level addresses (resources and data sources)
// the traversals refer to, sorted and without duplicates.
func refAddrs(travs []hcl.Traversal, managed map[string]bool) []string {
	set := map[string]struct{}{}
	for _, t := range travs {
		root := t.RootName()
		if root == "data" {
			typ, ok1 := attrName(t, 1)
			name, ok2 := attrName(t, 2)
			if ok1 && ok2 {
				set["data."+typ+"."+name] = struct{}{}
			}
			continue
		}
		if managed[root] {
			if name, ok := attrName(t, 1); ok {
				set[root+"."+name] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
