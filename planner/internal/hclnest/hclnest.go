// Package hclnest bounds how deeply HCL native syntax may nest. The HCL
// parser and evaluator recurse once or more per level, so source nested
// tens of thousands deep would exhaust the stack and crash the process
// rather than fail with an error. Callers lex the source, which does not
// recurse, and check its tokens before they parse it.
package hclnest

import "github.com/hashicorp/hcl/v2/hclsyntax"

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
