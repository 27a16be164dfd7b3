package classad

import (
	"math"
	"sync"
	"time"
)

// state carries the context of one evaluation: the current scope ad, the
// two ads of a match (left and right) and the attributes being evaluated,
// to stop circular references.
type state struct {
	left, right *Ad
	cur         *Ad
	stack       []*attr
	depth       int
	steps       int
}

// maxSteps bounds the attribute evaluations of one top-level evaluation,
// so ads whose references fan out exponentially end in error, not a hang.
const maxSteps = 1 << 20

// maxEvalDepth bounds the nesting of attribute evaluations.
const maxEvalDepth = 500

var statePool = sync.Pool{New: func() any { return &state{stack: make([]*attr, 0, 16)} }}

func getState(left, right *Ad) *state {
	st := statePool.Get().(*state)
	st.left, st.right, st.cur = left, right, left
	return st
}

func putState(st *state) {
	st.left, st.right, st.cur = nil, nil, nil
	st.stack = st.stack[:0]
	st.depth = 0
	st.steps = 0
	statePool.Put(st)
}

func (st *state) eval(e Expr) Value { return e.eval(st) }

// enclosing returns the ad whose names a's missing names resolve in: its
// parent or, for a record literal of the evaluated expression, the ad the
// expression is evaluated in.
func (st *state) enclosing(a *Ad) *Ad {
	if a.parent != nil {
		return a.parent
	}
	if a.literal && st.left != nil && !encloses(a, st.left) {
		return st.left
	}
	return nil
}

// encloses reports whether b is a or nested in a, so that resolving a's
// names in b would loop.
func encloses(a, b *Ad) bool {
	for ; b != nil; b = b.parent {
		if b == a {
			return true
		}
	}
	return false
}

// The ads HTCondor's match ad puts above the two ads of a match: the
// PARENT of MY and of TARGET. They are never modified.
var (
	leftContext  = mustParseAd(`[ ad = .LEFT; my = .LEFT; other = .RIGHT; target = .RIGHT ]`)
	rightContext = mustParseAd(`[ ad = .RIGHT; my = .RIGHT; other = .LEFT; target = .LEFT ]`)
)

// matchAttrs are the match ad's attributes after the two ads and their
// contexts.
var matchAttrs = func() []*attr {
	var out []*attr
	for _, kv := range [][2]string{
		{"leftRankValue", "LEFT.rank"}, {"rightRankValue", "RIGHT.rank"},
		{"symmetricMatch", "RIGHT.requirements && LEFT.requirements"},
		{"leftMatchesRight", "RIGHT.requirements"}, {"rightMatchesLeft", "LEFT.requirements"},
	} {
		e, err := ParseExpr(kv[1])
		if err != nil {
			panic(err)
		}
		out = append(out, &attr{name: kv[0], lname: lower(kv[0]), expr: e})
	}
	return out
}()

// matchAd builds the ad HTCondor evaluates a match in (what .MY and .SELF
// name there), holding the two ads without adopting them.
func (st *state) matchAd() *Ad {
	a := NewAd()
	add := func(at *attr) {
		a.attrs[at.lname] = at
		a.order = append(a.order, at)
	}
	add(&attr{name: "lCtx", lname: "lctx", expr: &adNode{leftContext}})
	add(&attr{name: "LEFT", lname: "left", expr: &adNode{st.left}})
	add(&attr{name: "rCtx", lname: "rctx", expr: &adNode{rightContext}})
	add(&attr{name: "RIGHT", lname: "right", expr: &adNode{st.right}})
	for _, at := range matchAttrs {
		add(at)
	}
	return a
}

func mustParseAd(src string) *Ad {
	a, err := ParseNewAd(src)
	if err != nil {
		panic(err)
	}
	return a
}

// inMatch reports whether r, an outermost ad, belongs to a match of two
// ads.
func (st *state) inMatch(r *Ad) bool {
	return st.left != nil && st.right != nil && (r == st.left || r == st.right || r == leftContext || r == rightContext)
}

// parentOf returns the PARENT of a: its enclosing ad or, for the two ads
// of a match, HTCondor's context ad above them.
func (st *state) parentOf(a *Ad) *Ad {
	if a == nil {
		return nil
	}
	if e := st.enclosing(a); e != nil {
		return e
	}
	if st.left != nil && st.right != nil {
		switch a {
		case st.left:
			return leftContext
		case st.right:
			return rightContext
		}
	}
	return nil
}

// root returns the outermost ad enclosing a.
func (st *state) root(a *Ad) *Ad {
	for a != nil {
		e := st.enclosing(a)
		if e == nil {
			return a
		}
		a = e
	}
	return nil
}

