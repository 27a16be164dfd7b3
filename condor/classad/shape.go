package classad

// Logic reports whether e, looking through parentheses, is a conjunction
// (op "&&") or a disjunction (op "||"), and returns its operands. A query
// planner uses it with AttrCompare to find what a constraint implies.
func Logic(e Expr) (op string, x, y Expr, ok bool) {
	e = unparen(e)
	b, isBin := e.(*binaryNode)
	if !isBin || (b.op != opAnd && b.op != opOr) {
		return "", nil, nil, false
	}
	return opText[b.op], b.x, b.y, true
}

// AttrCompare reports whether e, looking through parentheses, compares an
// attribute of the ad it is evaluated in (a bare name or MY.name) with a
// literal, on either side. It returns the attribute's name as written, the
// operator as seen with the attribute on its left ("==", "!=", "<", "<=",
// ">", ">=", "is" or "isnt"; "5 < X" is "X > 5") and the literal's value.
func AttrCompare(e Expr) (attr, op string, lit Value, ok bool) {
	b, isBin := unparen(e).(*binaryNode)
	if !isBin || b.op < opEq || b.op > opGe {
		return "", "", Value{}, false
	}
	x, y := unparen(b.x), unparen(b.y)
	o := b.op
	if _, isLit := x.(*litNode); isLit {
		x, y = y, x
		switch o {
		case opLt:
			o = opGt
		case opLe:
			o = opGe
		case opGt:
			o = opLt
		case opGe:
			o = opLe
		}
	}
	a, isAttr := x.(*attrNode)
	l, isLit := y.(*litNode)
	if !isAttr || !isLit || a.absolute {
		return "", "", Value{}, false
	}
	switch {
	case a.base == nil:
		switch a.lname {
		case "my", "target", "parent":
			return "", "", Value{}, false
		}
	case a.scope != scopeMy:
		return "", "", Value{}, false
	}
	return a.name, opText[o], l.v, true
}

func unparen(e Expr) Expr {
	for p, ok := e.(*parenNode); ok; p, ok = e.(*parenNode) {
		e = p.x
	}
	return e
}

// Literal reports whether e, looking through parentheses, is a literal,
// and returns its value.
func Literal(e Expr) (Value, bool) {
	l, ok := unparen(e).(*litNode)
	if !ok {
		return Value{}, false
	}
	return l.v, true
}
