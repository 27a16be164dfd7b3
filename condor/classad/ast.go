package classad

import (
	"math"
	"strconv"
	"strings"
)

// Expr is a parsed ClassAd expression. Expressions are immutable once
// parsed and safe for concurrent evaluation.
type Expr interface {
	// String returns the expression in new ClassAd syntax; parsing it
	// yields the same tree.
	String() string
	write(b *strings.Builder, old bool)
	eval(st *state) Value
}

type opcode uint8

const (
	opNone opcode = iota
	opOr
	opAnd
	opBitOr
	opBitXor
	opBitAnd
	opEq
	opNe
	opIs
	opIsnt
	opLt
	opLe
	opGt
	opGe
	opShl
	opShr
	opUShr
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opNeg
	opPos
	opNot
	opBitNot
)

var opText = [...]string{
	opOr: "||", opAnd: "&&", opBitOr: "|", opBitXor: "^", opBitAnd: "&",
	opEq: "==", opNe: "!=", opIs: "is", opIsnt: "isnt",
	opLt: "<", opLe: "<=", opGt: ">", opGe: ">=",
	opShl: "<<", opShr: ">>", opUShr: ">>>",
	opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opMod: "%",
	opNeg: "-", opPos: "+", opNot: "!", opBitNot: "~",
}

type litNode struct{ v Value }

type attrNode struct {
	base     Expr // nil for a bare or absolute reference
	name     string
	lname    string // lower-cased name
	absolute bool   // .name
	scope    scopeKind
}

// scopeKind records, for a selection whose base is MY, TARGET or PARENT,
// which ad the base names, so evaluation skips building the ad value.
type scopeKind uint8

const (
	scopeGeneric scopeKind = iota
	scopeMy
	scopeTarget
	scopeParent
)

func newSelect(base Expr, name string) *attrNode {
	n := &attrNode{base: base, name: name, lname: lower(name)}
	if b, ok := base.(*attrNode); ok && b.base == nil && !b.absolute {
		switch b.lname {
		case "my":
			n.scope = scopeMy
		case "target":
			n.scope = scopeTarget
		case "parent":
			n.scope = scopeParent
		}
	}
	return n
}

type indexNode struct{ base, idx Expr }

type unaryNode struct {
	op opcode
	x  Expr
}

type binaryNode struct {
	op   opcode
	x, y Expr
}

type condNode struct{ c, t, e Expr }

type elvisNode struct{ x, y Expr }

type parenNode struct{ x Expr }

type callNode struct {
	name  string
	lname string
	args  []Expr
	fn    *builtin
	re    *regexCache // compiled constant regexp, if any
}

type listNode struct {
	elems []Expr
	konst *listData // pre-evaluated when every element is a constant
}

type adNode struct{ ad *Ad }

func exprString(e Expr) string {
	var b strings.Builder
	e.write(&b, false)
	return b.String()
}

func (n *litNode) String() string    { return exprString(n) }
func (n *attrNode) String() string   { return exprString(n) }
func (n *indexNode) String() string  { return exprString(n) }
func (n *unaryNode) String() string  { return exprString(n) }
func (n *binaryNode) String() string { return exprString(n) }
func (n *condNode) String() string   { return exprString(n) }
func (n *elvisNode) String() string  { return exprString(n) }
func (n *parenNode) String() string  { return exprString(n) }
func (n *callNode) String() string   { return exprString(n) }
func (n *listNode) String() string   { return exprString(n) }
func (n *adNode) String() string     { return exprString(n) }

func (n *litNode) write(b *strings.Builder, old bool) { writeValue(b, n.v, old) }

func writeValue(b *strings.Builder, v Value, old bool) {
	switch v.kind {
	case UndefinedKind:
		b.WriteString("undefined")
	case ErrorKind:
		b.WriteString("error")
	case BoolKind:
		if v.i != 0 {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case IntKind:
		b.WriteString(strconv.FormatInt(v.i, 10))
	case RealKind:
		s := formatReal(v.fl(), old)
		if old && !strings.ContainsAny(s, ".Ee(n") {
			s += ".0"
		}
		b.WriteString(s)
	case StringKind:
		writeQuoted(b, v.s, '"', old)
	case ListKind:
		if v.lp != nil && v.lp.src != nil {
			v.lp.src.write(b, old)
			return
		}
		b.WriteString("{ ")
		for i, e := range v.elems() {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(b, e, old)
		}
		b.WriteString(" }")
	case AdKind:
		v.ad.write(b, old)
	case AbsTimeKind:
		b.WriteString(`absTime("`)
		b.WriteString(formatAbsTime(v.i, int(v.tz)))
		b.WriteString(`")`)
	case RelTimeKind:
		b.WriteString(`relTime("`)
		b.WriteString(formatRelTime(v.fl()))
		b.WriteString(`")`)
	}
}

func writeQuoted(b *strings.Builder, s string, q byte, old bool) {
	b.WriteByte(q)
	if old {
		for i := 0; i < len(s); i++ {
			if s[i] == q {
				b.WriteByte('\\')
			}
			b.WriteByte(s[i])
		}
		b.WriteByte(q)
		return
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c == q {
				b.WriteByte('\\')
			}
			if c < 0x20 || c >= 0x7f {
				// As HTCondor: bytes that are not printable ASCII,
				// UTF-8 included, as three-digit octal escapes.
				b.WriteByte('\\')
				b.WriteByte('0' + c>>6)
				b.WriteByte('0' + c>>3&7)
				b.WriteByte('0' + c&7)
				continue
			}
			b.WriteByte(c)
		}
	}
	b.WriteByte(q)
}