// other returns the match partner of the ad tree that a belongs to.
func (st *state) other(a *Ad) *Ad {
	r := st.root(a)
	switch {
	case r == nil:
		return nil
	case r == st.left:
		return st.right
	case r == st.right:
		return st.left
	}
	return nil
}

// evalBound evaluates attribute at found in ad scope.
func (st *state) evalBound(scope *Ad, at *attr) Value {
	if l, ok := at.expr.(*litNode); ok {
		return l.v
	}
	for _, s := range st.stack {
		if s == at {
			// A reference to an attribute being evaluated is circular:
			// undefined, as HTCondor evaluates it.
			return Undefined()
		}
	}
	st.steps++
	if len(st.stack) >= maxEvalDepth || st.steps > maxSteps {
		return ErrorValue()
	}
	st.stack = append(st.stack, at)
	saved := st.cur
	st.cur = scope
	v := at.expr.eval(st)
	st.cur = saved
	st.stack = st.stack[:len(st.stack)-1]
	return v
}

// lookupScoped finds lname starting at ad start, then in its enclosing
// ads, and evaluates it.
func (st *state) lookupScoped(start *Ad, lname string) Value {
	for a := start; a != nil; a = st.enclosing(a) {
		if at := a.attrs[lname]; at != nil {
			return st.evalBound(a, at)
		}
	}
	return Undefined()
}

// lookupBare resolves a bare attribute name: the current ad and its
// enclosing ads, then (in a match) the other ad, as HTCondor's
// matchmaking does for references without MY. or TARGET.
func (st *state) lookupBare(start *Ad, lname string) Value {
	for a := start; a != nil; a = st.enclosing(a) {
		if at := a.attrs[lname]; at != nil {
			return st.evalBound(a, at)
		}
	}
	if o := st.other(start); o != nil {
		if at := o.attrs[lname]; at != nil {
			return st.evalBound(o, at)
		}
	}
	if lname == "currenttime" {
		// The manual's ClassAd environment.
		return Int(time.Now().Unix())
	}
	return Undefined()
}

func (st *state) evalAttrIn(a *Ad, lname string) Value {
	saved := st.cur
	st.cur = a
	v := st.lookupBare(a, lname)
	st.cur = saved
	return v
}

func (n *litNode) eval(*state) Value { return n.v }

func (n *parenNode) eval(st *state) Value { return n.x.eval(st) }

func (n *adNode) eval(*state) Value { return Value{kind: AdKind, ad: n.ad} }

func (n *listNode) eval(st *state) Value {
	if n.konst != nil {
		return Value{kind: ListKind, lp: n.konst}
	}
	vs := make([]Value, len(n.elems))
	for i, e := range n.elems {
		vs[i] = e.eval(st)
	}
	return Value{kind: ListKind, lp: &listData{vals: vs, src: n}}
}

func (n *attrNode) eval(st *state) Value {
	if n.base == nil {
		if n.absolute {
			r := st.root(st.cur)
			if r == nil {
				return Undefined()
			}
			if st.inMatch(r) {
				// In a match HTCondor's outermost ad is the match ad,
				// which holds the two ads as LEFT and RIGHT.
				switch n.lname {
				case "left":
					return AdValue(st.left)
				case "right":
					return AdValue(st.right)
				case "my", "self":
					return AdValue(st.matchAd())
				}
				return Undefined()
			}
			if r.attrs[n.lname] == nil && (n.lname == "my" || n.lname == "self") {
				return AdValue(r) // .MY, .SELF: the outermost ad
			}
			return st.lookupScoped(r, n.lname)
		}
		switch n.lname {
		case "my":
			if st.cur == nil {
				return Undefined()
			}
			if at := st.cur.attrs["my"]; at == nil {
				return AdValue(st.cur)
			}
		case "target":
			return AdValue(st.other(st.cur))
		case "parent":
			if st.cur == nil {
				return Undefined()
			}
			return AdValue(st.parentOf(st.cur))
		case "self":
			if st.cur == nil {
				return Undefined()
			}
			if at := st.cur.attrs["self"]; at == nil {
				return AdValue(st.cur)
			}
		}
		if st.cur == nil {
			return Undefined()
		}
		return st.lookupBare(st.cur, n.lname)
	}
	var scope *Ad
	switch n.scope {
	case scopeMy:
		scope = st.cur
	case scopeTarget:
		scope = st.other(st.cur)
	case scopeParent:
		if st.cur != nil {
			scope = st.enclosing(st.cur)
		}
	default:
		return st.selectAttr(n.base.eval(st), n.lname)
	}
	if scope == nil {
		return Undefined()
	}
	if at := scope.attrs[n.lname]; at != nil {
		return st.evalBound(scope, at)
	}
	return st.selectAttr(AdValue(scope), n.lname)
}

