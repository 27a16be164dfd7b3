package classad

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// syntaxAd exercises every kind of value; the expected printings below
// are HTCondor 25's (ClassAd.printOld, repr and printJson), in the ad's
// attribute order.
const syntaxAd = `[a = 1.0; b = 1e30; c = 0.1; d = "x/y\\\\z\"q"; f = 1e-7; g = {}; h = []; i = {1, "a", [x = 1]}; j = a + b; k = real("INF"); l = -1.5; m = true; n = undefined; o = error; p = [q = {2}; r = "s"]; s = 100000000000000000000.0; t = 123456789.0; u = -0.0]`

func TestPrintOld(t *testing.T) {
	a, err := ParseNewAd(syntaxAd)
	if err != nil {
		t.Fatal(err)
	}
	want := `a = 1.0
b = 1E+30
c = 0.1
d = "x/y\\z\"q"
f = 1E-07
g = {  }
h = [  ]
i = { 1,"a",[ x = 1 ] }
j = a + b
k = real("INF")
l = -1.5
m = true
n = undefined
o = error
p = [ q = { 2 }; r = "s" ]
s = 1E+20
t = 123456789.0
u = -0.0
`
	if diff := cmp.Diff(want, a.String()); diff != "" {
		t.Errorf("old syntax (-want +got):\n%s", diff)
	}
	b, err := ParseOldAd(a.String())
	if err != nil {
		t.Fatalf("old syntax does not re-parse: %v", err)
	}
	if b.String() != a.String() {
		t.Errorf("old syntax round trip:\n%s\n%s", a, b)
	}
}

func TestPrintNew(t *testing.T) {
	a, err := ParseNewAd(syntaxAd)
	if err != nil {
		t.Fatal(err)
	}
	want := `[ a = 1.000000000000000E+00; b = 1.000000000000000E+30; c = 1.000000000000000E-01; d = "x/y\\\\z\"q"; f = 1.000000000000000E-07; g = {  }; h = [  ]; i = { 1,"a",[ x = 1 ] }; j = a + b; k = real("INF"); l = -1.500000000000000E+00; m = true; n = undefined; o = error; p = [ q = { 2 }; r = "s" ]; s = 1.000000000000000E+20; t = 1.234567890000000E+08; u = -0.0 ]`
	if diff := cmp.Diff(want, a.NewSyntax()); diff != "" {
		t.Errorf("new syntax (-want +got):\n%s", diff)
	}
}

func TestJSON(t *testing.T) {
	a, err := ParseNewAd(syntaxAd)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "a": 1.0,
  "b": 1E+30,
  "c": 0.1,
  "d": "x/y\\\\z\"q",
  "f": 1E-07,
  "g": [
  ],
  "h": {
  },
  "i": [
    1,
    "a",
    {
      "x": 1
    }
  ],
  "j": "\/Expr(a + b)\/",
  "k": "\/Expr(real(\"INF\"))\/",
  "l": -1.5,
  "m": true,
  "n": null,
  "o": "\/Expr(error)\/",
  "p": {
    "q": [
      2
    ],
    "r": "s"
  },
  "s": 1E+20,
  "t": 123456789.0,
  "u": -0.0
}`
	got, err := a.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	b, err := ParseJSONAd(string(got))
	if err != nil {
		t.Fatalf("JSON does not re-parse: %v", err)
	}
	if b.NewSyntax() != a.NewSyntax() {
		t.Errorf("JSON round trip:\n%s\n%s", a.NewSyntax(), b.NewSyntax())
	}
	ads, err := ParseJSON(string(MarshalJSON([]*Ad{a, b})))
	if err != nil || len(ads) != 2 {
		t.Fatalf("ParseJSON(MarshalJSON) = %d ads, %v", len(ads), err)
	}
}

func TestParseAdDetectsSyntax(t *testing.T) {
	tests := []struct{ name, src string }{
		{"new", `[ A = 1; B = "x" ]`},
		{"new with comment", "/* c */ [ A = 1; B = \"x\" ]"},
		{"old", "A = 1\nB = \"x\"\n"},
		{"json", `{"A": 1, "B": "x"}`},
		{"json array", `[{"A": 1, "B": "x"}]`},
	}
	for _, tt := range tests {
		a, err := ParseAd(tt.src)
		if tt.name == "json array" {
			a, err = ParseJSONAd(tt.src)
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := a.NewSyntax(); got != `[ A = 1; B = "x" ]` {
			t.Errorf("%s: got %s", tt.name, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src string
		parse     func(string) error
		want      string
	}{
		{"expr trailing", "1 + 2 )", exprParse, "1:7: unexpected ')' after expression"},
		{"expr missing operand", "1 +", exprParse, "1:4: unexpected end of input"},
		{"expr bad number", "1.", exprParse, "1:3: malformed number"},
		{"expr unterminated string", `"abc`, exprParse, "1:1: unterminated string"},
		{"expr bad char", "a $ b", exprParse, "1:3: unexpected character '$'"},
		{"expr multi-line", "a +\n  (b", exprParse, "2:5: expected ')'"},
		{"new ad", "[ a = 1; b ]", newParse, "1:12: expected '='"},
		{"new ad no bracket", "a = 1", newParse, "1:1: expected '['"},
		{"old ad", "A = 1\nB = (2\n", oldParse, "2:7: expected ')'"},
		{"old ad no name", "A = 1\n= 2\n", oldParse, "2:1: expected attribute name"},
		{"json", "{\"a\": 1,\n \"b\": }", jsonParse, "2:"},
		{"json bad expr", `{"a": "\/Expr(1 +)\/"}`, jsonParse, "bad expression"},
	}
	for _, tt := range tests {
		err := tt.parse(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
		var se *SyntaxError
		if err != nil && tt.name != "json bad expr" && !errors.As(err, &se) {
			t.Errorf("%s: error %T is not a *SyntaxError", tt.name, err)
		}
	}
}