var reservedNames = map[string]bool{
	"true": true, "false": true, "undefined": true, "error": true,
	"is": true, "isnt": true, "parent": true,
}

func writeName(b *strings.Builder, name string) {
	ok := name != "" && isIdentStart(name[0])
	for i := 1; ok && i < len(name); i++ {
		ok = isIdentChar(name[i])
	}
	if ok && !reservedNames[strings.ToLower(name)] {
		b.WriteString(name)
		return
	}
	writeQuoted(b, name, '\'', false)
}

func (n *attrNode) write(b *strings.Builder, old bool) {
	if n.base != nil {
		n.base.write(b, old)
		if l, ok := n.base.(*litNode); ok && (l.v.kind == IntKind || l.v.kind == RealKind && !math.IsInf(l.v.fl(), 0) && !math.IsNaN(l.v.fl())) {
			b.WriteByte(' ') // "1 .a", not the number "1."; but real("INF").a
		}
		b.WriteByte('.')
	} else if n.absolute {
		b.WriteByte('.')
	}
	writeName(b, n.name)
}

func (n *indexNode) write(b *strings.Builder, old bool) {
	n.base.write(b, old)
	b.WriteByte('[')
	n.idx.write(b, old)
	b.WriteByte(']')
}

func (n *unaryNode) write(b *strings.Builder, old bool) {
	b.WriteByte(' ')
	b.WriteString(opText[n.op])
	if n.op == opNeg {
		// Keep "- 1" (and "- 1 .a") apart from the literal -1 so the
		// text re-parses to the same tree.
		var sub strings.Builder
		n.x.write(&sub, old)
		if s := sub.String(); s != "" && (isDigit(s[0]) || s[0] == '.') {
			b.WriteByte(' ')
		}
		b.WriteString(sub.String())
		return
	}
	n.x.write(b, old)
}

func (n *binaryNode) write(b *strings.Builder, old bool) {
	n.x.write(b, old)
	b.WriteByte(' ')
	switch {
	case old && n.op == opIs:
		b.WriteString("=?=")
	case old && n.op == opIsnt:
		b.WriteString("=!=")
	default:
		b.WriteString(opText[n.op])
	}
	b.WriteByte(' ')
	n.y.write(b, old)
}

func (n *condNode) write(b *strings.Builder, old bool) {
	n.c.write(b, old)
	b.WriteString(" ? ")
	n.t.write(b, old)
	b.WriteString(" : ")
	n.e.write(b, old)
}

func (n *elvisNode) write(b *strings.Builder, old bool) {
	n.x.write(b, old)
	b.WriteString(" ?: ")
	n.y.write(b, old)
}

func (n *parenNode) write(b *strings.Builder, old bool) {
	b.WriteByte('(')
	n.x.write(b, old)
	b.WriteByte(')')
}

func (n *callNode) write(b *strings.Builder, old bool) {
	b.WriteString(n.name)
	b.WriteByte('(')
	for i, a := range n.args {
		if i > 0 {
			b.WriteByte(',')
		}
		a.write(b, old)
	}
	b.WriteByte(')')
}

func (n *listNode) write(b *strings.Builder, old bool) {
	b.WriteString("{ ")
	for i, e := range n.elems {
		if i > 0 {
			b.WriteByte(',')
		}
		e.write(b, old)
	}
	b.WriteString(" }")
}

func (n *adNode) write(b *strings.Builder, old bool) { n.ad.write(b, old) }

// relTimeLit is a relTime("...") call with a literal string, which
// HTCondor's parser turns into a literal: it prints as the call
// (normalised) and, as in HTCondor, evaluates to the real number of
// seconds.
type relTimeLit struct{ secs float64 }

func (n *relTimeLit) String() string { return exprString(n) }

func (n *relTimeLit) write(b *strings.Builder, _ bool) {
	b.WriteString(`relTime("`)
	b.WriteString(formatRelTime(n.secs))
	b.WriteString(`")`)
}

func (n *relTimeLit) eval(*state) Value { return Real(n.secs) }

// timeLiteral handles absTime and relTime of a literal string, which
// HTCondor reads at parse time: it reports false when the string is not
// a valid time (a syntax error in HTCondor) and returns the literal that
// replaces a relTime call, or nil to keep the call.
func timeLiteral(c *callNode) (Expr, bool) {
	if len(c.args) != 1 || (c.lname != "reltime" && c.lname != "abstime") {
		return nil, true
	}
	l, ok := c.args[0].(*litNode)
	if !ok || l.v.kind != StringKind {
		return nil, true
	}
	if c.lname == "abstime" {
		return nil, !c.eval(&state{}).IsError()
	}
	secs, ok := parseRelTime(l.v.s)
	if !ok {
		return nil, false
	}
	return &relTimeLit{secs}, true
}
