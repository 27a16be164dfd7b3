package classad

import "sort"

// References returns the attribute names e refers to, split into those it
// reads from its own ad (bare names and MY.x) and those it reads from the
// match target (TARGET.x). Names are lower-cased, sorted and unique. The
// negotiator uses them to group jobs by the attributes that matter.
func References(e Expr) (my, target []string) {
	ms := map[string]bool{}
	ts := map[string]bool{}
	collectRefs(e, ms, ts)
	return sortedKeys(ms), sortedKeys(ts)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func collectRefs(e Expr, my, target map[string]bool) {
	switch n := e.(type) {
	case *attrNode:
		switch {
		case n.base == nil && !n.absolute:
			switch n.lname {
			case "my", "target", "parent":
			default:
				my[n.lname] = true
			}
		case n.scope == scopeMy:
			my[n.lname] = true
		case n.scope == scopeTarget:
			target[n.lname] = true
		case n.base != nil:
			collectRefs(n.base, my, target)
		}
	default:
		for _, c := range operands(e) {
			collectRefs(c, my, target)
		}
	}
}

// operands returns the subexpressions an operator, call or list
// evaluates (none for literals, attribute references and nested ads).
func operands(e Expr) []Expr {
	switch n := e.(type) {
	case *indexNode:
		return []Expr{n.base, n.idx}
	case *unaryNode:
		return []Expr{n.x}
	case *binaryNode:
		return []Expr{n.x, n.y}
	case *condNode:
		return []Expr{n.c, n.t, n.e}
	case *elvisNode:
		return []Expr{n.x, n.y}
	case *parenNode:
		return []Expr{n.x}
	case *callNode:
		return n.args
	case *listNode:
		return n.elems
	}
	return nil
}

// Conjuncts splits e at its top-level && operators, looking through
// parentheses, in evaluation order. A conjunction evaluates to true exactly
// when every conjunct does (the && operator is true only when both operands
// are), so a matchmaker may test the conjuncts separately. An expression
// that is not a conjunction is its own single conjunct.
func Conjuncts(e Expr) []Expr {
	var out []Expr
	var walk func(Expr)
	walk = func(x Expr) {
		switch n := x.(type) {
		case *parenNode:
			inner := n.x
			for p, ok := inner.(*parenNode); ok; p, ok = inner.(*parenNode) {
				inner = p.x
			}
			if b, ok := inner.(*binaryNode); ok && b.op == opAnd {
				walk(b)
				return
			}
		case *binaryNode:
			if n.op == opAnd {
				walk(n.x)
				walk(n.y)
				return
			}
		}
		out = append(out, x)
	}
	walk(e)
	return out
}

// AttrNames returns the names of every attribute e may read, in its own ad,
// its match target or enclosing ads (lower-cased, sorted, unique), looking
// into nested ad literals. Opaque is true when e may also read attributes it
// does not name: through eval() or through a whole ad taken as a value
// (a bare MY, TARGET or PARENT). Two evaluations of e with the same ads
// except for attributes outside the names (and opaque false) give the same
// result; the negotiator relies on this to share evaluations.
func AttrNames(e Expr) (names []string, opaque bool) {
	set := map[string]bool{}
	opaque = collectNames(e, set)
	return sortedKeys(set), opaque
}

func collectNames(e Expr, set map[string]bool) (opaque bool) {
	switch n := e.(type) {
	case *attrNode:
		switch {
		case n.base == nil && !n.absolute:
			switch n.lname {
			case "my", "target", "parent":
				return true
			}
			set[n.lname] = true
		case n.base == nil:
			set[n.lname] = true
		case n.scope != scopeGeneric:
			set[n.lname] = true
		default:
			// base.name: name is looked up in whatever ad base yields.
			set[n.lname] = true
			return collectNames(n.base, set)
		}
	case *callNode:
		if n.lname == "eval" {
			return true
		}
	case *adNode:
		for _, at := range n.ad.order {
			set[lower(at.name)] = true
			if collectNames(at.expr, set) {
				return true
			}
		}
	}
	for _, c := range operands(e) {
		if collectNames(c, set) {
			return true
		}
	}
	return false
}
