package macro

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// upperSource resolves names case-insensitively, keyed by upper case, as
// configuration files do.
type upperSource map[string]string

func (s upperSource) Lookup(name string) (string, string, bool) {
	up := strings.ToUpper(name)
	v, ok := s[up]
	return v, up, ok
}

func TestExpand(t *testing.T) {
	src := upperSource{
		"A":     "alpha",
		"B":     "$(A)-beta",
		"N":     "6",
		"EXPR":  "$(N) * 7",
		"EMPTY": "",
		"WHICH": "A",
		"FILE":  "/data/in/run.tar.gz",
		"IDX":   "1",
		"SELF":  "$(SELF)",
		"LOOP1": "x$(LOOP2)",
		"LOOP2": "$(loop1)",
		"LONG":  "0123456789",
		// As HTCondor's manual has them.
		"SLIST":    `"a,B,c"`,
		"LCSLIST":  `tolower($(slist))`,
		"LIST":     `split($(slist))`,
		"CLIST":    `size($(list)) * 10`,
		"SEMILIST": `join(";",split($(lcslist)))`,
		"HOST":     `toLower("host.DOMAIN")`,
	}
	env := func(k string) (string, bool) {
		if k == "HOME" {
			return "/home/u", true
		}
		return "", false
	}
	x := Expander{Source: src, Env: env}
	cases := []struct {
		in, want string
		err      string
	}{
		{in: "no macros", want: "no macros"},
		{in: "$(a) and $(B)", want: "alpha and alpha-beta"},
		{in: "$(missing)", want: ""},
		{in: "$(missing:dflt $(A))", want: "dflt alpha"},
		{in: "$(EMPTY:fallback)", want: "fallback"},
		{in: "$($(WHICH))", want: "alpha"},
		{in: "$(DOLLAR)(A)", want: "$(A)"},
		{in: "$$(Memory) $(A)", want: "$$(Memory) alpha"},
		{in: "cost $5 $", want: "cost $5 $"},
		{in: "$UNKNOWN(x)", want: "$UNKNOWN(x)"},
		{in: "$ENV(HOME)", want: "/home/u"},
		{in: "$ENV(NOPE:none)", want: "none"},
		{in: "$ENV(NOPE)", want: ""},
		{in: "$INT(EXPR)", want: "42"},
		{in: "$INT(7 / 2)", want: "3"},
		{in: "$INT(N,%03d)", want: "006"},
		{in: "$REAL(7.0 / 2)", want: "3.5"},
		{in: "$REAL(1e2)", want: "100"},
		{in: "$CHOICE(IDX, x, $(A), z)", want: "alpha"},
		{in: "$CHOICE(2, x, y, z)", want: "z"},
		{in: "$SUBSTR(LONG, 2, 3)", want: "234"},
		{in: "$SUBSTR(LONG, -3)", want: "789"},
		{in: "$SUBSTR(LONG, 1, -2)", want: "1234567"},
		{in: "$Fn(FILE)", want: "run.tar"},
		{in: "$Fx(FILE)", want: ".gz"},
		{in: "$Fnx(FILE)", want: "run.tar.gz"},
		{in: "$Fp(FILE)", want: "/data/in/"},
		{in: "$Fd(FILE)", want: "in/"},
		{in: "$Fq(FILE)", want: `"/data/in/run.tar.gz"`},
		{in: "$Fn(other/x.txt)", want: "x"},
		{in: "$EVAL(SLIST)", want: "a,B,c"},
		{in: "$EVAL(LCSLIST)", want: "a,b,c"},
		{in: "$EVAL(LIST)", want: `{ "a","B","c" }`}, // as the ClassAd unparser writes a list
		{in: "$EVAL(CLIST)", want: "30"},
		{in: "$EVAL(SEMILIST)", want: "a;b;c"},
		{in: "$EVAL($(N) * 2)", want: "12"},
		{in: "$STRING(HOST)", want: "host.domain"},
		{in: "$STRING(HOST,Name: %s)", want: "Name: host.domain"},
		{in: "$DIRNAME(FILE)", want: "/data/in/"},
		{in: "$BASENAME(FILE)", want: "run.tar.gz"},
		{in: "$RANDOM_INTEGER(4, 4)", want: "4"},
		{in: "$RANDOM_INTEGER(10, 12, 5)", want: "10"},
		{in: "$RANDOM_CHOICE(only)", want: "only"},
		{in: "$(SELF)", err: "circular macro reference: SELF -> SELF"},
		{in: "$(LOOP1)", err: "circular macro reference: LOOP1 -> LOOP2 -> LOOP1"},
		{in: "$(A", err: "unterminated macro reference"},
		{in: "$INT(A)", err: "$INT(A)"},
		{in: "$CHOICE(5, x)", err: "out of range"},
		{in: "$RANDOM_INTEGER(3, 1)", err: "bad range"},
		{in: "$SUBSTR(LONG, x)", err: "bad start"},
		{in: "$EVAL(1 +)", err: "not a ClassAd expression"},
		{in: "$STRING(N)", err: "not a string"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := x.Expand(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Expand(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestCircularIsErrCircular(t *testing.T) {
	x := Expander{Source: upperSource{"A": "$(B)", "B": "$(A)"}}
	_, err := x.ExpandValue("$(B)", "A")
	if !errors.Is(err, ErrCircular) {
		t.Fatalf("err = %v, want ErrCircular", err)
	}
}

func TestExpansionBounded(t *testing.T) {
	src := upperSource{"A0": strings.Repeat("x", 64)}
	for i := 1; i < 20; i++ {
		src["A"+strconv.Itoa(i)] = "$(A" + strconv.Itoa(i-1) + ")$(A" + strconv.Itoa(i-1) + ")"
	}
	_, err := Expander{Source: src}.Expand("$(A19)")
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("err = %v, want a length error", err)
	}
}

func TestEvalArith(t *testing.T) {
	cases := []struct {
		in     string
		want   float64
		isInt  bool
		hasErr bool
	}{
		{"1 + 2 * 3", 7, true, false},
		{"(1 + 2) * 3", 9, true, false},
		{"-4 / 3", -1, true, false},
		{"7 % 4", 3, true, false},
		{"1.5 * 2", 3, false, false},
		{"2.5e1", 25, false, false},
		{"1 / 0", 0, false, true},
		{"1 +", 0, false, true},
		{"abc", 0, false, true},
	}
	for _, tc := range cases {
		got, isInt, err := EvalArith(tc.in)
		if (err != nil) != tc.hasErr || (err == nil && (got != tc.want || isInt != tc.isInt)) {
			t.Errorf("EvalArith(%q) = %v, %v, %v; want %v, %v, error %v", tc.in, got, isInt, err, tc.want, tc.isInt, tc.hasErr)
		}
	}
}

func TestSplitArgsAndMatchParen(t *testing.T) {
	if got := SplitArgs("a, f(b, c), d"); len(got) != 3 || got[1] != " f(b, c)" {
		t.Errorf("SplitArgs = %q", got)
	}
	if got := MatchParen("x(a(b)c)d", 1); got != 7 {
		t.Errorf("MatchParen = %d, want 7", got)
	}
	if got := MatchParen("(open", 0); got != -1 {
		t.Errorf("MatchParen unterminated = %d, want -1", got)
	}
}

// countingSource is upperSource counting its lookups.
type countingSource struct {
	upperSource
	lookups int
}

func (s *countingSource) Lookup(name string) (string, string, bool) {
	s.lookups++
	return s.upperSource.Lookup(name)
}

// doubling defines A0 = base and each An as two references to A(n-1).
func doubling(n int, base string) upperSource {
	src := upperSource{"A0": base}
	for i := 1; i <= n; i++ {
		src["A"+strconv.Itoa(i)] = "$(A" + strconv.Itoa(i-1) + ")$(a" + strconv.Itoa(i-1) + ")"
	}
	return src
}

// TestExpandWorkBounded checks that macros defined as two references to
// the one before, whose full expansion would take 2^n steps, expand with
// a number of lookups linear in n, and that where each reference must be
// expanded anew ($RANDOM_INTEGER) the expansion fails once MaxWork is
// spent rather than running for hours.
func TestExpandWorkBounded(t *testing.T) {
	src := &countingSource{upperSource: doubling(60, "")}
	v, err := Expander{Source: src}.Expand("$(A60)")
	if err != nil || v != "" {
		t.Fatalf("got %q, %v", v, err)
	}
	if src.lookups > 2*61 {
		t.Errorf("%d lookups to expand 60 doubling macros", src.lookups)
	}

	src = &countingSource{upperSource: doubling(18, "x")}
	v, err = Expander{Source: src}.Expand("$(A18)")
	if err != nil || v != strings.Repeat("x", 1<<18) {
		t.Fatalf("got %d bytes, %v", len(v), err)
	}
	if src.lookups > 2*19 {
		t.Errorf("%d lookups to expand 18 doubling macros", src.lookups)
	}

	src = &countingSource{upperSource: doubling(60, "$RANDOM_INTEGER(0, 1)")}
	_, err = Expander{Source: src}.Expand("$(A60)")
	if err == nil || !strings.Contains(err.Error(), "too much work") {
		t.Fatalf("got %v, want too much work", err)
	}
	if src.lookups > MaxWork/64+1 {
		t.Errorf("%d lookups, more than MaxWork allows", src.lookups)
	}
}

// TestExpandRandomDrawsAnew checks that a macro holding $RANDOM_INTEGER
// referred to many times in one value draws for each reference.
func TestExpandRandomDrawsAnew(t *testing.T) {
	src := upperSource{"R": "$RANDOM_INTEGER(0, 1)", "S": "$(R)"}
	v, err := Expander{Source: src}.Expand(strings.Repeat("$(S)", 64))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v, "0") || !strings.Contains(v, "1") {
		t.Errorf("64 draws all alike: %s", v)
	}
}

func TestEvalArithUnaryNesting(t *testing.T) {
	if _, _, err := EvalArith(strings.Repeat("-", 100) + "1"); err != nil {
		t.Errorf("100 unary minuses: %v", err)
	}
	if _, _, err := EvalArith(strings.Repeat("-", 1_000_000) + "1"); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("a million unary minuses: %v, want nested too deeply", err)
	}
}
