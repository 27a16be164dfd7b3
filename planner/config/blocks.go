package config

import (
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/state"
)

// Moved is a moved block: the objects recorded in state at From now belong
// to To. An address without an instance key names a whole resource when
// both ends have none, else the resource's single unkeyed instance.
type Moved struct {
	From, To           state.Address
	FromRange, ToRange hcl.Range
	DeclRange          hcl.Range
}

// Removed is a removed block: the resource From is no longer configured;
// Destroy says whether its objects are destroyed (true, the default) or
// only forgotten, left running and dropped from the state.
type Removed struct {
	From      state.Address
	FromRange hcl.Range
	Destroy   bool
	DeclRange hcl.Range
}

var movedSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "from", Required: true},
	{Name: "to", Required: true},
}}

var removedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "from", Required: true}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "lifecycle"}},
}

var removedLifecycleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "destroy"}}}

func (l *loader) decodeMoved(blk *hcl.Block) hcl.Diagnostics {
	content, diags := blk.Body.Content(movedSchema)
	if diags.HasErrors() {
		return diags
	}
	m := &Moved{DeclRange: blk.DefRange}
	var d hcl.Diagnostics
	fa, ta := content.Attributes["from"], content.Attributes["to"]
	m.From, d = l.moveEndpoint(fa.Expr, "from")
	diags = append(diags, d...)
	m.To, d = l.moveEndpoint(ta.Expr, "to")
	diags = append(diags, d...)
	if diags.HasErrors() {
		return diags
	}
	m.FromRange, m.ToRange = fa.Expr.Range(), ta.Expr.Range()
	l.cfg.Moved = append(l.cfg.Moved, m)
	return diags
}

func (l *loader) decodeRemoved(blk *hcl.Block) hcl.Diagnostics {
	content, diags := blk.Body.Content(removedSchema)
	if diags.HasErrors() {
		return diags
	}
	r := &Removed{DeclRange: blk.DefRange, Destroy: true}
	fa := content.Attributes["from"]
	from, d := l.moveEndpoint(fa.Expr, "from")
	diags = append(diags, d...)
	if d.HasErrors() {
		return diags
	}
	if from.HasKey() {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Resource instance keys not allowed",
			Detail:   fmt.Sprintf("A removed block names a whole resource, such as %s, not one of its instances: to stop managing one instance, change the resource's count or for_each.", from.ResourceAddress()),
			Subject:  fa.Expr.Range().Ptr(),
		})
	}
	r.From, r.FromRange = from, fa.Expr.Range()
	seen := false
	for _, b := range content.Blocks {
		if seen {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate lifecycle block", Detail: "This removed block already has a lifecycle block.", Subject: b.DefRange.Ptr()})
			continue
		}
		seen = true
		lc, d := b.Body.Content(removedLifecycleSchema)
		diags = append(diags, d...)
		if a := lc.Attributes["destroy"]; a != nil {
			r.Destroy, d = constBool(a.Expr, "destroy")
			diags = append(diags, d...)
		}
	}
	for _, prev := range l.cfg.Removed {
		if prev.From == r.From {
			return append(diags, duplicate("Duplicate removed block", "A removed block for "+r.From.String(), prev.DeclRange, blk.DefRange))
		}
	}
	l.cfg.Removed = append(l.cfg.Removed, r)
	return diags
}

