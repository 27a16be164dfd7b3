package classad

import (
	"testing"
)

// Seed corpora live in testdata/fuzz/<FuzzName>; these add a few inline.
var fuzzSeeds = []string{
	benchRequirements,
	`[ a = 1; b = a + 1; c = { 1, "x", [ d = b ] } ].c[2].d`,
	`"a\"b\\c\n" =?= toUpper("x")`,
	`x ?: -2 + y[3] >>> 2`,
	`- 1`, `-1`, `- -1.5e-3`, `.5 * 0x1F`,
	`strcat(MY.a, TARGET.b, PARENT.c) isnt undefined`,
	`regexp("^(a|b)+$", "abab", "i") && member(1, {1,2})`,
}

func FuzzParseExpr(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	my, _ := ParseNewAd(diffMy)
	target, _ := ParseNewAd(diffTarget)
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseExpr(src)
		if err != nil {
			if _, ok := err.(*SyntaxError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		s1 := e.String()
		e2, err := ParseExpr(s1)
		if err != nil {
			t.Fatalf("unparse %q of %q does not parse: %v", s1, src, err)
		}
		if s2 := e2.String(); s2 != s1 {
			t.Fatalf("unparse is not a fixed point:\n src %q\n  s1 %q\n  s2 %q", src, s1, s2)
		}
		// Evaluation must terminate without panicking, alone and in a match.
		_ = EvalWith(e, NewAd(), nil)
		_ = EvalWith(e, my, target)
	})
}

func FuzzParseAd(f *testing.F) {
	f.Add(benchMachineAd)
	f.Add(benchJobAd)
	f.Add(diffMy)
	f.Add(`{"a": 1, "b": "\/Expr(a + 1)\/", "c": [1, {"d": null}], "e": 2.5}`)
	f.Add("[ a = 1; 'b c' = \"x\" ]")
	f.Add("A = 1\n# comment\nB = \"x\\y\"\n")
	f.Fuzz(func(t *testing.T, src string) {
		a, err := ParseAd(src)
		if err != nil {
			return
		}
		s1 := a.NewSyntax()
		b, err := ParseNewAd(s1)
		if err != nil {
			t.Fatalf("new-syntax print %q of %q does not parse: %v", s1, src, err)
		}
		if s2 := b.NewSyntax(); s2 != s1 {
			t.Fatalf("new syntax is not a fixed point:\n src %q\n  s1 %q\n  s2 %q", src, s1, s2)
		}
		for _, n := range a.Names() {
			_ = a.EvalAttr(n)
		}
		if _, err := a.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
		_ = a.String()
	})
}

func FuzzMatch(f *testing.F) {
	f.Add(benchJobAd, benchMachineAd)
	f.Add("Requirements = TARGET.x > 1\nRank = x", "x = 2\nRequirements = MY.x == TARGET.x")
	f.Fuzz(func(t *testing.T, a, b string) {
		x, err1 := ParseAd(a)
		y, err2 := ParseAd(b)
		if err1 != nil || err2 != nil {
			return
		}
		m := NewMatcher(x)
		if Match(x, y) != m.SymmetricMatch(y) {
			t.Fatalf("Match and Matcher disagree")
		}
		_ = Rank(x, y)
		_ = m.Rank(y)
	})
}
