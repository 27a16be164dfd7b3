package classad

import (
	"fmt"
	"strings"
)

type parser struct {
	lx lexer
}

func newParser(src string, old bool) *parser {
	p := &parser{lx: lexer{src: src, old: old}}
	p.lx.next()
	return p
}

func (p *parser) tok() token { return p.lx.tok }

func (p *parser) failed() bool { return p.lx.err != nil }

func (p *parser) errorf(format string, args ...any) {
	p.lx.errorf(p.lx.tok.pos, format, args...)
}

func (p *parser) isOp(s string) bool { return p.lx.tok.kind == tOp && p.lx.tok.text == s }

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tInt, tReal:
		return "number"
	case tString:
		return "string " + fmt.Sprintf("%q", t.text)
	case tIdent:
		return "name " + t.text
	case tTrue, tFalse, tUndefined, tError:
		return "keyword"
	}
	return fmt.Sprintf("'%s'", t.text)
}

// end returns the parse's error, once it has checked that nothing
// follows the parsed what but the end of the input.
func (p *parser) end(what string) error {
	if !p.failed() && p.tok().kind != tEOF {
		p.errorf("unexpected %s after %s", describe(p.tok()), what)
	}
	if p.failed() {
		return p.lx.err
	}
	return nil
}

func (p *parser) expect(s string) bool {
	if p.failed() {
		return false
	}
	if !p.isOp(s) {
		p.errorf("expected '%s', found %s", s, describe(p.tok()))
		return false
	}
	p.lx.next()
	return true
}

// exprList parses comma-separated expressions at depth up to and
// including the closing operator; the opening one has been read.
func (p *parser) exprList(depth int, closing string) ([]Expr, bool) {
	var list []Expr
	if !p.isOp(closing) {
		for {
			e := p.expr(depth)
			if p.failed() {
				return nil, false
			}
			list = append(list, e)
			if !p.isOp(",") {
				break
			}
			p.lx.next()
		}
	}
	return list, p.expect(closing)
}

// maxDepth bounds expression nesting so hostile input cannot exhaust the stack.
const maxDepth = 1000

func (p *parser) expr(depth int) Expr {
	if depth > maxDepth {
		p.errorf("expression nested too deeply")
		return nil
	}
	c := p.binary(1, depth)
	if p.failed() {
		return nil
	}
	if p.isOp("?") {
		p.lx.next()
		t := p.expr(depth + 1)
		if !p.expect(":") {
			return nil
		}
		f := p.expr(depth + 1)
		if p.failed() {
			return nil
		}
		return &condNode{c, t, f}
	}
	return c
}

// binary operator precedence levels, lowest first.
var binLevels = [][]struct {
	text string
	op   opcode
}{
	1:  {{"||", opOr}},
	2:  {{"&&", opAnd}},
	3:  {{"|", opBitOr}},
	4:  {{"^", opBitXor}},
	5:  {{"&", opBitAnd}},
	6:  {{"==", opEq}, {"!=", opNe}, {"=?=", opIs}, {"=!=", opIsnt}},
	7:  {{"<", opLt}, {"<=", opLe}, {">", opGt}, {">=", opGe}},
	8:  {{"<<", opShl}, {">>", opShr}, {">>>", opUShr}},
	9:  {{"+", opAdd}, {"-", opSub}},
	10: {{"*", opMul}, {"/", opDiv}, {"%", opMod}},
}

func (p *parser) binary(level, depth int) Expr {
	if level >= len(binLevels) {
		return p.unary(depth)
	}
	x := p.binary(level+1, depth)
	for !p.failed() && p.tok().kind == tOp {
		op := opNone
		for _, c := range binLevels[level] {
			if p.tok().text == c.text {
				op = c.op
				break
			}
		}
		if op == opNone {
			break
		}
		p.lx.next()
		y := p.binary(level+1, depth)
		if p.failed() {
			return nil
		}
		x = &binaryNode{op, x, y}
	}
	return x
}

func (p *parser) unary(depth int) Expr {
	if depth > maxDepth {
		p.errorf("expression nested too deeply")
		return nil
	}
	t := p.tok()
	if t.kind == tOp {
		var op opcode
		switch t.text {
		case "-":
			op = opNeg
		case "+":
			op = opPos
		case "!":
			op = opNot
		case "~":
			op = opBitNot
		}
		if op != opNone {
			p.lx.next()
			nt := p.tok()
			if op == opNeg && nt.pos == t.pos+1 && (nt.kind == tInt || nt.kind == tReal) {
				// A minus sign directly before a number is part of the
				// literal, which then takes postfix operators itself.
				p.lx.next()
				var lit Expr
				if nt.kind == tInt {
					var v int64 // beyond the int64 range: 0, as HTCondor
					if !nt.big && nt.u <= 1<<63 {
						v = -int64(nt.u)
					}
					lit = &litNode{Int(v)}
				} else {
					lit = &litNode{Real(-nt.f)}
				}
				return p.postfixFrom(lit, depth+1)
			}
			x := p.unary(depth + 1)
			if x == nil {
				return nil
			}
			return &unaryNode{op, x}
		}
	}
	return p.postfix(depth)
}

