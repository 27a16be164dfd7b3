package funcs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/planner/marks"
)

func eval(t *testing.T, dir, src string) (cty.Value, hcl.Diagnostics) {
	t.Helper()
	expr, diags := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parsing %s: %s", src, diags.Error())
	}
	return expr.Value(&hcl.EvalContext{
		Functions: Functions(dir),
		Variables: map[string]cty.Value{
			"unknown": cty.UnknownVal(cty.String),
		},
	})
}

func TestFunctions(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"hello.txt":   "hello\n",
		"nodes.tmpl":  "%{ for n in nodes ~}\nnode ${n}\n%{ endfor ~}\nsite=${upper(site)}",
		"nested.tmpl": "${templatefile(\"hello.txt\", {})}",
		"bad.tmpl":    "${nope}",
		"binary.bin":  "\xff\xfe",
		"deep.tmpl":   "${" + strings.Repeat("(", 200_000),
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	tests := []struct {
		expr string
		want string // an expression for the expected value
		err  string // a substring of the expected error instead
	}{
		// Collections.
		{expr: `length([1, 2, 3])`, want: `3`},
		{expr: `length("héllo")`, want: `5`},
		{expr: `length({a = 1, b = 2})`, want: `2`},
		{expr: `length(tomap({a = 1}))`, want: `1`},
		{expr: `length(1)`, err: "must be a string, a collection type, or a structural type"},
		{expr: `concat([1], [2, 3])`, want: `[1, 2, 3]`},
		{expr: `merge({a = 1}, {b = 2}, {a = 3})`, want: `{a = 3, b = 2}`},
		{expr: `lookup({a = "x"}, "b", "d")`, want: `"d"`},
		{expr: `keys({b = 1, a = 2})`, want: `["a", "b"]`},
		{expr: `values({b = 1, a = 2})`, want: `[2, 1]`},
		{expr: `contains(["a", "b"], "b")`, want: `true`},
		{expr: `distinct([1, 2, 1])`, want: `[1, 2]`},
		{expr: `flatten([[1], [2, [3]]])`, want: `[1, 2, 3]`},
		{expr: `element(["a", "b"], 3)`, want: `"b"`},
		{expr: `range(3)`, want: `[0, 1, 2]`},
		{expr: `reverse([1, 2])`, want: `[2, 1]`},
		{expr: `slice(["a", "b", "c"], 1, 3)`, want: `["b", "c"]`},
		{expr: `sort(["b", "a"])`, want: `["a", "b"]`},
		{expr: `zipmap(["a", "b"], [1, 2])`, want: `{a = 1, b = 2}`},
		{expr: `coalesce("", "x")`, want: `"x"`},
		{expr: `coalesce(null, 1, 2)`, want: `1`},
		{expr: `coalesce(1, "a")`, want: `"1"`},
		{expr: `coalesce(null, "")`, err: "no non-null, non-empty-string arguments"},
		{expr: `coalescelist([], [1])`, want: `[1]`},
		{expr: `compact(["a", "", "b"])`, want: `["a", "b"]`},
		{expr: `chunklist([1, 2, 3], 2)`, want: `[[1, 2], [3]]`},
		{expr: `setunion(["a"], ["b"])`, want: `toset(["a", "b"])`},
		{expr: `setintersection(["a", "b"], ["b"])`, want: `toset(["b"])`},
		{expr: `setsubtract(["a", "b"], ["b"])`, want: `toset(["a"])`},
		{expr: `length(setproduct(["a", "b"], [1, 2]))`, want: `4`},
		{expr: `index(["a", "b", "c"], "b")`, want: `1`},
		{expr: `index(["a"], "z")`, err: "item not found"},
		{expr: `one([])`, want: `null`},
		{expr: `one(["x"])`, want: `"x"`},
		{expr: `one([1, 2])`, err: "zero or one elements"},
		{expr: `alltrue([true, true])`, want: `true`},
		{expr: `alltrue([])`, want: `true`},
		{expr: `alltrue([true, false])`, want: `false`},
		{expr: `anytrue([false, true])`, want: `true`},
		{expr: `anytrue([])`, want: `false`},
		{expr: `sum([1, 2, 3.5])`, want: `6.5`},
		{expr: `sum(toset([1, 2]))`, want: `3`},
		{expr: `sum([])`, err: "empty"},
		{expr: `sum(["a"])`, err: "number"},
		{expr: `min(3, 1, 2)`, want: `1`},
		{expr: `max(3, 1, 2)`, want: `3`},
		// Conversions.
		{expr: `tostring(1)`, want: `"1"`},
		{expr: `tonumber("2")`, want: `2`},
		{expr: `tobool("true")`, want: `true`},
		{expr: `tolist(["a"])`, want: `tolist(["a"])`},
		{expr: `toset(["a", "a"])`, want: `toset(["a"])`},
		{expr: `tomap({a = "b"})`, want: `tomap({a = "b"})`},
		{expr: `tonumber("x")`, err: "cannot convert"},
		// Strings.
		{expr: `format("%s-%03d", "n", 7)`, want: `"n-007"`},
		{expr: `formatlist("n%d", [1, 2])`, want: `["n1", "n2"]`},
		{expr: `join(",", ["a", "b"])`, want: `"a,b"`},
		{expr: `split(",", "a,b")`, want: `["a", "b"]`},
		{expr: `upper("a")`, want: `"A"`},
		{expr: `lower("A")`, want: `"a"`},
		{expr: `title("hello world")`, want: `"Hello World"`},
		{expr: `trimspace("  a ")`, want: `"a"`},
		{expr: `trim("xax", "x")`, want: `"a"`},
		{expr: `trimprefix("pool-a", "pool-")`, want: `"a"`},
		{expr: `trimsuffix("a.pond.hcl", ".pond.hcl")`, want: `"a"`},
		{expr: `replace("a-b-c", "-", "+")`, want: `"a+b+c"`},
		{expr: `replace("node12", "/([a-z]+)(\\d+)/", "$2$1")`, want: `"12node"`},
		{expr: `replace("x", "/(/", "")`, err: "invalid regular expression"},
		{expr: `regex("[0-9]+", "node42")`, want: `"42"`},
		{expr: `regexall("[0-9]", "a1b2")`, want: `["1", "2"]`},
		{expr: `substr("hello", 1, 3)`, want: `"ell"`},
		{expr: `strrev("abc")`, want: `"cba"`},
		{expr: `indent(2, "a\nb")`, want: `"a\n  b"`},
		{expr: `chomp("a\n")`, want: `"a"`},
		{expr: `startswith("pool-a", "pool")`, want: `true`},
		{expr: `endswith("pool-a", "b")`, want: `false`},
		{expr: `strcontains("pool-a", "l-a")`, want: `true`},
		{expr: `urlencode("a b&c")`, want: `"a+b%26c"`},
		// Numbers.
		{expr: `abs(-2)`, want: `2`},
		{expr: `ceil(1.2)`, want: `2`},
		{expr: `floor(1.8)`, want: `1`},
		{expr: `log(8, 2)`, want: `3`},
		{expr: `pow(2, 10)`, want: `1024`},
		{expr: `signum(-3)`, want: `-1`},
		{expr: `parseint("ff", 16)`, want: `255`},
		// Encodings and hashes.
		{expr: `jsonencode({a = [1, "b"]})`, want: `"{\"a\":[1,\"b\"]}"`},
		{expr: `jsondecode("{\"a\":1}").a`, want: `1`},
		{expr: `csvdecode("a,b\n1,2\n")`, want: `[{a = "1", b = "2"}]`},
		{expr: `base64encode("pond")`, want: `"cG9uZA=="`},
		{expr: `base64decode("cG9uZA==")`, want: `"pond"`},
		{expr: `base64decode("!!")`, err: "failed to decode base64"},
		{expr: `base64decode("//4=")`, err: "not valid UTF-8"},
		{expr: `md5("")`, want: `"d41d8cd98f00b204e9800998ecf8427e"`},
		{expr: `sha1("abc")`, want: `"a9993e364706816aba3e25717850c26c9cd0d89d"`},
		{expr: `sha256("abc")`, want: `"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"`},
		{expr: `md5("abc")`, want: `"900150983cd24fb0d6963f7d28e17f72"`},
		{expr: `length(sha512("abc"))`, want: `128`},
		{expr: `base64sha256("abc")`, want: `"ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="`},
		{expr: `length(base64sha512("abc"))`, want: `88`},
		{expr: `nonsensitive(sensitive({a = 1}))`, want: `{a = 1}`},
		{expr: `nonsensitive(null)`, want: `null`},
		// try and can.
		{expr: `try(tonumber("x"), 5)`, want: `5`},
		{expr: `can(tonumber("x"))`, want: `false`},
		{expr: `can(tonumber("1"))`, want: `true`},
		// Time.
		{expr: `formatdate("YYYY-MM-DD", "2024-02-03T04:05:06Z")`, want: `"2024-02-03"`},
		{expr: `timeadd("2024-01-01T00:00:00Z", "90m")`, want: `"2024-01-01T01:30:00Z"`},
		{expr: `can(formatdate("YYYY", timestamp()))`, want: `true`},
		// Files and paths.
		{expr: `file("hello.txt")`, want: `"hello\n"`},
		{expr: `file("` + filepath.Join(dir, "hello.txt") + `")`, want: `"hello\n"`},
		{expr: `file("missing.txt")`, err: "no file exists at"},
		{expr: `file("binary.bin")`, err: "not valid UTF-8"},
		{expr: `filebase64("binary.bin")`, want: `"//4="`},
		{expr: `fileexists("hello.txt")`, want: `true`},
		{expr: `filemd5("hello.txt")`, want: `md5("hello\n")`},
		{expr: `filesha256("hello.txt")`, want: `sha256("hello\n")`},
		{expr: `filemd5("missing.txt")`, err: "no file exists"},
		{expr: `fileexists("nope.txt")`, want: `false`},
		{expr: `fileexists("sub")`, err: "is a directory"},
		{expr: `templatefile("nodes.tmpl", {nodes = ["a", "b"], site = "x"})`, want: `"node a\nnode b\nsite=X"`},
		{expr: `templatefile("bad.tmpl", {})`, err: `vars map does not contain key "nope"`},
		{expr: `templatefile("nested.tmpl", {})`, err: "cannot recursively call templatefile"},
		{expr: `templatefile("nodes.tmpl", "x")`, err: "must be an object or a map"},
		{expr: `templatefile("deep.tmpl", {})`, err: "template deep.tmpl:1,130: nested more than 128 levels deep"},
		{expr: `templatefile("nodes.tmpl", {"a b" = 1})`, err: "invalid template variable name"},
		{expr: `basename("/a/b/c.txt")`, want: `"c.txt"`},
		{expr: `dirname("/a/b/c.txt")`, want: `"/a/b"`},
		{expr: `pathexpand("~/x")`, want: `"` + filepath.Join(home, "x") + `"`},
		{expr: `pathexpand("/x")`, want: `"/x"`},
		{expr: `abspath("x")`, want: `"` + filepath.Join(cwd, "x") + `"`},
		// Unknown arguments give unknown results rather than errors.
		{expr: `upper(unknown)`, want: `unknown`},
		{expr: `file(unknown)`, want: `unknown`},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			got, diags := eval(t, dir, tc.expr)
			if tc.err != "" {
				if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.err) {
					t.Fatalf("got %#v, %v; want error containing %q", got, diags, tc.err)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatalf("error: %s", diags.Error())
			}
			want, diags := eval(t, dir, tc.want)
			if diags.HasErrors() {
				t.Fatalf("want expression: %s", diags.Error())
			}
			if !got.IsKnown() || !want.IsKnown() {
				if got.IsKnown() != want.IsKnown() || !got.Type().Equals(want.Type()) {
					t.Errorf("got %#v, want %#v", got, want)
				}
				return
			}
			// Literal lists are tuples: compare in the result's type.
			if conv, err := convert.Convert(want, got.Type()); err == nil {
				want = conv
			}
			if !got.RawEquals(want) {
				t.Errorf("got %#v, want %#v", got, want)
			}
		})
	}
}

