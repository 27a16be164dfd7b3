package classad

import (
	"math"
	"sort"
	"strings"
)

// Ad is a ClassAd: a set of uniquely named expressions. Names are
// case-insensitive and keep the spelling they were first set with. Ads
// keep insertion order for printing. An Ad must not be modified while it
// is being evaluated; concurrent evaluation of an unmodified Ad is safe.
type Ad struct {
	attrs map[string]*attr
	order []*attr
	// slab holds the attributes of an ad made with its size known
	// (NewAdSize, Copy): one allocation rather than one an attribute.
	slab   []attr
	parent *Ad
	// literal marks a record literal of an expression: while it has no
	// parent, names it lacks resolve in the ad the expression is
	// evaluated in, as in HTCondor.
	literal bool
}

type attr struct {
	name  string
	lname string // name in lower case, the attribute's key
	expr  Expr
}

// NewAd returns an empty ad.
func NewAd() *Ad { return &Ad{attrs: make(map[string]*attr)} }

// NewAdSize returns an empty ad with room for n attributes, which it
// holds without allocating as they are set.
func NewAdSize(n int) *Ad {
	n = max(n, 0)
	return &Ad{attrs: make(map[string]*attr, n), order: make([]*attr, 0, n), slab: make([]attr, 0, n)}
}

// newAttr returns a new attribute of a, from its slab while there is
// room.
func (a *Ad) newAttr(name, lname string, expr Expr) *attr {
	if len(a.slab) < cap(a.slab) {
		a.slab = a.slab[:len(a.slab)+1]
		at := &a.slab[len(a.slab)-1]
		at.name, at.lname, at.expr = name, lname, expr
		return at
	}
	return &attr{name: name, lname: lname, expr: expr}
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// Set binds name to expr, replacing any previous binding regardless of
// case. Nested ad literals in expr take this ad as their parent scope.
func (a *Ad) Set(name string, expr Expr) {
	if a.attrs == nil {
		a.attrs = make(map[string]*attr)
	}
	if expr == nil {
		expr = &litNode{}
	}
	adoptNested(expr, a)
	ln := lower(name)
	if at, ok := a.attrs[ln]; ok {
		at.expr = expr
		return
	}
	at := a.newAttr(name, ln, expr)
	a.attrs[ln] = at
	a.order = append(a.order, at)
}

func adoptNested(e Expr, parent *Ad) {
	switch n := e.(type) {
	case *adNode:
		if n.ad.parent == nil {
			n.ad.parent = parent
		}
	case *listNode:
		for _, x := range n.elems {
			adoptNested(x, parent)
		}
	case *parenNode:
		adoptNested(n.x, parent)
	case *attrNode:
		if n.base != nil {
			adoptNested(n.base, parent)
		}
	case *indexNode:
		adoptNested(n.base, parent)
		adoptNested(n.idx, parent)
	case *unaryNode:
		adoptNested(n.x, parent)
	case *binaryNode:
		adoptNested(n.x, parent)
		adoptNested(n.y, parent)
	case *condNode:
		adoptNested(n.c, parent)
		adoptNested(n.t, parent)
		adoptNested(n.e, parent)
	case *elvisNode:
		adoptNested(n.x, parent)
		adoptNested(n.y, parent)
	case *callNode:
		for _, x := range n.args {
			adoptNested(x, parent)
		}
	}
}

// SetValue binds name to a literal value.
func (a *Ad) SetValue(name string, v Value) { a.Set(name, valueExpr(v)) }

// SetInt binds name to an integer literal.
func (a *Ad) SetInt(name string, i int64) { a.Set(name, &litNode{Int(i)}) }

// SetReal binds name to a real literal.
func (a *Ad) SetReal(name string, f float64) { a.Set(name, &litNode{Real(f)}) }

// SetString binds name to a string literal.
func (a *Ad) SetString(name, s string) { a.Set(name, &litNode{String(s)}) }

// SetBool binds name to a boolean literal.
func (a *Ad) SetBool(name string, b bool) { a.Set(name, &litNode{Bool(b)}) }

// SetExpr parses src and binds name to it.
func (a *Ad) SetExpr(name, src string) error {
	e, err := ParseExpr(src)
	if err != nil {
		return err
	}
	a.Set(name, e)
	return nil
}

// valueExpr converts a value to an equivalent literal expression.
func valueExpr(v Value) Expr {
	switch v.kind {
	case ListKind:
		elems := make([]Expr, len(v.elems()))
		for i, e := range v.elems() {
			elems[i] = valueExpr(e)
		}
		return newList(elems)
	case AdKind:
		return &adNode{v.ad}
	case AbsTimeKind, RelTimeKind:
		return &litNode{v}
	}
	return &litNode{v}
}

// Lookup returns the expression bound to name (case-insensitive).
func (a *Ad) Lookup(name string) (Expr, bool) {
	if a == nil {
		return nil, false
	}
	at, ok := a.attrs[lower(name)]
	if !ok {
		return nil, false
	}
	return at.expr, true
}

func (a *Ad) lookupLower(lname string) *attr {
	if a == nil {
		return nil
	}
	return a.attrs[lname]
}

// Delete removes name and reports whether it was present.
func (a *Ad) Delete(name string) bool {
	ln := lower(name)
	at, ok := a.attrs[ln]
	if !ok {
		return false
	}
	delete(a.attrs, ln)
	for i, o := range a.order {
		if o == at {
			a.order = append(a.order[:i], a.order[i+1:]...)
			break
		}
	}
	return true
}

// Len returns the number of attributes.
func (a *Ad) Len() int { return len(a.order) }

// Names returns the attribute names in insertion order.
func (a *Ad) Names() []string {
	out := make([]string, len(a.order))
	for i, at := range a.order {
		out[i] = at.name
	}
	return out
}

// SortedNames returns the attribute names sorted case-insensitively.
func (a *Ad) SortedNames() []string {
	out := a.Names()
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i]) < strings.ToLower(out[j]) })
	return out
}

