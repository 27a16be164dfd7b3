package evaltool

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/testenv"
)

// TestCompatibilityWithHTCondor is the differential harness of
// docs/compatibility.md: it generates a seeded, deterministic corpus of
// ClassAd expressions, prints each as "classad eval -quiet" does and
// compares the text byte for byte with what HTCondor's own library
// prints for it (testdata/classad_eval.py, through HTCondor's Python
// bindings). It reports agreement per category and fails when the overall
// agreement drops below compatBar.
//
//	CLASSAD_COMPAT_N     number of expressions (default 100000)
//	CLASSAD_COMPAT_SEED  seed of the generator (default 1)
//	CLASSAD_COMPAT_SHOW  differences shown per category (default 3)
func TestCompatibilityWithHTCondor(t *testing.T) {
	requireBindings(t)
	n := envInt("CLASSAD_COMPAT_N", 100000)
	if testing.Short() && os.Getenv("CLASSAD_COMPAT_N") == "" {
		n = 10000
	}
	seed := uint64(envInt("CLASSAD_COMPAT_SEED", 1))
	show := envInt("CLASSAD_COMPAT_SHOW", 3)

	cases := generateCorpus(seed, n)
	start := time.Now()
	want := oracle(t, cases)
	oracleTime := time.Since(start)

	start = time.Now()
	ads := map[string]*classad.Ad{}
	ad := func(src string) *classad.Ad {
		if src == "" {
			return nil
		}
		if a, ok := ads[src]; ok {
			return a
		}
		a, err := classad.ParseNewAd(src)
		if err != nil {
			t.Fatalf("context ad %s: %v", src, err)
		}
		ads[src] = a
		return a
	}
	type tally struct {
		n, ok int
		diffs []string
	}
	per := map[string]*tally{}
	agree := 0
	for i, c := range cases {
		got := pondEval(c.expr, ad(c.my), ad(c.target))
		tl := per[c.cat]
		if tl == nil {
			tl = &tally{}
			per[c.cat] = tl
		}
		tl.n++
		if got == want[i] {
			tl.ok++
			agree++
			continue
		}
		if len(tl.diffs) < show {
			tl.diffs = append(tl.diffs, fmt.Sprintf("%s [%s]\n      pond:     %s\n      htcondor: %s", c.expr, c.ctxName(), got, want[i]))
		}
	}
	pondTime := time.Since(start)

	cats := make([]string, 0, len(per))
	for k := range per {
		cats = append(cats, k)
	}
	sort.Strings(cats)
	var b strings.Builder
	fmt.Fprintf(&b, "%d expressions (seed %d): %d agree, %.2f%% (bar %.2f%%); HTCondor %v, pond %v\n",
		len(cases), seed, agree, pct(agree, len(cases)), compatBar, oracleTime.Round(time.Millisecond), pondTime.Round(time.Millisecond))
	fmt.Fprintf(&b, "  %-26s %7s %7s %8s\n", "category", "cases", "agree", "percent")
	for _, k := range cats {
		tl := per[k]
		fmt.Fprintf(&b, "  %-26s %7d %7d %7.2f%%\n", k, tl.n, tl.ok, pct(tl.ok, tl.n))
	}
	for _, k := range cats {
		for _, d := range per[k].diffs {
			fmt.Fprintf(&b, "  differs (%s): %s\n", k, d)
		}
	}
	t.Log(b.String())
	if p := pct(agree, len(cases)); p < compatBar {
		t.Errorf("agreement with HTCondor %.2f%% is below the bar of %.2f%%", p, compatBar)
	}
}

// compatBar is the agreement, in percent of generated expressions, below
// which the harness fails. It only goes up.
const compatBar = 99.5

func pct(a, b int) float64 {
	if b == 0 {
		return 100
	}
	return 100 * float64(a) / float64(b)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// pondEval is what "classad eval -quiet [MY] EXPR" prints for expr (with
// TARGET from -target-file), or PARSE_ERROR.
func pondEval(expr string, my, target *classad.Ad) string {
	e, err := classad.ParseExpr(expr)
	if err != nil {
		return "PARSE_ERROR"
	}
	if my == nil {
		my = classad.NewAd()
	}
	return result(e, my, target)
}

func requireBindings(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.SkipOrFail(t, "python3 is not installed; the HTCondor compatibility harness needs HTCondor's Python bindings (python3 -m pip install htcondor)")
	}
	if out, err := exec.Command("python3", "-c", "import classad2, htcondor2").CombinedOutput(); err != nil {
		testenv.SkipOrFailf(t, "HTCondor's Python bindings are not installed (python3 -m pip install htcondor): %s", strings.TrimSpace(string(out)))
	}
}