func (p *parser) postfix(depth int) Expr {
	return p.postfixFrom(p.primary(depth), depth)
}

func (p *parser) postfixFrom(x Expr, depth int) Expr {
	for !p.failed() {
		switch {
		case p.isOp("."):
			p.lx.next()
			t := p.tok()
			if t.kind != tIdent {
				p.errorf("expected attribute name after '.', found %s", describe(t))
				return nil
			}
			p.lx.next()
			x = newSelect(x, t.text)
		case p.isOp("["):
			p.lx.next()
			i := p.expr(depth + 1)
			if !p.expect("]") {
				return nil
			}
			x = &indexNode{x, i}
		case p.isOp("?:"):
			// The elvis operator binds tighter than any unary or binary
			// operator; its right operand is a postfix expression.
			p.lx.next()
			var y Expr
			t := p.tok()
			if t.kind == tOp && t.text == "-" {
				p.lx.next()
				nt := p.tok()
				if nt.pos != t.pos+1 || (nt.kind != tInt && nt.kind != tReal) {
					p.errorf("unexpected %s after '?:'", describe(nt))
					return nil
				}
				p.lx.next()
				if nt.kind == tInt {
					y = &litNode{Int(-nt.i)}
				} else {
					y = &litNode{Real(-nt.f)}
				}
			} else {
				y = p.primary(depth + 1)
				for !p.failed() && (p.isOp(".") || p.isOp("[")) {
					y = p.selector(y, depth)
				}
			}
			if p.failed() {
				return nil
			}
			x = &elvisNode{x, y}
		default:
			return x
		}
	}
	return nil
}

func (p *parser) selector(x Expr, depth int) Expr {
	if p.isOp(".") {
		p.lx.next()
		t := p.tok()
		if t.kind != tIdent {
			p.errorf("expected attribute name after '.', found %s", describe(t))
			return nil
		}
		p.lx.next()
		return newSelect(x, t.text)
	}
	p.lx.next()
	i := p.expr(depth + 1)
	if !p.expect("]") {
		return nil
	}
	return &indexNode{x, i}
}

func (p *parser) primary(depth int) Expr {
	t := p.tok()
	switch t.kind {
	case tInt:
		p.lx.next()
		return &litNode{Int(t.i)}
	case tReal:
		p.lx.next()
		return &litNode{Real(t.f)}
	case tString:
		p.lx.next()
		return &litNode{String(t.text)}
	case tTrue:
		p.lx.next()
		return &litNode{Bool(true)}
	case tFalse:
		p.lx.next()
		return &litNode{Bool(false)}
	case tUndefined:
		p.lx.next()
		return &litNode{Undefined()}
	case tError:
		p.lx.next()
		return &litNode{ErrorValue()}
	case tIdent:
		p.lx.next()
		if !t.quoted && p.isOp("(") {
			p.lx.next()
			args, ok := p.exprList(depth+1, ")")
			if !ok {
				return nil
			}
			c := newCall(t.text, args)
			if lit, ok := timeLiteral(c); !ok {
				p.lx.errorf(t.pos, "invalid %s literal", t.text)
				return nil
			} else if lit != nil {
				return lit
			}
			return c
		}
		return &attrNode{name: t.text, lname: strings.ToLower(t.text)}
	case tOp:
		switch t.text {
		case ".":
			p.lx.next()
			n := p.tok()
			if n.kind != tIdent {
				p.errorf("expected attribute name after '.', found %s", describe(n))
				return nil
			}
			p.lx.next()
			return &attrNode{name: n.text, lname: strings.ToLower(n.text), absolute: true}
		case "(":
			p.lx.next()
			x := p.expr(depth + 1)
			if !p.expect(")") {
				return nil
			}
			return &parenNode{x}
		case "{":
			p.lx.next()
			elems, ok := p.exprList(depth+1, "}")
			if !ok {
				return nil
			}
			return newList(elems)
		case "[":
			a := p.adBody(depth + 1)
			if a == nil {
				return nil
			}
			a.literal = true
			return &adNode{a}
		}
	}
	if t.kind == tEOF && p.failed() {
		return nil
	}
	p.errorf("unexpected %s, expected an expression", describe(t))
	return nil
}