// moveEndpoint reads the address a from, to argument names: a managed
// resource of a known type, or one of its instances.
func (l *loader) moveEndpoint(expr hcl.Expression, what string) (state.Address, hcl.Diagnostics) {
	bad := func(detail string) (state.Address, hcl.Diagnostics) {
		return state.Address{}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid address",
			Detail:   fmt.Sprintf("The %s argument must be a resource address, such as pool.campus or pool.w[\"a\"]: %s", what, detail),
			Subject:  expr.Range().Ptr(),
		}}
	}
	tr, d := hcl.AbsTraversalForExpr(expr)
	if d.HasErrors() {
		return bad("it is not a plain address (no quotes around it, no expressions in it).")
	}
	root := tr.RootName()
	switch {
	case root == "data":
		return bad("data sources hold nothing to move or forget; they are read again on every plan.")
	case root == "module":
		return bad("pond has no modules.")
	case !l.managed[root]:
		detail := fmt.Sprintf("there is no resource type %q.", root)
		if s := nameSuggestion(root, l.opts.managed()); s != "" {
			detail += fmt.Sprintf(" Did you mean %q?", s)
		}
		return bad(detail)
	}
	if len(tr) < 2 {
		return bad("a resource address is TYPE.NAME, optionally followed by [KEY].")
	}
	name, ok := tr[1].(hcl.TraverseAttr)
	if !ok {
		return bad("expected a resource name after " + root + ".")
	}
	a := state.Address{Mode: state.ModeManaged, Type: root, Name: name.Name}
	rest := tr[2:]
	if len(rest) > 0 {
		idx, ok := rest[0].(hcl.TraverseIndex)
		if !ok {
			return bad("an instance key is written [0] or [\"key\"].")
		}
		key, err := instanceKey(idx.Key)
		if err != nil {
			return bad(err.Error() + ".")
		}
		a.Key = key
		rest = rest[1:]
	}
	if len(rest) > 0 {
		return bad("nothing may follow the instance key.")
	}
	return a, nil
}

func instanceKey(v cty.Value) (any, error) {
	switch {
	case v.IsNull() || !v.IsKnown():
		return nil, errors.New("an instance key is a number or a string")
	case v.Type() == cty.String:
		return v.AsString(), nil
	case v.Type() == cty.Number:
		bf := v.AsBigFloat()
		if !bf.IsInt() || bf.Sign() < 0 || bf.Cmp(big.NewFloat(1<<31-1)) > 0 {
			return nil, fmt.Errorf("instance key %s is not a whole number from 0 to 2147483647", bf.Text('g', -1))
		}
		i, _ := bf.Int64()
		return int(i), nil
	}
	return nil, errors.New("an instance key is a number or a string")
}

func (l *loader) decodeRefactor(blk *hcl.Block) hcl.Diagnostics {
	switch blk.Type {
	case "moved":
		return l.decodeMoved(blk)
	case "import":
		return l.decodeImport(blk)
	}
	return l.decodeRemoved(blk)
}

// contains reports whether the move endpoint outer, as a destination,
// holds the endpoint inner, as a source: inner is outer, or an instance of
// the resource outer moves as a whole.
func contains(outer, inner *Moved) bool {
	o, i := outer.To, inner.From
	if o.ResourceAddress() != i.ResourceAddress() {
		return false
	}
	if outer.resourceLevel() {
		return true
	}
	return !inner.resourceLevel() && state.CompareAddresses(o, i) == 0
}

// resourceLevel reports whether m moves a whole resource: neither end has an
// instance key.
func (m *Moved) resourceLevel() bool { return !m.From.HasKey() && !m.To.HasKey() }