func exprParse(s string) error { _, err := ParseExpr(s); return err }
func newParse(s string) error  { _, err := ParseNewAd(s); return err }
func oldParse(s string) error  { _, err := ParseOldAd(s); return err }
func jsonParse(s string) error { _, err := ParseJSONAd(s); return err }

func TestAdAPI(t *testing.T) {
	a := NewAd()
	a.SetInt("Memory", 1024)
	a.SetReal("LoadAvg", 0.5)
	a.SetString("Arch", "X86_64")
	a.SetBool("HasGPU", false)
	if err := a.SetExpr("Requirements", "memory > 512 && !HasGPU"); err != nil {
		t.Fatal(err)
	}
	a.SetValue("Tags", List([]Value{String("a"), Int(2)}))
	a.SetInt("MEMORY", 2048) // case-insensitive replace keeps the first spelling
	if got := a.Names(); !cmp.Equal(got, []string{"Memory", "LoadAvg", "Arch", "HasGPU", "Requirements", "Tags"}) {
		t.Errorf("Names = %v", got)
	}
	if v, ok := a.EvalAttr("memory").IntValue(); !ok || v != 2048 {
		t.Errorf("Memory = %v", a.EvalAttr("memory"))
	}
	if b, ok := a.EvalAttr("requirements").BoolValue(); !ok || !b {
		t.Errorf("Requirements = %v", a.EvalAttr("requirements"))
	}
	if got := a.EvalAttr("Tags").String(); got != `{ "a",2 }` {
		t.Errorf("Tags = %s", got)
	}
	if !a.Delete("arch") || a.Delete("arch") {
		t.Error("Delete")
	}
	if _, ok := a.Lookup("Arch"); ok {
		t.Error("Arch still present")
	}
	if a.Len() != 5 {
		t.Errorf("Len = %d", a.Len())
	}
	if v := a.EvalExpr(MustParseExpr("LoadAvg * 2")); v.String() != "1.000000000000000E+00" {
		t.Errorf("EvalExpr = %v", v)
	}
	c := a.Copy()
	c.SetInt("Memory", 1)
	if v, _ := a.EvalAttr("Memory").IntValue(); v != 2048 {
		t.Error("Copy shares attributes")
	}
}

// TestUnparseInfinities checks that infinities and NaN, which have no
// literal, unparse as HTCondor writes them (classad2.ExprTree, HTCondor
// 25.14) and that the text reads back to itself.
func TestUnparseInfinities(t *testing.T) {
	for src, want := range map[string]string{
		`1e999`:        `real("INF")`,
		`-1e999`:       `real("-INF")`,
		`- 1e999`:      ` -real("INF")`,
		`x - -1e999`:   `x - real("-INF")`,
		`-1e999 * 2`:   `real("-INF") * 2`,
		`-1e999.a`:     `real("-INF").a`,
		`1e999.a`:      `real("INF").a`,
		`- -1e999`:     ` -real("-INF")`,
		`-1e999[0]`:    `real("-INF")[0]`,
		`real("NaN")`:  `real("NaN")`,
		`-real("INF")`: ` -real("INF")`,
	} {
		e, err := ParseExpr(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := e.String(); got != want {
			t.Errorf("%s unparses as %q, want %q", src, got, want)
		}
		e2, err := ParseExpr(want)
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if got := e2.String(); got != want {
			t.Errorf("%q reads back as %q", want, got)
		}
	}
	a, err := ParseNewAd(`[a = -1e999; b = 1e999; d = real("NaN")]`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.String(), "a = real(\"-INF\")\nb = real(\"INF\")\nd = real(\"NaN\")\n"; got != want {
		t.Errorf("old syntax:\n%s\nwant\n%s", got, want)
	}
}

// TestAdSizeAndCopy: an ad made with room for some attributes, and a
// copy, behave as an ad made empty: names keep their spelling and order,
// match in any case, can be set past the room made, deleted and set
// again; a copy and its original change apart.
func TestAdSizeAndCopy(t *testing.T) {
	for _, size := range []int{-1, 0, 2, 3, 10} {
		a := NewAdSize(size)
		a.SetInt("Memory", 2048)
		a.SetString("Arch", "X86_64")
		a.SetInt("Cpus", 4)
		a.Set("Nested", MustParseExpr("[ x = Memory ]"))
		if !a.Delete("ARCH") {
			t.Fatalf("size %d: Delete(ARCH) found nothing", size)
		}
		a.SetString("arch", "aarch64")
		c := a.Copy()
		c.SetInt("memory", 1)
		c.SetInt("Extra", 7)
		for _, tc := range []struct {
			ad    *Ad
			names string
			mem   int64
		}{
			{a, "Memory Cpus Nested arch", 2048},
			{c, "Memory Cpus Nested arch Extra", 1},
		} {
			if got := strings.Join(tc.ad.Names(), " "); got != tc.names {
				t.Errorf("size %d: names %q, want %q", size, got, tc.names)
			}
			if v, _ := tc.ad.EvalAttr("MEMORY").IntValue(); v != tc.mem {
				t.Errorf("size %d: Memory = %d, want %d", size, v, tc.mem)
			}
			if v, _ := tc.ad.EvalAttr("ARCH").StringValue(); v != "aarch64" {
				t.Errorf("size %d: Arch = %q", size, v)
			}
		}
		if _, ok := a.Lookup("Extra"); ok {
			t.Errorf("size %d: the original has its copy's attribute", size)
		}
	}
}
