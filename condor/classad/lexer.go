package classad

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tInt
	tReal
	tString
	tIdent
	tTrue
	tFalse
	tUndefined
	tError
	tOp // punctuation/operator; text in tok.text
)

type token struct {
	kind   tokKind
	text   string // operator text, identifier name, decoded string
	i      int64
	u      uint64 // an integer's digits as unsigned; big when they overflow it
	big    bool
	f      float64
	pos    int // byte offset
	quoted bool
}

// SyntaxError is a parse error with its position.
type SyntaxError struct {
	File string // optional file name
	Line int    // 1-based
	Col  int    // 1-based, in characters
	Msg  string
}

// Error formats the error as [file:]line:col: msg.
func (e *SyntaxError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg)
}

type lexer struct {
	src     string
	pos     int
	old     bool // old ClassAd string escaping
	json    bool
	lineOff int // line offset added to reported positions
	tok     token
	err     *SyntaxError
}

func (lx *lexer) position(off int) (line, col int) {
	line = 1
	start := 0
	for i := 0; i < off && i < len(lx.src); i++ {
		if lx.src[i] == '\n' {
			line++
			start = i + 1
		}
	}
	end := off
	if end > len(lx.src) {
		end = len(lx.src)
	}
	col = utf8.RuneCountInString(lx.src[start:end]) + 1
	return line + lx.lineOff, col
}

func (lx *lexer) errorf(off int, format string, args ...any) {
	if lx.err != nil {
		return
	}
	l, c := lx.position(off)
	lx.err = &SyntaxError{Line: l, Col: c, Msg: fmt.Sprintf(format, args...)}
}

var ops3 = []string{">>>", "=?=", "=!="}
var ops2 = []string{"<=", ">=", "==", "!=", "&&", "||", "<<", ">>", "?:"}

const ops1 = "+-*/%!~<>&|^?:.,;=[](){}"

// next advances to the next token.
func (lx *lexer) next() {
	lx.skipSpace()
	if lx.err != nil {
		lx.tok = token{kind: tEOF, pos: lx.pos}
		return
	}
	p := lx.pos
	if p >= len(lx.src) {
		lx.tok = token{kind: tEOF, pos: p}
		return
	}
	c := lx.src[p]
	switch {
	case isDigit(c) || (c == '.' && p+1 < len(lx.src) && isDigit(lx.src[p+1])):
		lx.number()
		return
	case isIdentStart(c):
		q := p
		for q < len(lx.src) && isIdentChar(lx.src[q]) {
			q++
		}
		word := lx.src[p:q]
		lx.pos = q
		lx.tok = token{kind: tIdent, text: word, pos: p}
		switch strings.ToLower(word) {
		case "true":
			lx.tok.kind = tTrue
		case "false":
			lx.tok.kind = tFalse
		case "undefined":
			lx.tok.kind = tUndefined
		case "error":
			lx.tok.kind = tError
		case "is":
			lx.tok = token{kind: tOp, text: "=?=", pos: p}
		case "isnt":
			lx.tok = token{kind: tOp, text: "=!=", pos: p}
		}
		return
	case c == '"':
		s, ok := lx.quoted('"')
		if !ok {
			lx.tok = token{kind: tEOF, pos: p}
			return
		}
		// Adjacent string literals are concatenated.
		for !lx.json {
			save := lx.pos
			lx.skipSpace()
			if lx.pos < len(lx.src) && lx.src[lx.pos] == '"' {
				s2, ok := lx.quoted('"')
				if !ok {
					lx.tok = token{kind: tEOF, pos: p}
					return
				}
				s += s2
				continue
			}
			lx.pos = save
			break
		}
		lx.tok = token{kind: tString, text: s, pos: p}
		return
	case c == '\'' && !lx.json:
		s, ok := lx.quoted('\'')
		if !ok {
			lx.tok = token{kind: tEOF, pos: p}
			return
		}
		lx.tok = token{kind: tIdent, text: s, pos: p, quoted: true}
		return
	}
	for _, o := range ops3 {
		if strings.HasPrefix(lx.src[p:], o) {
			lx.pos += 3
			lx.tok = token{kind: tOp, text: o, pos: p}
			return
		}
	}
	for _, o := range ops2 {
		if strings.HasPrefix(lx.src[p:], o) {
			lx.pos += 2
			lx.tok = token{kind: tOp, text: o, pos: p}
			return
		}
	}
	if strings.IndexByte(ops1, c) >= 0 {
		lx.pos++
		lx.tok = token{kind: tOp, text: lx.src[p : p+1], pos: p}
		return
	}
	r, _ := utf8.DecodeRuneInString(lx.src[p:])
	lx.errorf(p, "unexpected character %q", r)
	lx.tok = token{kind: tEOF, pos: p}
}

