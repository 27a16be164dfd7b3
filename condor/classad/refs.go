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
	case *indexNode:
		collectRefs(n.base, my, target)
		collectRefs(n.idx, my, target)
	case *unaryNode:
		collectRefs(n.x, my, target)
	case *binaryNode:
		collectRefs(n.x, my, target)
		collectRefs(n.y, my, target)
	case *condNode:
		collectRefs(n.c, my, target)
		collectRefs(n.t, my, target)
		collectRefs(n.e, my, target)
	case *elvisNode:
		collectRefs(n.x, my, target)
		collectRefs(n.y, my, target)
	case *parenNode:
		collectRefs(n.x, my, target)
	case *callNode:
		for _, a := range n.args {
			collectRefs(a, my, target)
		}
	case *listNode:
		for _, x := range n.elems {
			collectRefs(x, my, target)
		}
	}
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
			if b, ok := n.x.(*binaryNode); ok && b.op == opAnd {
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
	case *indexNode:
		return collectNames(n.base, set) || collectNames(n.idx, set)
	case *unaryNode:
		return collectNames(n.x, set)
	case *binaryNode:
		return collectNames(n.x, set) || collectNames(n.y, set)
	case *condNode:
		return collectNames(n.c, set) || collectNames(n.t, set) || collectNames(n.e, set)
	case *elvisNode:
		return collectNames(n.x, set) || collectNames(n.y, set)
	case *parenNode:
		return collectNames(n.x, set)
	case *callNode:
		if n.lname == "eval" {
			return true
		}
		for _, a := range n.args {
			if collectNames(a, set) {
				return true
			}
		}
	case *listNode:
		for _, x := range n.elems {
			if collectNames(x, set) {
				return true
			}
		}
	case *adNode:
		for _, at := range n.ad.order {
			set[lower(at.name)] = true
			if collectNames(at.expr, set) {
				return true
			}
		}
	}
	return false
}
