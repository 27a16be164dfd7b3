package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/pond-htc/pond/planner/internal/hclnest"
)

// MaxNesting is how deeply the constructs of a configuration file, a
// variables file or a -var value may nest: blocks, brackets, braces,
// parentheses, template interpolations and directives, and chains of unary
// operators (-, !) all count. The HCL parser and evaluator recurse once or
// more per level, so a file nested tens of thousands deep would exhaust the
// stack and crash pondctl rather than fail with an error; real
// configurations nest a few levels.
const MaxNesting = hclnest.Max

// checkNesting reports an error at the first construct of native-syntax
// source nested deeper than MaxNesting. expr lexes src as a bare
// expression (a -var value) rather than a configuration file.
func checkNesting(src []byte, filename string, expr bool) hcl.Diagnostics {
	// Most sources nest a few levels: a scan of the bytes shows it, and
	// spares lexing them a second time (the parser lexes them again).
	if _, ok := hclnest.Bound(src); ok {
		return nil
	}
	var tokens hclsyntax.Tokens
	if expr {
		tokens, _ = hclsyntax.LexExpression(src, filename, hcl.InitialPos)
	} else {
		tokens, _ = hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	}
	if t := hclnest.TooDeep(tokens); t != nil {
		return nestingDiag(src, filename, t.Range.Start.Byte, t.Range.End.Byte)
	}
	return nil
}

// checkNestingJSON is checkNesting for JSON source: arrays and objects
// count.
func checkNestingJSON(src []byte, filename string) hcl.Diagnostics {
	depth, inString := 0, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > MaxNesting {
				return nestingDiag(src, filename, i, i+1)
			}
		case ']', '}':
			depth = max(depth-1, 0)
		}
	}
	return nil
}

func nestingDiag(src []byte, filename string, start, end int) hcl.Diagnostics {
	// Lines and columns are made from byte offsets, which hold even after
	// malformed UTF-8.
	m := newPosMapper(src, nil)
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Nested too deeply",
		Detail: fmt.Sprintf("This construct is nested more than %d levels deep (blocks, brackets, braces, "+
			"parentheses, template interpolations and unary operators count); flatten it.", MaxNesting),
		Subject: &hcl.Range{
			Filename: filename,
			Start:    m.pos(hcl.Pos{Byte: start}),
			End:      m.pos(hcl.Pos{Byte: end}),
		},
	}}
}

// CheckNesting reports an error at the first construct of a native-syntax
// HCL file nested deeper than MaxNesting, for callers that parse such files
// themselves: check before hclsyntax.ParseConfig, which would crash on
// them.
func CheckNesting(src []byte, filename string) hcl.Diagnostics {
	return checkNesting(src, filename, false)
}