// MoveOrder returns the moved blocks in the order to apply them: a block
// whose source lies in another's destination comes after it, so that the
// objects follow a chain of moves (a to b, then b to c) to its end. It
// reports the blocks that conflict: two moving the same object, two
// moving objects to the same place, and chains that form a cycle.
func (c *Config) MoveOrder() ([]*Moved, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	ms := c.Moved
	for i, m := range ms {
		for _, prev := range ms[:i] {
			switch {
			case prev.From == m.From && prev.To != m.To:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Ambiguous move statements",
					Detail:   fmt.Sprintf("A statement at %s declared that %s moved to %s, but this statement instead declares that it moved to %s. Each object can move to only one destination.", RangeString(prev.DeclRange), m.From, prev.To, m.To),
					Subject:  m.DeclRange.Ptr(),
				})
			case prev.To == m.To && prev.From != m.From:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Ambiguous move statements",
					Detail:   fmt.Sprintf("A statement at %s declared that %s moved to %s, but this statement instead declares that %s moved there. Each object can have moved from only one source.", RangeString(prev.DeclRange), prev.From, m.To, m.From),
					Subject:  m.DeclRange.Ptr(),
				})
			}
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	// after[i] lists the blocks that must come before block i.
	after := make([][]int, len(ms))
	for i, m := range ms {
		for j, o := range ms {
			if i != j && contains(o, m) {
				after[i] = append(after[i], j)
			}
		}
	}
	const (
		unseen = iota
		visiting
		done
	)
	mark := make([]int, len(ms))
	var order []*Moved
	var stack []int
	var visit func(i int) bool
	visit = func(i int) bool {
		switch mark[i] {
		case done:
			return true
		case visiting:
			start := 0
			for k, s := range stack {
				if s == i {
					start = k
				}
			}
			var chain []string
			for _, s := range stack[start:] {
				chain = append(chain, fmt.Sprintf("%s to %s (%s)", ms[s].From, ms[s].To, RangeString(ms[s].DeclRange)))
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cyclic dependency in move statements",
				Detail:   "These chained move statements form a cycle, so there is no final place to move the objects to: " + strings.Join(chain, ", ") + ".",
				Subject:  ms[i].DeclRange.Ptr(),
			})
			return false
		}
		mark[i] = visiting
		stack = append(stack, i)
		for _, j := range after[i] {
			if !visit(j) {
				return false
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = done
		order = append(order, ms[i])
		return true
	}
	for i := range ms {
		if !visit(i) {
			return nil, diags
		}
	}
	return order, diags
}

// validateRefactoring checks the moved and removed blocks against the
// configuration.
func (c *Config) validateRefactoring() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, m := range c.Moved {
		switch {
		case m.From == m.To:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Redundant move statement",
				Detail:   fmt.Sprintf("This statement declares a move from %s to the same address, which moves nothing.", m.From),
				Subject:  m.DeclRange.Ptr(),
			})
			continue
		case m.From.Type != m.To.Type:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Resource type mismatch",
				Detail:   fmt.Sprintf("This statement declares a move from %s to %s, which is a resource of a different type: an object keeps its type when it moves.", m.From, m.To),
				Subject:  m.ToRange.Ptr(),
			})
			continue
		}
		if r := c.Resources[m.From.ResourceAddress().String()]; r != nil && declares(r, m) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Moved object still exists",
				Detail:   fmt.Sprintf("This statement declares a move from %s, but it is still declared in the configuration at %s. Change the resource's name (or its count or for_each) in the configuration, or remove the moved block.", m.From, RangeString(r.DeclRange)),
				Subject:  m.FromRange.Ptr(),
			})
		}
	}
	if len(diags) == 0 {
		_, d := c.MoveOrder()
		diags = append(diags, d...)
	}
	for _, rm := range c.Removed {
		if r := c.Resources[rm.From.String()]; r != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Removed resource still exists",
				Detail:   fmt.Sprintf("This removed block declares that %s was removed, but it is still declared in the configuration at %s. Remove the resource block, or the removed block.", rm.From, RangeString(r.DeclRange)),
				Subject:  rm.FromRange.Ptr(),
			})
		}
		for _, m := range c.Moved {
			if m.To.ResourceAddress() == rm.From {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Removed resource is the target of a move",
					Detail:   fmt.Sprintf("The moved block at %s moves objects to %s, which this removed block declares removed: move them elsewhere, or remove them from where they were.", RangeString(m.DeclRange), rm.From),
					Subject:  rm.FromRange.Ptr(),
				})
			}
		}
	}
	return diags
}

// declares reports whether the configured resource r declares the source of
// m: the whole resource for a resource-level move, else an instance of the
// kind of key the source has (none without count and for_each, a number
// with count, a string with for_each).
func declares(r *Resource, m *Moved) bool {
	if m.resourceLevel() {
		return true
	}
	switch m.From.Key.(type) {
	case nil:
		return r.Count == nil && r.ForEach == nil
	case int:
		return r.Count != nil
	default:
		return r.ForEach != nil
	}
}