func (st *state) selectAttr(b Value, lname string) Value {
	switch b.kind {
	case AdKind:
		if b.ad.attrs[lname] == nil {
			// X.MY and X.SELF are X, X.PARENT its enclosing ad and
			// X.TARGET the match partner of its tree.
			switch lname {
			case "my", "self":
				return b
			case "parent":
				return AdValue(st.parentOf(b.ad))
			case "target":
				return AdValue(st.other(b.ad))
			}
		}
		return st.lookupScoped(b.ad, lname)
	case ListKind:
		out := make([]Value, len(b.elems()))
		for i, e := range b.elems() {
			if e.kind == AdKind {
				out[i] = st.lookupScoped(e.ad, lname)
			} else {
				out[i] = ErrorValue()
			}
		}
		return List(out)
	case UndefinedKind:
		return Undefined()
	}
	return ErrorValue()
}

func (n *indexNode) eval(st *state) Value {
	b := n.base.eval(st)
	i := n.idx.eval(st)
	return index(st, b, i)
}

func index(st *state, b, i Value) Value {
	if b.kind == ErrorKind || i.kind == ErrorKind {
		return ErrorValue()
	}
	if b.kind == UndefinedKind || i.kind == UndefinedKind {
		return Undefined()
	}
	switch b.kind {
	case ListKind:
		if i.kind != IntKind {
			return ErrorValue()
		}
		// HTCondor converts the subscript to a C int.
		k := int64(int32(i.i))
		if k < 0 || k >= int64(len(b.elems())) {
			return ErrorValue()
		}
		return b.elems()[k]
	case AdKind:
		if i.kind != StringKind {
			return ErrorValue()
		}
		at := b.ad.attrs[lower(i.s)]
		if at == nil {
			return Undefined()
		}
		return st.evalBound(b.ad, at)
	}
	return ErrorValue()
}

func (n *condNode) eval(st *state) Value {
	c := n.c.eval(st)
	switch c.kind {
	case UndefinedKind:
		return Undefined()
	case BoolKind, IntKind:
		if c.i != 0 {
			return n.t.eval(st)
		}
		return n.e.eval(st)
	case RealKind:
		if c.fl() != 0 {
			return n.t.eval(st)
		}
		return n.e.eval(st)
	}
	return ErrorValue()
}

func (n *elvisNode) eval(st *state) Value {
	x := n.x.eval(st)
	if x.kind == UndefinedKind {
		return n.y.eval(st)
	}
	return x
}

func (n *unaryNode) eval(st *state) Value { return unaryOp(n.op, n.x.eval(st)) }

func unaryOp(op opcode, x Value) Value {
	switch x.kind {
	case UndefinedKind:
		return Undefined()
	case ErrorKind:
		return ErrorValue()
	}
	switch op {
	case opNot:
		switch x.kind {
		case BoolKind, IntKind:
			return Bool(x.i == 0)
		case RealKind:
			return Bool(x.fl() == 0)
		}
	case opNeg:
		switch x.kind {
		case IntKind:
			return Int(-x.i)
		case RealKind:
			return Real(-x.fl())
		case RelTimeKind:
			return RelTime(-x.fl())
		}
	case opPos:
		switch x.kind {
		case IntKind, RealKind, RelTimeKind:
			return x
		}
	case opBitNot:
		if x.kind == IntKind {
			return Int(^x.i)
		}
	}
	return ErrorValue()
}

// truth classifies a value for the logical operators: 1 true, 0 false,
// -1 undefined, -2 error.
func truth(v Value) int {
	switch v.kind {
	case BoolKind, IntKind:
		if v.i != 0 {
			return 1
		}
		return 0
	case RealKind:
		if v.fl() != 0 {
			return 1
		}
		return 0
	case UndefinedKind:
		return -1
	}
	return -2
}

func (n *binaryNode) eval(st *state) Value {
	switch n.op {
	case opAnd:
		return n.logic(st, 0)
	case opOr:
		return n.logic(st, 1)
	}
	x := n.x.eval(st)
	var y Value
	if l, ok := n.y.(*litNode); ok {
		y = l.v
	} else {
		y = n.y.eval(st)
	}
	// Fast paths for the comparisons that dominate Requirements.
	if x.kind == y.kind && n.op >= opEq && n.op <= opGe && n.op != opIs && n.op != opIsnt {
		switch x.kind {
		case IntKind:
			return cmpResult(n.op, cmpNum(x.i, y.i))
		case StringKind:
			return cmpResult(n.op, foldCompare(x.s, y.s))
		}
	}
	return binaryOp(n.op, x, y)
}