// oracle runs all cases through one python3 process of
// testdata/classad_eval.py and returns what HTCondor prints for each.
func oracle(t *testing.T, cases []compatCase) []string {
	t.Helper()
	cmd := exec.Command("python3", filepath.Join("testdata", "classad_eval.py"))
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the oracle: %v", err)
	}
	go func() {
		w := bufio.NewWriter(stdin)
		enc := json.NewEncoder(w)
		for _, c := range cases {
			req := map[string]any{"expr": c.expr, "my": nil, "target": nil}
			if c.my != "" {
				req["my"] = c.my
			}
			if c.target != "" {
				req["target"] = c.target
			}
			_ = enc.Encode(req)
		}
		_ = w.Flush()
		_ = stdin.Close()
	}()
	out := make([]string, 0, len(cases))
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var r struct {
			Out string `json:"out"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("oracle output %q: %v", sc.Text(), err)
		}
		out = append(out, r.Out)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	if len(out) != len(cases) {
		t.Fatalf("oracle answered %d of %d expressions", len(out), len(cases))
	}
	return out
}

// The context ads of the corpus: MY (the ad classad eval builds) and
// TARGET (-target-file).
const (
	compatMy = `[ a = 3; b = "Hello"; c = 2.5; d = true; e = -7; i = 1; l = { 1, "x", 2.5, undefined }; le = { i, i + 1, TARGET.ti }; ` +
		`n = [ p = 1; q = "s"; r = { 4, 5 }; pa = a; k = [ m = p; o = PARENT.q ] ]; s = "hello"; u = undefined; z = 0; r = a + 1; ` +
		`t = TARGET.a; w = MY.c * 2; cyc = cyc + 1; cy1 = cy2; cy2 = cy1; un = "héllo wörld æøå 日本"; sl = "a,b;c d, 1"; ` +
		`nl = "1, 2.5, 3"; il = "4,5,6"; env = "A=1 B=two"; ads = { [ a = 1; v = a * 2 ], [ a = 2; v = a * 2 ] }; Memory = 1024; ` +
		`big = 9223372036854775807; small = -9223372036854775807 - 1; re = "^h.*o$"; ver = "8.10.2" ]`
	compatTarget = `[ a = 10; b = "world"; c = 0.5; d = false; e = 8; ti = 5; l = { "A", "b" }; n = [ p = 2 ]; s = "HELLO"; u = 1; ` +
		`f = MY.a + 1; g = TARGET.a; h = a + 1; Memory = 2048; Arch = "X86_64"; Machine = "node1.cs.wisc.edu"; lt = { a, MY.a } ]`
)

type compatCase struct {
	cat, expr  string
	my, target string
}

func (c compatCase) ctxName() string {
	switch {
	case c.target != "":
		return "MY and TARGET"
	case c.my != "":
		return "MY"
	}
	return "empty ad"
}

// generateCorpus returns n expressions generated from seed; the same seed
// gives the same corpus.
func generateCorpus(seed uint64, n int) []compatCase {
	g := &compatGen{r: rand.New(rand.NewPCG(seed, 17))}
	type source struct {
		weight int
		gen    func() (string, string)
	}
	sources := []source{
		{8, g.literal},
		{14, g.operator},
		{30, g.builtin},
		{10, g.scoping},
		{8, g.record},
		{10, g.list},
		{6, g.unicode},
		{14, g.mixed},
	}
	total := 0
	for _, s := range sources {
		total += s.weight
	}
	cases := make([]compatCase, 0, n)
	for i := 0; i < n; i++ {
		k := g.r.IntN(total)
		var s source
		for _, s = range sources {
			if k < s.weight {
				break
			}
			k -= s.weight
		}
		cat, expr := s.gen()
		c := compatCase{cat: cat, expr: expr}
		switch g.r.IntN(4) {
		case 1:
			c.my = compatMy
		case 2, 3:
			c.my, c.target = compatMy, compatTarget
		}
		cases = append(cases, c)
	}
	return cases
}

type compatGen struct{ r *rand.Rand }

func (g *compatGen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

var (
	compatInts = []string{"0", "1", "2", "3", "-1", "7", "10", "100", "-5", "42", "255", "1024",
		"9223372036854775807", "-9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "-9223372036854775809", "0010", "2147483648", "4294967296"}
	compatReals = []string{"0.0", "1.5", "-2.25", "0.5", "3.0", "1e10", "-0.0", "1e-3", "2.5e2", ".5", "5.", "1E308", "1e309", "-1e309",
		"1e-320", "0.1", "123456789.123456789", "3.141592653589793", "1.0e+15", "2e-7", "6.02214076e23", `real("INF")`, `real("-INF")`, `real("NaN")`, "-1.5"}
	compatStrings = []string{`"abc"`, `"ABC"`, `""`, `"a.b.c"`, `"1"`, `"3.5"`, `"-7"`, `"true"`, `"Hello"`, `"hello world"`, `"x,y z"`, `"a\tb"`, `"q\"uote"`,
		`"back\\slash"`, `"new\nline"`, `"1e3"`, `" 12 "`, `"0x1f"`, `"a, b;c d"`, `"A=1 B=two"`, `"x'y"`, `"\101\102"`, `"%d %s"`, `"a,,b"`, `"  "`}
	compatUnicode = []string{`"héllo"`, `"wörld"`, `"日本語"`, `"Ωmega"`, `"naïve café"`, `"ÉCOLE"`, `"äöü,ÄÖÜ"`, `"😀 emoji"`, `"ß"`, `"é"`, `"Ñ,ñ"`, `"\303\251"`, `"a\344b"`}
	compatOthers  = []string{"true", "false", "TRUE", "False", "undefined", "error", "UNDEFINED", "ERROR"}
	compatAttrs   = []string{"a", "b", "c", "d", "e", "i", "l", "le", "n", "s", "u", "z", "r", "t", "w", "missing", "un", "sl", "nl", "il", "ads", "big", "small",
		"MY.a", "MY.b", "TARGET.a", "TARGET.b", "TARGET.s", "TARGET.d", "TARGET.f", "TARGET.g", "TARGET.h", "TARGET.missing", "MY.missing", "TARGET.l", "TARGET.lt",
		"n.p", "n.q", "n.r", "n.pa", "n.k.m", "n.k.o", "TARGET.n.p", "l[0]", "l[1]", "l[3]", "le[2]", "n.r[1]", "cyc", "cy1", "Memory", "TARGET.Memory"}
	compatBinOps = []string{"+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "=?=", "=!=", "is", "isnt", "&&", "||", "&", "|", "^", "<<", ">>", ">>>"}
	compatUnOps  = []string{"-", "+", "!", "~"}
)

func (g *compatGen) literal() (string, string) {
	switch g.r.IntN(9) {
	case 0, 1:
		return "literal/integer", g.pick(compatInts)
	case 2:
		return "literal/integer", strconv.FormatInt(int64(g.r.Uint64()), 10)
	case 3, 4:
		return "literal/real", g.pick(compatReals)
	case 5:
		f := g.r.NormFloat64() * float64(int64(1)<<g.r.IntN(60))
		if g.r.IntN(2) == 0 {
			f /= float64(int64(1) << g.r.IntN(60))
		}
		return "literal/real", strconv.FormatFloat(f, 'g', -1, 64)
	case 6:
		return "literal/string", g.pick(compatStrings)
	case 7:
		return "literal/time", g.pick([]string{`absTime("2024-01-02T03:04:05")`, `absTime("2024-01-02T03:04:05Z")`, `absTime("2024-01-02T03:04:05+02:00")`,
			`absTime("garbage")`, `absTime(0)`, `absTime(1700000000)`, `relTime("1+02:03:04")`, `relTime("90")`, `relTime("-30")`, `relTime("x")`, `relTime(3725)`,
			`relTime(0.5)`, `absTime("2024-01-02T03:04:05") - absTime("2024-01-01T00:00:00")`, `absTime(1700000000) + relTime(60)`})
	}
	return "literal/other", g.pick(compatOthers)
}

// typed returns a small operand of any type.
func (g *compatGen) typed() string {
	switch g.r.IntN(7) {
	case 0, 1:
		return g.pick(compatInts)
	case 2:
		return g.pick(compatReals)
	case 3:
		return g.pick(compatStrings)
	case 4:
		return g.pick(compatOthers)
	case 5:
		return g.pick(compatAttrs)
	}
	return g.pick([]string{"{ 1, 2 }", "{}", "[ x = 1 ]", "[]", `{ "a" }`, `absTime(0)`, `relTime(60)`})
}

func (g *compatGen) operator() (string, string) {
	if g.r.IntN(5) == 0 {
		op := g.pick(compatUnOps)
		return "operator/unary " + op, op + g.typed()
	}
	op := g.pick(compatBinOps)
	return "operator/binary", g.typed() + " " + op + " " + g.typed()
}

// compatBuiltins lists HTCondor's functions with the arities to try.
var compatBuiltins = map[string][]int{
	"isUndefined": {1}, "isError": {1}, "isString": {1}, "isInteger": {1}, "isReal": {1}, "isList": {1}, "isClassAd": {1}, "isBoolean": {1},
	"isAbstime": {1}, "isReltime": {1}, "ifThenElse": {3, 2}, "int": {1}, "real": {1}, "string": {1}, "bool": {1},
	"floor": {1}, "ceiling": {1}, "round": {1}, "pow": {2}, "quantize": {2}, "sum": {1}, "avg": {1}, "min": {1}, "max": {1},
	"strcat": {0, 1, 2, 3}, "join": {1, 2, 3}, "split": {1, 2}, "substr": {2, 3}, "strcmp": {2}, "stricmp": {2},
	"toUpper": {1}, "toLower": {1}, "size": {1}, "length": {1}, "regexp": {2, 3}, "regexps": {3, 4}, "replace": {3, 4}, "replaceAll": {3, 4},
	"regexpMember": {2, 3}, "stringListSize": {1, 2}, "stringListSum": {1, 2}, "stringListAvg": {1, 2}, "stringListMin": {1, 2},
	"stringListMax": {1, 2}, "stringListMember": {2, 3}, "stringListIMember": {2, 3}, "stringListsIntersect": {2, 3},
	"stringListSubsetMatch": {2, 3}, "stringListISubsetMatch": {2, 3}, "stringListRegexpMember": {2, 3},
	"member": {2}, "identicalMember": {2}, "anyCompare": {3}, "allCompare": {3},
	"absTime": {1, 2}, "relTime": {1}, "formatTime": {1, 2}, "interval": {1}, "splitUserName": {1}, "splitSlotName": {1},
	"versionCmp": {2}, "versionGT": {2}, "versionGE": {2}, "versionLT": {2}, "versionLE": {2}, "versionEQ": {2}, "version_in_range": {3},
	"evalInEachContext": {2}, "countMatches": {2}, "envV1ToV2": {1}, "mergeEnvironment": {0, 1, 2, 3},
	"unparse": {1}, "eval": {1}, "debug": {1}, "nosuchfunc": {1},
}

var compatBuiltinNames = func() []string {
	var out []string
	for k := range compatBuiltins {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}()

// Edge arguments, by the kind of parameter they fit.
var compatEdgeArgs = map[string][]string{
	"regexp":  {`"a.c"`, `"^h"`, `"l+"`, `"(b)"`, `"[0-9]+"`, `"^$"`, `"."`, `"é"`, `"(a)|(b)"`, `"[[:alpha:]]+"`, `"\\d+"`, `"("`, `"A"`, `"o$"`, `"h.*o"`},
	"opts":    {`"i"`, `"I"`, `"m"`, `"s"`, `"x"`, `"g"`, `"f"`, `"ig"`, `"q"`, `""`, `"is"`, `"M"`},
	"subst":   {`"\\1-\\1"`, `"x"`, `""`, `"\\0"`, `"[\\2]"`, `"$1"`},
	"cmpop":   {`"<"`, `"<="`, `">"`, `">="`, `"=="`, `"!="`, `"=?="`, `"=!="`, `"is"`, `"isnt"`, `"IS"`, `"bad"`},
	"list":    {"{ 1, 2, 3 }", `{ "a", "B", "c" }`, "{ 1, 2.5 }", "{}", "{ 1, undefined }", "{ 1, error }", `{ 1, "a" }`, "{ [ a = 1 ], [ a = 2 ] }", "le", "l", "ads", "TARGET.lt", "{ i, i + 1 }", "{ { 1 }, 2 }", "{ true, false }"},
	"strlist": {`"a,b,c"`, `"a, b;c d"`, `"1,2,3"`, `"1, 2.5, 3"`, `""`, `"x"`, `"1,,2"`, `" 4 ; 5 "`, `"a b"`, "sl", "nl", "il", `"1,a"`, `"-1,2"`, `"9223372036854775807,1"`},
	"delim":   {`","`, `";"`, `" "`, `", "`, `",;"`, `""`, `"b"`},
	"version": {`"1.2.3"`, `"8.10"`, `"8.9"`, `"1.2"`, `"1.2.3a"`, `"abc"`, `""`, "ver", `"10"`, `"1.02"`},
	"time":    {"0", "1700000000", "-1", "1e10", "1.5", `"2024-01-02T03:04:05"`, `"x"`, "absTime(0)", "undefined"},
	"tfmt":    {`"%c"`, `"%Y-%m-%d %H:%M:%S"`, `"%C %U %W"`, `"%a %b %e %j"`, `"%s"`, `"%%"`, `"%y %D %T %R"`, `"%p %I %l"`, `""`, `"%Z"`, `"%u %w %V %G"`, `"%x %X"`, `"%n%t"`},
	"env":     {`"A=1 B=two"`, `"A=1;B=2"`, `"A=\"x y\""`, `"A='x y' B=2"`, `"A=1"`, `""`, `"A"`, `"A=1 B=2 A=3"`, `"PATH=/bin:/usr/bin"`, "env", `"A=a\\ b"`, `"A=x;B=y z"`, `"A=1\nB=2"`},
	"num":     {"0", "1", "-1", "2", "3", "10", "-2", "0.5", "-0.5", "2.5", "-2.5", "1e308", "9223372036854775807", "-9223372036854775808", `real("INF")`, `real("-INF")`, `real("NaN")`, "0.1"},
	"name":    {`"user@host"`, `"slot1@host"`, `"slot1_2@host"`, `"user"`, `"@host"`, `""`, `"a@b@c"`},
}

func (g *compatGen) edge(kind string) string {
	if g.r.IntN(6) == 0 {
		return g.typed()
	}
	return g.pick(compatEdgeArgs[kind])
}

// argKinds gives the kind of each parameter of a function.
func argKinds(name string) []string {
	switch strings.ToLower(name) {
	case "regexp", "regexpmember":
		return []string{"regexp", "any", "opts"}
	case "regexps", "replace", "replaceall":
		return []string{"regexp", "any", "subst", "opts"}
	case "anycompare", "allcompare":
		return []string{"cmpop", "list", "any"}
	case "sum", "avg", "min", "max", "member", "identicalmember":
		return []string{"list", "any"}
	case "stringlistsize", "stringlistsum", "stringlistavg", "stringlistmin", "stringlistmax":
		return []string{"strlist", "delim"}
	case "stringlistmember", "stringlistimember":
		return []string{"any", "strlist", "delim"}
	case "stringlistsintersect", "stringlistsubsetmatch", "stringlistisubsetmatch":
		return []string{"strlist", "strlist", "delim"}
	case "stringlistregexpmember":
		return []string{"regexp", "strlist", "delim", "opts"}
	case "split":
		return []string{"strlist", "delim"}
	case "join":
		return []string{"delim", "list", "any"}
	case "versioncmp", "versiongt", "versionge", "versionlt", "versionle", "versioneq", "version_in_range":
		return []string{"version", "version", "version"}
	case "abstime", "formattime", "interval":
		return []string{"time", "tfmt"}
	case "reltime":
		return []string{"time"}
	case "envv1tov2", "mergeenvironment":
		return []string{"env", "env", "env"}
	case "pow", "quantize", "floor", "ceiling", "round", "int", "real":
		return []string{"num", "num"}
	case "splitusername", "splitslotname":
		return []string{"name"}
	case "evalineachcontext", "countmatches":
		return []string{"ctxexpr", "list"}
	case "unparse", "eval":
		return []string{"ref"}
	}
	return nil
}

func (g *compatGen) builtin() (string, string) {
	name := g.pick(compatBuiltinNames)
	ars := compatBuiltins[name]
	n := ars[g.r.IntN(len(ars))]
	kinds := argKinds(name)
	args := make([]string, n)
	for i := range args {
		k := "any"
		if i < len(kinds) {
			k = kinds[i]
		}
		switch k {
		case "any":
			if g.r.IntN(4) == 0 {
				args[i] = g.expr(1)
			} else {
				args[i] = g.typed()
			}
		case "ctxexpr":
			args[i] = g.pick([]string{"a", "a * 2", "v", "a > 1", "missing", "MY.a", "TARGET.a", `"s"`})
		case "ref":
			args[i] = g.pick([]string{"a", "r", "w", "le", "n", "l", "t", "cyc", "missing", "[ b = 1; a = 2 ]", "{ 1, 2 }", "a + 1", `"a + 1"`, "TARGET.f", "ads", "n.k"})
		default:
			args[i] = g.edge(k)
		}
	}
	return "builtin/" + name, name + "(" + strings.Join(args, ", ") + ")"
}

func (g *compatGen) scoping() (string, string) {
	return "scoping", g.pick([]string{
		"MY", "TARGET", "PARENT", ".SELF", "SELF", "MY.MY.a", "TARGET.MY.a", "MY.TARGET.a", "n.MY.a", "n.TARGET.a", "n.PARENT.a", "n.k.PARENT.p",
		"n.k.PARENT.PARENT.a", "n.SELF.p", "n.k.o", "n.pa", "TARGET.f", "TARGET.g", "TARGET.h", "t", "w", "r", ".a", ".n.p", "n.MY.p", "n.k.MY.m",
		"[ x = a ].x", "[ x = 1; y = x + a ].y", "[ x = [ y = z ]; z = 4 ].x.y", "[ a = 5; x = [ y = a ] ].x.y", "[ x = missing ].x", "[ x = TARGET.a ].x",
		"[ x = MY.a ].x", "[ x = PARENT.a ].x", "[ x = .a ].x", "[ x = { a, b } ].x", "[ x = [ y = { a } ] ].x.y", "{ a, [ q = a ].q }", "n[\"p\"]", "n[\"PA\"]",
		"cyc", "cy1", "cy2", "[ c = c ].c", "[ x = y; y = x ].x", "TARGET.lt", "TARGET.lt[1]", "le[1]", "le[2]", "MY.le", "TARGET.MY.a", "TARGET.TARGET.a",
		"PARENT.a", "MY.PARENT", "n.PARENT", "n.k.PARENT", "SELF.a", ".SELF.a", ".MY", ".TARGET.a", "n.k.m + n.p", "ads[0].v", "ads.v", "ads.a", "TARGET.n.p",
		"[ a = 1 ].TARGET", "[ a = 1 ].MY.a", "[ a = 1; b = [ c = a ] ].b.c", "[ a = 1; b = [ c = PARENT.a ] ].b.c", "[ a = 1; b = [ a = 2; c = a ] ].b.c",
		"Memory", "TARGET.Memory", "MY.Memory", "memory", "ifThenElse(a > 1, TARGET.a, MY.a)", "eval(\"a + TARGET.a\")", "eval(\"n.k.m\")", "n.k",
	})
}

func (g *compatGen) record() (string, string) {
	attrs := []string{"b = 1", "a = 2", "C = \"x\"", "z = { 1, 2 }", "m = [ y = 1; x = 2 ]", "Q = a + 1", "aa = true", "B2 = 2.5", "k = undefined", "'odd name' = 3", "_u = \"é\""}
	g.r.Shuffle(len(attrs), func(i, j int) { attrs[i], attrs[j] = attrs[j], attrs[i] })
	ad := "[ " + strings.Join(attrs[:1+g.r.IntN(len(attrs))], "; ") + " ]"
	switch g.r.IntN(6) {
	case 0, 1:
		return "record/print", ad
	case 2:
		return "record/select", ad + "." + g.pick([]string{"a", "b", "c", "Q", "m", "m.x", "z", "missing", "k", "B2"})
	case 3:
		return "record/index", ad + "[" + g.pick([]string{`"a"`, `"A"`, `"Q"`, `"missing"`, "1", "undefined"}) + "]"
	case 4:
		return "record/function", g.pick([]string{"size", "isClassAd", "string", "strcat", "unparse", "eval", "isList"}) + "(" + ad + ")"
	}
	return "record/compare", ad + " " + g.pick([]string{"==", "=?=", "=!=", "is", "!="}) + " " + g.pick([]string{ad, "[]", "undefined", "1"})
}

func (g *compatGen) list() (string, string) {
	elems := []string{"1", "i", "i + 1", "a", "TARGET.ti", `"x"`, "2.5", "undefined", "{ 1 }", "[ q = 1 ]", "error", "b", "-1", "MY.a", `"é"`, "1 + 2", "(3)"}
	g.r.Shuffle(len(elems), func(i, j int) { elems[i], elems[j] = elems[j], elems[i] })
	l := "{ " + strings.Join(elems[:g.r.IntN(6)], ", ") + " }"
	if g.r.IntN(3) == 0 {
		l = g.pick([]string{"le", "l", "TARGET.l", "TARGET.lt", "ads", "n.r"})
	}
	switch g.r.IntN(7) {
	case 0, 1:
		return "list/print", l
	case 2:
		return "list/index", l + "[" + g.pick([]string{"0", "1", "2", "-1", "10", `"a"`, "1.5", "undefined", "4294967296"}) + "]"
	case 3:
		return "list/string", g.pick([]string{"string", "strcat", "toUpper", "unparse"}) + "(" + l + ")"
	case 4:
		return "list/aggregate", g.pick([]string{"sum", "avg", "min", "max", "size", "isList"}) + "(" + l + ")"
	case 5:
		return "list/member", g.pick([]string{"member", "identicalMember"}) + "(" + g.typed() + ", " + l + ")"
	}
	return "list/compare", l + " " + g.pick([]string{"==", "=?=", "=!=", "is", "!=", "+"}) + " " + g.pick([]string{l, "{}", "{ 1 }", "undefined"})
}

func (g *compatGen) unicode() (string, string) {
	s := g.pick(compatUnicode)
	switch g.r.IntN(8) {
	case 0:
		return "unicode/print", s
	case 1:
		return "unicode/function", g.pick([]string{"size", "toUpper", "toLower", "string", "strcat", "isString", "split", "stringListSize"}) + "(" + s + ")"
	case 2:
		return "unicode/function", "substr(" + s + ", " + g.pick([]string{"0", "1", "2", "-1", "-2"}) + ", " + g.pick([]string{"1", "2", "3", "-1"}) + ")"
	case 3:
		return "unicode/compare", s + " " + g.pick([]string{"==", "<", ">", "=?=", "!="}) + " " + g.pick(compatUnicode)
	case 4:
		return "unicode/regexp", "regexp(" + g.pick([]string{`"é"`, `"."`, `"^.$"`, `"..."`, `"É"`, `"ö+"`, `"[é]"`, `"\\w+"`, `"日"`}) + ", " + s + ", " + g.pick([]string{`""`, `"i"`}) + ")"
	case 5:
		return "unicode/function", "strcmp(" + s + ", " + g.pick(compatUnicode) + ")"
	case 6:
		return "unicode/attribute", g.pick([]string{"un", "size(un)", "toUpper(un)", "split(un)", "substr(un, 1, 3)", "stringListMember(\"ö\", \"ä,ö\")"})
	}
	return "unicode/function", "stricmp(" + s + ", " + g.pick(compatUnicode) + ")"
}

func (g *compatGen) mixed() (string, string) { return "mixed", g.expr(1 + g.r.IntN(3)) }

// expr returns a random expression tree of at most depth levels.
func (g *compatGen) expr(depth int) string {
	if depth <= 0 || g.r.IntN(4) == 0 {
		return g.typed()
	}
	switch k := g.r.IntN(20); {
	case k < 8:
		return g.expr(depth-1) + " " + g.pick(compatBinOps) + " " + g.expr(depth-1)
	case k < 10:
		return g.pick(compatUnOps) + "(" + g.expr(depth-1) + ")"
	case k < 15:
		name := g.pick([]string{"isUndefined", "isError", "isString", "isInteger", "int", "real", "string", "bool", "floor", "round", "strcat",
			"toUpper", "size", "ifThenElse", "sum", "member", "substr", "min", "max", "strcmp"})
		n := 1
		switch name {
		case "ifThenElse":
			n = 3
		case "member", "substr", "strcmp":
			n = 2
		case "strcat":
			n = 2
		}
		args := make([]string, n)
		for i := range args {
			args[i] = g.expr(depth - 1)
		}
		return name + "(" + strings.Join(args, ", ") + ")"
	case k < 16:
		return "(" + g.expr(depth-1) + " ? " + g.expr(depth-1) + " : " + g.expr(depth-1) + ")"
	case k < 17:
		return "(" + g.expr(depth-1) + " ?: " + g.expr(depth-1) + ")"
	case k < 18:
		return "{ " + g.expr(depth-1) + ", " + g.expr(depth-1) + " }"
	case k < 19:
		return "(" + g.expr(depth-1) + ")[" + g.expr(depth-1) + "]"
	}
	return "(" + g.expr(depth-1) + ")"
}

// TestCompatibilityThroughPondctl runs a sample of the corpus through the
// pondctl binary ("pondctl classad eval -quiet -file MY -target-file
// TARGET EXPR..."), many expressions per process, and checks that it
// prints what the harness above compared with HTCondor. Set POND_BIN to
// use a built binary; otherwise the test builds one.
func TestCompatibilityThroughPondctl(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds and runs pondctl")
	}
	bin := os.Getenv("POND_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "pondctl")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/pond-htc/pond/cmd/pondctl").CombinedOutput()
		if err != nil {
			t.Fatalf("build pondctl: %v\n%s", err, out)
		}
	}
	dir := t.TempDir()
	myFile, targetFile := filepath.Join(dir, "my.ad"), filepath.Join(dir, "target.ad")
	if err := os.WriteFile(myFile, []byte(compatMy+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(targetFile, []byte(compatTarget+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	my, err := classad.ParseNewAd(compatMy)
	if err != nil {
		t.Fatal(err)
	}
	target, err := classad.ParseNewAd(compatTarget)
	if err != nil {
		t.Fatal(err)
	}
	// Expressions as classad eval takes them: not ads, assignments or
	// options, and parsed by pond (a syntax error ends the command).
	groups := map[string][]compatCase{}
	for _, c := range generateCorpus(uint64(envInt("CLASSAD_COMPAT_SEED", 1)), envInt("CLASSAD_COMPAT_CMD_N", 3000)) {
		if kind, _, _, _, err := classify(c.expr); err != nil || kind != argExpr || isOption(c.expr) {
			continue
		}
		groups[c.ctxName()] = append(groups[c.ctxName()], c)
	}
	checked := 0
	for name, cases := range groups {
		for start := 0; start < len(cases); start += 250 {
			batch := cases[start:min(start+250, len(cases))]
			args := []string{"classad", "eval", "-quiet"}
			if batch[0].my != "" {
				args = append(args, "-file", myFile)
			}
			if batch[0].target != "" {
				args = append(args, "-target-file", targetFile)
			}
			for _, c := range batch {
				args = append(args, c.expr)
			}
			out, err := exec.Command(bin, args...).Output()
			if err != nil {
				t.Fatalf("pondctl classad eval (%s): %v", name, err)
			}
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(lines) != len(batch) {
				t.Fatalf("pondctl printed %d lines for %d expressions (%s)", len(lines), len(batch), name)
			}
			for i, c := range batch {
				var m, tg *classad.Ad
				if c.my != "" {
					m = my
				}
				if c.target != "" {
					tg = target
				}
				if want := pondEval(c.expr, m, tg); lines[i] != want {
					t.Errorf("%s [%s]: pondctl prints %s, the harness %s", c.expr, name, lines[i], want)
				}
				checked++
			}
		}
	}
	t.Logf("%d expressions through pondctl print as in the harness", checked)
}