func (lx *lexer) skipSpace() {
	for lx.pos < len(lx.src) {
		c := lx.src[lx.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			lx.pos++
		case c == '/' && lx.pos+1 < len(lx.src) && lx.src[lx.pos+1] == '*' && !lx.json:
			end := strings.Index(lx.src[lx.pos+2:], "*/")
			if end < 0 {
				lx.errorf(lx.pos, "unterminated comment")
				lx.pos = len(lx.src)
				return
			}
			lx.pos += end + 4
		case c == '/' && lx.pos+1 < len(lx.src) && lx.src[lx.pos+1] == '/' && !lx.json:
			for lx.pos < len(lx.src) && lx.src[lx.pos] != '\n' {
				lx.pos++
			}
		default:
			return
		}
	}
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }
func isHex(c byte) bool        { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

func (lx *lexer) number() {
	p := lx.pos
	s := lx.src
	q := p
	if s[q] == '0' && q+1 < len(s) && (s[q+1]|0x20) == 'x' && !lx.json {
		q += 2
		for q < len(s) && isHex(s[q]) {
			q++
		}
		if q == p+2 {
			lx.errorf(p, "malformed hexadecimal number")
			lx.tok = token{kind: tEOF, pos: p}
			return
		}
		v, err := strconv.ParseUint(s[p+2:q], 16, 64)
		if err != nil {
			lx.errorf(p, "hexadecimal number %s out of range", s[p:q])
			lx.tok = token{kind: tEOF, pos: p}
			return
		}
		lx.pos = q
		lx.tok = token{kind: tInt, i: int64(v), u: v, pos: p}
		return
	}
	for q < len(s) && isDigit(s[q]) {
		q++
	}
	real := false
	if q < len(s) && s[q] == '.' {
		real = true
		q++
		if q >= len(s) || !isDigit(s[q]) {
			lx.errorf(q, "malformed number: expected digits after '.'")
			lx.tok = token{kind: tEOF, pos: p}
			return
		}
		for q < len(s) && isDigit(s[q]) {
			q++
		}
	}
	if q < len(s) && (s[q]|0x20) == 'e' {
		real = true
		q++
		if q < len(s) && (s[q] == '+' || s[q] == '-') {
			q++
		}
		if q >= len(s) || !isDigit(s[q]) {
			lx.errorf(q, "malformed number: expected exponent digits")
			lx.tok = token{kind: tEOF, pos: p}
			return
		}
		for q < len(s) && isDigit(s[q]) {
			q++
		}
	}
	if q < len(s) && isIdentChar(s[q]) {
		lx.errorf(q, "malformed number: unexpected %q", s[q])
		lx.tok = token{kind: tEOF, pos: p}
		return
	}
	text := s[p:q]
	lx.pos = q
	if real {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !strings.Contains(err.Error(), "range") {
			lx.errorf(p, "malformed number %s", text)
		}
		lx.tok = token{kind: tReal, f: f, pos: p}
		return
	}
	// Digits are decimal. As in HTCondor, a leading zero is a syntax
	// error except right after a minus sign ("-010" is -10), and a
	// literal beyond the int64 range is 0 (the parser makes
	// -9223372036854775808 the least integer).
	if len(text) > 1 && text[0] == '0' && !lx.json && (p == 0 || s[p-1] != '-') {
		lx.errorf(p, "malformed number %s: leading zero", text)
		lx.tok = token{kind: tEOF, pos: p}
		return
	}
	v, err := strconv.ParseUint(text, 10, 64)
	big := err != nil
	i := int64(v)
	if big || v > math.MaxInt64 {
		i = 0
	}
	lx.tok = token{kind: tInt, i: i, u: v, big: big, pos: p}
}

// quoted reads a quoted string or attribute name starting at lx.pos.
func (lx *lexer) quoted(q byte) (string, bool) {
	start := lx.pos
	s := lx.src
	i := start + 1
	var b strings.Builder
	for {
		if i >= len(s) {
			lx.errorf(start, "unterminated %s", map[byte]string{'"': "string", '\'': "quoted attribute name"}[q])
			return "", false
		}
		c := s[i]
		if c == q {
			i++
			break
		}
		if c == 0 {
			lx.errorf(i, "NUL character in string")
			return "", false
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			lx.errorf(start, "unterminated string")
			return "", false
		}
		if lx.old {
			// Old ClassAds: only \" is an escape; other backslashes are literal.
			if s[i+1] == q {
				b.WriteByte(q)
				i += 2
			} else if s[i+1] == '\\' {
				b.WriteString(`\\`)
				i += 2
			} else {
				b.WriteByte('\\')
				i++
			}
			continue
		}
		e := s[i+1]
		if e == 0 {
			lx.errorf(i+1, "NUL character in string")
			return "", false
		}
		i += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'a':
			b.WriteByte('\a')
		case '/':
			b.WriteByte('/')
		case 'u':
			if lx.json && i+4 <= len(s) {
				if v, err := strconv.ParseUint(s[i:i+4], 16, 32); err == nil {
					b.WriteRune(rune(v))
					i += 4
					continue
				}
			}
			b.WriteByte('u')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			n := 1
			max := 3
			if e > '3' {
				max = 2
			}
			for n < max && i < len(s) && s[i] >= '0' && s[i] <= '7' {
				v = v*8 + int(s[i]-'0')
				i++
				n++
			}
			if v == 0 {
				lx.errorf(i-n-1, "NUL character in string")
				return "", false
			}
			b.WriteByte(byte(v))
		default:
			b.WriteByte(e)
		}
	}
	lx.pos = i
	return b.String(), true
}
