package hclnest

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// deepest is the deepest nesting TooDeep measures in tokens.
func deepest(tokens hclsyntax.Tokens) int {
	depth, unary, most := 0, 0, 0
	for _, t := range tokens {
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
			unary = 0
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen,
			hclsyntax.TokenTemplateSeqEnd:
			depth = max(depth-1, 0)
			unary = 0
		case hclsyntax.TokenMinus, hclsyntax.TokenBang:
			unary++
		default:
			unary = 0
		}
		most = max(most, depth+unary)
	}
	return most
}

// checkBound fails when Bound claims a bound below the nesting the lexer's
// tokens show, in a configuration file or an expression.
func checkBound(t *testing.T, src []byte) {
	t.Helper()
	bound, ok := Bound(src)
	if !ok {
		return
	}
	if bound > Max {
		t.Fatalf("Bound(%q) = %d, ok beyond Max", src, bound)
	}
	config, _ := hclsyntax.LexConfig(src, "f.hcl", hcl.InitialPos)
	expr, _ := hclsyntax.LexExpression(src, "f.hcl", hcl.InitialPos)
	if d := max(deepest(config), deepest(expr)); d > bound {
		t.Fatalf("Bound(%q) = %d, but the tokens nest %d deep", src, bound, d)
	}
}

var boundSources = []string{
	// Closers in comments and strings hide nothing from Bound.
	"x = [[\n# ]]\n[1]]]\n",
	"x = [[\n// ]]\n[1]]]\n",
	"x = [[ /* ]] */ [1]]]\n",
	"x = [[\"]]\", [1]]]\n",
	"x = [[\"\\\"]]\\\"\", [1]]]\n",
	"x = [[\"${\"]]\"}\", [1]]]\n",
	"pool \"p1\" {\n  nodes = 2\n  labels = { site = \"s1\" }\n}\n",
	"locals {\n  x = [[[1]]]\n  y = -(-1)\n  z = !!true\n  w = a - -b\n}\n",
	"# }}}]]])))\nx = [[[1]]]\n",
	"// }}}\nx = [[[1]]]\n",
	"/* }}} */ x = [[[1]]] /* ] */\n",
	"/* }}} \n ]]] */ x = [[[1]]]\n",
	"x = \"}}}\" y = [[[1]]]\n",
	"x = \"\\\"}}}\" y = [[[1]]]\n",
	"x = \"${a}}}\" y = [[[1]]]\n",
	"x = \"${ {a = \"}\"} }]]\" y = [[[1]]]\n",
	"x = \"$${ }}}\" y = [[[1]]]\n",
	"x = \"%%{ }}}\" y = [[[1]]]\n",
	"x = \"$$${a}]]\" y = [[[1]]]\n",
	"x = \"%{ if a }}}%{ endif }\" y = [[[1]]]\n",
	"x = \"${~ a ~}]]\" y = [[[1]]]\n",
	"x = \"${ \"${ \"${ a }\" }\" }\"\n",
	"x = \"\\${ ]]\" y = [[[1]]]\n",
	"x = a ~} ]] y = [[[1]]]\n",
	"x = <<EOT\n}}}\nEOT\ny = [[[1]]]\n",
	"x = \"}}}\n]]]\"\ny = [[[1]]]\n",
	"x = \"\\\n]]]\"\ny = [[[1]]]\n",
	"/* ]]] x = [[[1]]]\n",
	"x = foo-bar - -1e-5 != !a\n",
	"\xef\xbb\xbfx = [\xff]\n",
	"A0\xd1\"!000",
	"x\xd1[ = 1\n",
	"x = \"caf\xc3\xa9 ${a}\" # \xff }\n",
	"x = [" + strings.Repeat("[", Max) + strings.Repeat("]", Max+1) + "\n",
}

// TestBound checks that Bound is never below the nesting of the lexed
// tokens, and that it follows ordinary configuration rather than giving up.
func TestBound(t *testing.T) {
	for _, src := range boundSources {
		checkBound(t, []byte(src))
	}
	for _, tt := range []struct {
		src  string
		want int
		ok   bool
	}{
		{"pool \"p1\" {\n  nodes = 2\n  labels = { site = \"s1\" }\n}\n", 2, true},
		{"x = \"${ {a = \"}\"} }]]\" y = [[[1]]]\n", 3, true},
		{"# }}}]]])))\nx = [[[1]]]\n", 3, true},
		{"/* ]]] */ x = [[[1]]]\n", 3, true},
		{"x = \"$${ }}}\" y = [[[1]]]\n", 3, true},
		{"locals {\n  y = -(--1)\n}\n", 4, true},
		{"x = <<EOT\n}}}\nEOT\n", 0, false},
		{"/* ]]] x = [[[1]]]\n", 0, false},
		{"x = " + strings.Repeat("[", Max+1), 0, false},
		{"x = " + strings.Repeat("-", Max+1) + "1", 0, false},
	} {
		got, ok := Bound([]byte(tt.src))
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("Bound(%q) = %d, %v; want %d, %v", tt.src, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzBound(f *testing.F) {
	for _, src := range boundSources {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		checkBound(t, src)
	})
}