// Parent returns the lexically enclosing ad of a nested ad, or nil.
func (a *Ad) Parent() *Ad { return a.parent }

// Copy returns a shallow copy of a: the same expressions under the same
// names, with no parent.
func (a *Ad) Copy() *Ad {
	c := NewAdSize(len(a.order))
	for _, at := range a.order {
		adoptNested(at.expr, c)
		ln := at.lname
		if ln == "" {
			ln = lower(at.name)
		}
		n := c.newAttr(at.name, ln, at.expr)
		c.attrs[ln] = n
		c.order = append(c.order, n)
	}
	return c
}

// Update copies every attribute of other into a, replacing existing ones.
func (a *Ad) Update(other *Ad) {
	for _, at := range other.order {
		a.Set(at.name, at.expr)
	}
}

// EvalAttr evaluates the named attribute in the context of a alone.
func (a *Ad) EvalAttr(name string) Value {
	st := getState(a, nil)
	defer putState(st)
	return st.evalAttrIn(a, lower(name))
}

// EvalAttrWith evaluates the named attribute of a with target as TARGET,
// as the startd evaluates START against a job.
func (a *Ad) EvalAttrWith(name string, target *Ad) Value {
	st := getState(a, target)
	defer putState(st)
	return st.evalAttrIn(a, lower(name))
}

// EvalNumber evaluates the named attribute of a with target as TARGET
// (target may be nil) and returns it as a number, or def when a has no
// such attribute or it does not evaluate to a number other than NaN.
func (a *Ad) EvalNumber(name string, target *Ad, def float64) float64 {
	e, ok := a.Lookup(name)
	if !ok {
		return def
	}
	f, ok := EvalWith(e, a, target).NumberValue()
	if !ok || math.IsNaN(f) {
		return def
	}
	return f
}

// EvalExpr evaluates e with a as its scope (MY) and no target.
func (a *Ad) EvalExpr(e Expr) Value {
	return EvalWith(e, a, nil)
}

// EvalWith evaluates e with my as MY (its scope) and target as TARGET;
// either may be nil.
func EvalWith(e Expr, my, target *Ad) Value {
	st := getState(my, target)
	defer putState(st)
	st.cur = my
	return st.eval(e)
}

// String prints the ad in old syntax, one "Name = Expr" per line.
func (a *Ad) String() string {
	var b strings.Builder
	for _, at := range a.order {
		b.WriteString(at.name)
		b.WriteString(" = ")
		at.expr.write(&b, true)
		b.WriteByte('\n')
	}
	return b.String()
}

// NewSyntax prints the ad in new syntax on one line: "[ a = 1; b = 2 ]",
// its attributes in the order HTCondor prints them (see htcondorOrder).
func (a *Ad) NewSyntax() string {
	var b strings.Builder
	a.write(&b, false)
	return b.String()
}

func (a *Ad) write(b *strings.Builder, old bool) {
	if len(a.order) == 0 {
		b.WriteString("[  ]")
		return
	}
	b.WriteString("[ ")
	order := a.order
	if !old {
		order = htcondorOrder(a.order)
	}
	for i, at := range order {
		if i > 0 {
			b.WriteString("; ")
		}
		writeName(b, at.name)
		b.WriteString(" = ")
		at.expr.write(b, old)
	}
	b.WriteString(" ]")
}