// adBody parses "[ name = expr; ... ]" with the current token at '['.
func (p *parser) adBody(depth int) *Ad {
	if depth > maxDepth {
		p.errorf("expression nested too deeply")
		return nil
	}
	if !p.expect("[") {
		return nil
	}
	a := NewAd()
	for !p.failed() {
		if p.isOp("]") {
			p.lx.next()
			return a
		}
		t := p.tok()
		if t.kind != tIdent {
			p.errorf("expected attribute name or ']', found %s", describe(t))
			return nil
		}
		p.lx.next()
		if !p.expect("=") {
			return nil
		}
		e := p.expr(depth + 1)
		if p.failed() {
			return nil
		}
		a.Set(t.text, e)
		if p.isOp(";") {
			p.lx.next()
			continue
		}
		if !p.isOp("]") {
			p.errorf("expected ';' or ']', found %s", describe(p.tok()))
			return nil
		}
	}
	return nil
}

func newList(elems []Expr) *listNode {
	n := &listNode{elems: elems}
	kon := make([]Value, len(elems))
	for i, e := range elems {
		l, ok := e.(*litNode)
		if !ok {
			return n
		}
		kon[i] = l.v
	}
	n.konst = &listData{vals: kon, src: n}
	return n
}

// ParseExpr parses a ClassAd expression in new syntax.
func ParseExpr(src string) (Expr, error) {
	p := newParser(src, false)
	e := p.expr(0)
	if err := p.end("expression"); err != nil {
		return nil, err
	}
	return e, nil
}

// MustParseExpr is ParseExpr that panics on error, for expressions known
// at compile time.
func MustParseExpr(src string) Expr {
	e, err := ParseExpr(src)
	if err != nil {
		panic(fmt.Sprintf("classad: MustParseExpr(%q): %v", src, err))
	}
	return e
}

// ParseNewAd parses one ad in new syntax: "[ a = 1; b = a + 1 ]".
func ParseNewAd(src string) (*Ad, error) {
	p := newParser(src, false)
	if !p.isOp("[") && !p.failed() {
		p.errorf("expected '[' to begin a ClassAd, found %s", describe(p.tok()))
		return nil, p.lx.err
	}
	a := p.adBody(0)
	if err := p.end("ClassAd"); err != nil {
		return nil, err
	}
	return a, nil
}

// ParseOldAd parses one ad in old syntax: one "Name = Expr" per line, as
// condor_status -l prints. Blank lines and lines starting with '#' are
// skipped.
func ParseOldAd(src string) (*Ad, error) {
	a := NewAd()
	if err := parseOldInto(a, src, 0); err != nil {
		return nil, err
	}
	return a, nil
}

// ParseOldAds parses a sequence of old-syntax ads separated by blank lines.
func ParseOldAds(src string) ([]*Ad, error) {
	var ads []*Ad
	lines := strings.Split(src, "\n")
	start := 0
	flush := func(end int) error {
		chunk := strings.Join(lines[start:end], "\n")
		if strings.TrimSpace(chunk) != "" {
			a := NewAd()
			if err := parseOldInto(a, chunk, start); err != nil {
				return err
			}
			ads = append(ads, a)
		}
		start = end + 1
		return nil
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			if err := flush(i); err != nil {
				return nil, err
			}
		}
	}
	if start < len(lines) {
		if err := flush(len(lines)); err != nil {
			return nil, err
		}
	}
	return ads, nil
}

func parseOldInto(a *Ad, src string, lineOff int) error {
	for i, line := range strings.Split(src, "\n") {
		line = strings.TrimRight(line, "\r")
		trim := strings.TrimSpace(line)
		if trim == "" || trim[0] == '#' {
			continue
		}
		name, expr, err := parseOldLine(line, lineOff+i)
		if err != nil {
			return err
		}
		a.Set(name, expr)
	}
	return nil
}

func parseOldLine(line string, lineOff int) (string, Expr, error) {
	p := &parser{lx: lexer{src: line, old: true, lineOff: lineOff}}
	p.lx.next()
	t := p.tok()
	if t.kind != tIdent && !p.failed() {
		p.errorf("expected attribute name, found %s", describe(t))
	}
	if !p.failed() {
		p.lx.next()
		p.expect("=")
	}
	var e Expr
	if !p.failed() {
		e = p.expr(0)
	}
	if err := p.end("expression"); err != nil {
		return "", nil, err
	}
	return t.text, e, nil
}

// ParseAd parses an ad in new syntax if it starts with '[' (after
// whitespace and comments), in JSON syntax if it starts with '{', and in
// old syntax otherwise.
func ParseAd(src string) (*Ad, error) {
	t := strings.TrimLeft(src, " \t\r\n")
	for strings.HasPrefix(t, "/*") || strings.HasPrefix(t, "//") {
		lx := lexer{src: t}
		lx.skipSpace()
		if lx.err != nil {
			break
		}
		t = strings.TrimLeft(t[lx.pos:], " \t\r\n")
	}
	switch {
	case strings.HasPrefix(t, "["):
		return ParseNewAd(src)
	case strings.HasPrefix(t, "{"):
		return ParseJSONAd(src)
	}
	return ParseOldAd(src)
}
