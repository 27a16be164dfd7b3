// Package hclnest bounds how deeply HCL native syntax may nest. The HCL
// parser and evaluator recurse once or more per level, so source nested
// tens of thousands deep would exhaust the stack and crash the process
// rather than fail with an error. Callers lex the source, which does not
// recurse, and check its tokens before they parse it.
package hclnest

import (
	"bytes"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Max is how deeply constructs may nest: blocks, brackets, braces,
// parentheses, template interpolations and directives, and chains of
// unary operators (-, !) all count. Real configurations nest a few levels.
const Max = 128

// TooDeep returns the first token nested deeper than Max, or nil.
func TooDeep(tokens hclsyntax.Tokens) *hclsyntax.Token {
	depth, unary := 0, 0
	for i, t := range tokens {
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
			unary = 0
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen,
			hclsyntax.TokenTemplateSeqEnd:
			// An unbalanced closer is the parser's to report.
			depth = max(depth-1, 0)
			unary = 0
		case hclsyntax.TokenMinus, hclsyntax.TokenBang:
			unary++
		default:
			unary = 0
		}
		if depth+unary > Max {
			return &tokens[i]
		}
	}
	return nil
}

// Bound returns, without lexing, a bound at least as deep as the deepest
// nesting TooDeep would find in the tokens of src (lexed as a
// configuration file or an expression: both start outside any template).
// It follows the bytes the way the HCL scanner does where that matters:
// comments, quoted templates with their escapes, interpolations and
// directives. ok is false when src holds what it does not follow (a
// heredoc, a newline inside a quoted string, an unterminated comment) or
// when the bound exceeds Max: only lexing can then tell where, if
// anywhere, src nests too deeply. Lexing a large file costs as much as
// parsing it; Bound spares that for files with nothing deep in them.
func Bound(src []byte) (bound int, ok bool) {
	return Scan(src, nil)
}

// Scan is Bound that also calls blockEnd, if not nil, with the offset
// after each newline that ends a line closing a top-level block: a "}"
// that leaves nothing open, then perhaps spaces. What follows such a line
// is parsed independently of what precedes it.
func Scan(src []byte, blockEnd func(off int)) (bound int, ok bool) {
	sc := &scanner{src: src}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c >= utf8.RuneSelf:
			i, ok = sc.multibyte(i)
		case sc.mode == quoted:
			i, ok = sc.inQuoted(i)
		default:
			i, ok = sc.inCode(i, blockEnd)
		}
		if !ok || sc.bound > Max {
			return sc.bound, false
		}
	}
	return sc.bound, true
}

// The scanner's modes.
const (
	code   = iota // the scanner's main mode
	quoted        // inside a quoted template
)

// scanner is Scan's state. As in HCL's scanner: the modes to return to,
// the open braces, and the brace levels at which a closing brace ends an
// interpolation or directive rather than an object.
type scanner struct {
	src          []byte
	mode         int
	modes        []int
	braces       int
	retBraces    []int
	depth, unary int
	bound        int
	last         byte // the last byte of code not a space or a tab
}

func (sc *scanner) open() {
	sc.depth++
	sc.unary = 0
	sc.bound = max(sc.bound, sc.depth)
}

func (sc *scanner) closeBrace() {
	sc.depth = max(sc.depth-1, 0)
	sc.unary = 0
	if n := len(sc.retBraces); n > 0 && sc.retBraces[n-1] == sc.braces {
		sc.retBraces = sc.retBraces[:n-1]
		sc.popMode()
	}
	sc.braces--
}

func (sc *scanner) popMode() {
	sc.mode, sc.modes = sc.modes[len(sc.modes)-1], sc.modes[:len(sc.modes)-1]
}

// interp enters the code of an interpolation or directive whose
// introducer starts at i and returns the index of its last byte.
func (sc *scanner) interp(i int) int {
	sc.open()
	sc.braces++
	sc.retBraces = append(sc.retBraces, sc.braces)
	sc.modes = append(sc.modes, sc.mode)
	sc.mode = code
	i++ // the brace
	if i+1 < len(sc.src) && sc.src[i+1] == '~' {
		i++
	}
	return i
}

// multibyte steps over the UTF-8 sequence at i. The scanner may take the
// bytes after malformed UTF-8 into the same token, brackets and quotes
// included: ok is false there.
func (sc *scanner) multibyte(i int) (int, bool) {
	r, size := utf8.DecodeRune(sc.src[i:])
	if r == utf8.RuneError && size <= 1 {
		return i, false
	}
	if sc.mode == code {
		sc.unary, sc.last = 0, sc.src[i]
	}
	return i + size - 1, true
}

// inQuoted takes the byte at i of a quoted template and returns the index
// of the last byte it took.
func (sc *scanner) inQuoted(i int) (int, bool) {
	src := sc.src
	switch c := src[i]; c {
	case '"':
		sc.popMode()
		sc.unary, sc.last = 0, c
	case '\\':
		if i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r') {
			return i, false
		}
		i++
	case '\n', '\r':
		return i, false
	case '$', '%':
		switch {
		case i+1 < len(src) && src[i+1] == '{':
			i = sc.interp(i)
		case i+2 < len(src) && src[i+1] == c && src[i+2] == '{':
			i += 2 // an escaped introducer: $${ or %%{
		}
	}
	return i, true
}

// inCode takes the byte at i of code and returns the index of the last
// byte it took.
func (sc *scanner) inCode(i int, blockEnd func(off int)) (int, bool) {
	src := sc.src
	c := src[i]
	if c == '\n' && blockEnd != nil && sc.last == '}' && sc.depth == 0 && sc.braces == 0 && len(sc.modes) == 0 {
		blockEnd(i + 1)
	}
	if c != ' ' && c != '\t' {
		sc.last = c
	}
	switch c {
	case ' ', '\t':
		return i, true
	case '-', '!':
		sc.unary++
	case '{':
		sc.open()
		sc.braces++
	case '[', '(':
		sc.open()
	case '}':
		sc.closeBrace()
	case '~':
		if i+1 < len(src) && src[i+1] == '}' {
			i++
			sc.closeBrace()
			break
		}
		sc.unary = 0
	case ']', ')':
		sc.depth = max(sc.depth-1, 0)
		sc.unary = 0
	case '"':
		sc.modes = append(sc.modes, sc.mode)
		sc.mode = quoted
		sc.unary = 0
	case '#':
		sc.unary = 0
		i = lineEnd(src, i)
	case '/':
		sc.unary = 0
		if i+1 < len(src) && src[i+1] == '/' {
			i = lineEnd(src, i)
		} else if i+1 < len(src) && src[i+1] == '*' {
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				return i, false
			}
			i += 2 + end + 1
		}
	case '<':
		if i+1 < len(src) && src[i+1] == '<' {
			return i, false // perhaps a heredoc
		}
		sc.unary = 0
	default:
		sc.unary = 0
	}
	sc.bound = max(sc.bound, sc.depth+sc.unary)
	return i, true
}

// lineEnd returns the index of the last byte before the newline that ends
// the line holding i, or of src's last byte.
func lineEnd(src []byte, i int) int {
	for i+1 < len(src) && src[i+1] != '\n' {
		i++
	}
	return i
}