// logic evaluates && (decisive is 0, false) or || (decisive is 1, true).
// A decisive or error left side is the result and the right side is not
// evaluated; then an error right side is an error, a decisive one decides,
// and an undefined side makes the result undefined.
func (n *binaryNode) logic(st *state, decisive int) Value {
	x := truth(n.x.eval(st))
	if x == decisive || x == -2 {
		return logicResult(x)
	}
	y := truth(n.y.eval(st))
	switch {
	case y == -2:
		return ErrorValue()
	case y == decisive:
		return logicResult(decisive)
	case x == -1 || y == -1:
		return Undefined()
	}
	return logicResult(1 - decisive)
}

func logicResult(t int) Value {
	switch t {
	case 1:
		return Bool(true)
	case 0:
		return Bool(false)
	case -1:
		return Undefined()
	}
	return ErrorValue()
}

func binaryOp(op opcode, x, y Value) Value {
	switch op {
	case opIs:
		return identical(x, y)
	case opIsnt:
		v := identical(x, y)
		if v.kind == BoolKind {
			v.i ^= 1
		}
		return v
	}
	if x.kind == ErrorKind || y.kind == ErrorKind {
		return ErrorValue()
	}
	if x.kind == UndefinedKind || y.kind == UndefinedKind {
		return Undefined()
	}
	switch op {
	case opAdd, opSub, opMul, opDiv, opMod:
		return arith(op, x, y)
	case opEq, opNe, opLt, opLe, opGt, opGe:
		return compare(op, x, y)
	case opBitAnd, opBitOr, opBitXor, opShl, opShr, opUShr:
		if x.kind != IntKind || y.kind != IntKind {
			return ErrorValue()
		}
		a, b := x.i, y.i
		switch op {
		case opBitAnd:
			return Int(a & b)
		case opBitOr:
			return Int(a | b)
		case opBitXor:
			return Int(a ^ b)
		case opShl:
			return Int(a << (uint64(b) & 63))
		case opShr:
			return Int(shiftRight(a, b))
		case opUShr:
			return Int(shiftRightUnsigned(a, b))
		}
	}
	return ErrorValue()
}

func numeric(v Value) bool { return v.kind == IntKind || v.kind == RealKind || v.kind == BoolKind }

func asFloat(v Value) float64 {
	if v.kind == RealKind {
		return v.fl()
	}
	return float64(v.i)
}

func realResult(f float64) Value {
	if math.IsInf(f, 1) {
		return ErrorValue()
	}
	return Real(f)
}

func arith(op opcode, x, y Value) Value {
	if x.kind == AbsTimeKind || x.kind == RelTimeKind || y.kind == AbsTimeKind || y.kind == RelTimeKind {
		return timeArith(op, x, y)
	}
	if !numeric(x) || !numeric(y) {
		return ErrorValue()
	}
	if x.kind != RealKind && y.kind != RealKind {
		a, b := x.i, y.i
		switch op {
		case opAdd:
			return Int(a + b)
		case opSub:
			return Int(a - b)
		case opMul:
			return Int(a * b)
		case opDiv:
			if b == 0 {
				return ErrorValue()
			}
			if a == math.MinInt64 && b == -1 {
				return Int(math.MaxInt64) // as HTCondor
			}
			return Int(a / b)
		case opMod:
			if b == 0 {
				return ErrorValue()
			}
			return Int(a % b)
		}
	}
	a, b := asFloat(x), asFloat(y)
	switch op {
	case opAdd:
		return realResult(a + b)
	case opSub:
		return realResult(a - b)
	case opMul:
		return realResult(a * b)
	case opDiv:
		return realResult(a / b)
	}
	return ErrorValue()
}

