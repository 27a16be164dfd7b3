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
	const (
		code   = iota // the scanner's main mode
		quoted        // inside a quoted template
	)
	mode := code
	// As in the scanner: the modes to return to, the open braces, and the
	// brace levels at which a closing brace ends an interpolation or
	// directive rather than an object.
	var modes []int
	braces := 0
	var retBraces []int
	depth, unary := 0, 0
	last := byte(0) // the last byte of code not a space or a tab
	open := func() {
		depth++
		unary = 0
		bound = max(bound, depth)
	}
	closeBrace := func() {
		depth = max(depth-1, 0)
		unary = 0
		if n := len(retBraces); n > 0 && retBraces[n-1] == braces {
			retBraces = retBraces[:n-1]
			mode, modes = modes[len(modes)-1], modes[:len(modes)-1]
		}
		braces--
	}
	// interp enters the code of an interpolation or directive whose
	// introducer starts at i and returns the index of its last byte.
	interp := func(i int) int {
		open()
		braces++
		retBraces = append(retBraces, braces)
		modes = append(modes, mode)
		mode = code
		i++ // the brace
		if i+1 < len(src) && src[i+1] == '~' {
			i++
		}
		return i
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c >= utf8.RuneSelf {
			// The scanner may take the bytes after malformed UTF-8 into
			// the same token, brackets and quotes included.
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size <= 1 {
				return bound, false
			}
			i += size - 1
			if mode == code {
				unary, last = 0, c
			}
			continue
		}
		if mode == quoted {
			switch c {
			case '"':
				mode, modes = modes[len(modes)-1], modes[:len(modes)-1]
				unary, last = 0, c
			case '\\':
				if i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r') {
					return bound, false
				}
				i++
			case '\n', '\r':
				return bound, false
			case '$', '%':
				switch {
				case i+1 < len(src) && src[i+1] == '{':
					i = interp(i)
				case i+2 < len(src) && src[i+1] == c && src[i+2] == '{':
					i += 2 // an escaped introducer: $${ or %%{
				}
			}
			if bound > Max {
				return bound, false
			}
			continue
		}
		if c == '\n' && blockEnd != nil && last == '}' && depth == 0 && braces == 0 && len(modes) == 0 {
			blockEnd(i + 1)
		}
		if c != ' ' && c != '\t' {
			last = c
		}
		switch c {
		case ' ', '\t':
			continue
		case '-', '!':
			unary++
		case '{':
			open()
			braces++
		case '[', '(':
			open()
		case '}':
			closeBrace()
		case '~':
			if i+1 < len(src) && src[i+1] == '}' {
				i++
				closeBrace()
				break
			}
			unary = 0
		case ']', ')':
			depth = max(depth-1, 0)
			unary = 0
		case '"':
			modes = append(modes, mode)
			mode = quoted
			unary = 0
		case '#':
			unary = 0
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		case '/':
			unary = 0
			if i+1 < len(src) && src[i+1] == '/' {
				for i+1 < len(src) && src[i+1] != '\n' {
					i++
				}
			} else if i+1 < len(src) && src[i+1] == '*' {
				end := bytes.Index(src[i+2:], []byte("*/"))
				if end < 0 {
					return bound, false
				}
				i += 2 + end + 1
			}
		case '<':
			if i+1 < len(src) && src[i+1] == '<' {
				return bound, false // perhaps a heredoc
			}
			unary = 0
		default:
			unary = 0
		}
		bound = max(bound, depth+unary)
		if bound > Max {
			return bound, false
		}
	}
	return bound, true
}