func TestTimestampAndUUID(t *testing.T) {
	fs := Functions(t.TempDir())
	ts, err := fs["timestamp"].Call(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(ts.AsString()) {
		t.Errorf("timestamp() = %q", ts.AsString())
	}
	a, _ := fs["uuid"].Call(nil)
	b, _ := fs["uuid"].Call(nil)
	if len(a.AsString()) != 36 || a.AsString() == b.AsString() {
		t.Errorf("uuid() gave %q then %q", a.AsString(), b.AsString())
	}
}

func TestFunctionsDocumented(t *testing.T) {
	for name, f := range Functions(".") {
		if name == "can" || name == "try" {
			continue
		}
		if f.Description() == "" {
			t.Errorf("%s has no description", name)
		}
	}
}

// TestSensitiveMarks checks that sensitive marks its result and what is
// computed from it, and that nonsensitive takes the mark off.
func TestSensitiveMarks(t *testing.T) {
	for _, tc := range []struct {
		expr      string
		sensitive bool
	}{
		{`sensitive("s3cret")`, true},
		{`upper(sensitive("s3cret"))`, true},
		{`"x-${sensitive("s3cret")}"`, true},
		{`length(sensitive("s3cret"))`, true},
		{`nonsensitive(length(sensitive("s3cret")))`, false},
		{`{ a = sensitive("s3cret") }`, true},
		{`"plain"`, false},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			v, diags := eval(t, t.TempDir(), tc.expr)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if got := marks.Has(v); got != tc.sensitive {
				t.Errorf("%s: sensitive %v, want %v", tc.expr, got, tc.sensitive)
			}
		})
	}
}