func timeArith(op opcode, x, y Value) Value {
	switch {
	case x.kind == AbsTimeKind && y.kind == RelTimeKind && (op == opAdd || op == opSub):
		d := int64(y.fl())
		if op == opSub {
			d = -d
		}
		return AbsTime(x.i+d, int(x.tz))
	case x.kind == RelTimeKind && y.kind == AbsTimeKind && op == opAdd:
		return AbsTime(y.i+int64(x.fl()), int(y.tz))
	case x.kind == AbsTimeKind && y.kind == AbsTimeKind && op == opSub:
		return RelTime(float64(x.i - y.i))
	case x.kind == RelTimeKind && y.kind == RelTimeKind:
		switch op {
		case opAdd:
			return RelTime(x.fl() + y.fl())
		case opSub:
			return RelTime(x.fl() - y.fl())
		}
	case x.kind == RelTimeKind && numeric(y):
		switch op {
		case opMul:
			return RelTime(x.fl() * asFloat(y))
		case opDiv:
			if asFloat(y) == 0 {
				return ErrorValue()
			}
			return RelTime(x.fl() / asFloat(y))
		}
	case numeric(x) && y.kind == RelTimeKind && op == opMul:
		return RelTime(asFloat(x) * y.fl())
	}
	return ErrorValue()
}

// foldCompare compares two ASCII strings case-insensitively.
func foldCompare(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		ca, cb := a[i], b[i]
		if ca >= 'A' && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if cb >= 'A' && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

func cmpResult(op opcode, c int) Value {
	switch op {
	case opEq:
		return Bool(c == 0)
	case opNe:
		return Bool(c != 0)
	case opLt:
		return Bool(c < 0)
	case opLe:
		return Bool(c <= 0)
	case opGt:
		return Bool(c > 0)
	case opGe:
		return Bool(c >= 0)
	}
	return ErrorValue()
}

func compare(op opcode, x, y Value) Value {
	switch {
	case numeric(x) && numeric(y):
		if x.kind != RealKind && y.kind != RealKind {
			c := 0
			if x.i < y.i {
				c = -1
			} else if x.i > y.i {
				c = 1
			}
			return cmpResult(op, c)
		}
		a, b := asFloat(x), asFloat(y)
		switch op {
		case opEq:
			return Bool(a == b)
		case opNe:
			return Bool(a != b)
		case opLt:
			return Bool(a < b)
		case opLe:
			return Bool(a <= b)
		case opGt:
			return Bool(a > b)
		case opGe:
			return Bool(a >= b)
		}
	case x.kind == StringKind && y.kind == StringKind:
		return cmpResult(op, foldCompare(x.s, y.s))
	case x.kind == AbsTimeKind && y.kind == AbsTimeKind:
		return cmpResult(op, cmpNum(x.i, y.i))
	case x.kind == RelTimeKind && y.kind == RelTimeKind:
		return cmpResult(op, cmpNum(x.fl(), y.fl()))
	}
	return ErrorValue()
}

// cmpNum compares two numbers, -1, 0 or 1; NaN compares equal to all.
func cmpNum[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// identical implements =?=.
func identical(x, y Value) Value {
	if x.kind == ListKind || y.kind == ListKind || x.kind == AdKind || y.kind == AdKind {
		if x.kind != y.kind {
			return Bool(false)
		}
		return ErrorValue()
	}
	return Bool(sameAs(x, y))
}

func sameAs(x, y Value) bool {
	if x.kind != y.kind {
		return false
	}
	switch x.kind {
	case UndefinedKind, ErrorKind:
		return true
	case BoolKind, IntKind:
		return x.i == y.i
	case RealKind, RelTimeKind:
		return x.fl() == y.fl()
	case AbsTimeKind:
		return x.i == y.i
	case StringKind:
		return x.s == y.s
	case ListKind:
		if len(x.elems()) != len(y.elems()) {
			return false
		}
		for i := range x.elems() {
			if !sameAs(x.elems()[i], y.elems()[i]) {
				return false
			}
		}
		return true
	case AdKind:
		return x.ad == y.ad || (x.ad != nil && y.ad != nil && x.ad.NewSyntax() == y.ad.NewSyntax())
	}
	return false
}

// shiftRight is HTCondor's >>: counts are taken modulo 64 for
// non-negative operands; negative operands are shifted one position at a
// time with the sign bit kept, so counts <= 0 leave them unchanged.
func shiftRight(a, b int64) int64 {
	if a >= 0 {
		return a >> (uint64(b) & 63)
	}
	switch {
	case b <= 0:
		return a
	case b >= 63:
		return -1
	}
	return a >> uint64(b)
}

// shiftRightUnsigned is HTCondor's >>>: a negative operand is first
// shifted by one with the sign bit cleared, then by the count less one
// (modulo 64).
func shiftRightUnsigned(a, b int64) int64 {
	if a >= 0 {
		return a >> (uint64(b) & 63)
	}
	v := (a >> 1) & math.MaxInt64
	return v >> (uint64(b-1) & 63)
}
