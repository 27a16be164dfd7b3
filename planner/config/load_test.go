package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// writeDir writes files into a fresh temporary directory.
func writeDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// diagPos renders a diagnostic's subject as BASENAME:LINE:COL.
func diagPos(d *hcl.Diagnostic) string {
	if d.Subject == nil {
		return "-"
	}
	return fmt.Sprintf("%s:%d:%d", filepath.Base(d.Subject.Filename), d.Subject.Start.Line, d.Subject.Start.Column)
}

func diagsString(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "  %s %q: %s\n", diagPos(d), d.Summary, d.Detail)
	}
	return b.String()
}

// malformed is one configuration that must be rejected with an error whose
// summary and position are given.
type malformed struct {
	name    string
	files   map[string]string
	summary string
	pos     string
	detail  string // substring of the detail, optional
}

func hclOnly(src string) map[string]string { return map[string]string{"main.pond.hcl": src} }

var malformedConfigs = []malformed{
	{"unknown block type", hclOnly("poool \"x\" {}\n"), "Unsupported block type", "main.pond.hcl:1:1", `Did you mean "pool"?`},
	{"top-level argument", hclOnly("workers = 4\n"), "Unsupported argument", "main.pond.hcl:1:1", `"workers"`},
	{"variable without name", hclOnly("variable {}\n"), "Missing name for variable", "main.pond.hcl:1:1", ""},
	{"variable with two labels", hclOnly("variable \"a\" \"b\" {}\n"), "Extraneous label for variable", "main.pond.hcl:1:14", ""},
	{"invalid variable name", hclOnly("variable \"1a\" {}\n"), "Invalid variable name", "main.pond.hcl:1:10", `"1a"`},
	{"duplicate variable across files", map[string]string{
		"a.pond.hcl": "variable \"w\" {}\n",
		"b.pond.hcl": "\n\nvariable \"w\" {}\n",
	}, "Duplicate variable declaration", "b.pond.hcl:3:1", "a.pond.hcl:1:1"},
	{"unknown variable argument", hclOnly("variable \"a\" {\n  typo = 1\n}\n"), "Unsupported argument", "main.pond.hcl:2:3", ""},
	{"bad type keyword", hclOnly("variable \"a\" {\n  type = strin\n}\n"), "Invalid type specification", "main.pond.hcl:2:10", ""},
	{"default of wrong type", hclOnly("variable \"a\" {\n  type    = number\n  default = \"many\"\n}\n"), "Invalid default value for variable", "main.pond.hcl:3:13", "number"},
	{"null default when not nullable", hclOnly("variable \"a\" {\n  nullable = false\n  default  = null\n}\n"), "Invalid default value for variable", "main.pond.hcl:3:14", "nullable"},
	{"default uses a variable", hclOnly("variable \"a\" {\n  default = var.b\n}\n"), "Variables not allowed", "main.pond.hcl:2:13", ""},
	{"validation without error_message", hclOnly("variable \"a\" {\n  validation {\n    condition = var.a > 1\n  }\n}\n"), "Missing required argument", "main.pond.hcl:2:14", "error_message"},
	{"sensitive not a bool", hclOnly("variable \"a\" {\n  sensitive = \"maybe\"\n}\n"), "Incorrect attribute value type", "main.pond.hcl:2:15", "bool"},
	{"duplicate local", hclOnly("locals {\n  a = 1\n}\nlocals {\n  a = 2\n}\n"), "Duplicate local value definition", "main.pond.hcl:5:3", "main.pond.hcl:2:3"},
	{"invalid provider alias", hclOnly("provider \"local\" {\n  alias = \"1x\"\n}\n"), "Invalid provider alias", "main.pond.hcl:2:11", ""},
	{"duplicate provider", hclOnly("provider \"local\" {}\nprovider \"local\" {}\n"), "Duplicate provider configuration", "main.pond.hcl:2:1", "main.pond.hcl:1:1"},
	{"output without value", hclOnly("output \"o\" {\n  description = \"x\"\n}\n"), "Missing required argument", "main.pond.hcl:1:12", `"value"`},
	{"output unknown argument", hclOnly("output \"o\" {\n  value = 1\n  sensitiv = true\n}\n"), "Unsupported argument", "main.pond.hcl:3:3", `Did you mean "sensitive"?`},
	{"duplicate output", hclOnly("output \"o\" { value = 1 }\noutput \"o\" { value = 2 }\n"), "Duplicate output definition", "main.pond.hcl:2:1", ""},
	{"unknown data source type", hclOnly("data \"sea_querry\" \"x\" {}\n"), "Unsupported data source type", "main.pond.hcl:1:6", `Did you mean "sea_query"?`},
	{"data without name", hclOnly("data \"sea_query\" {}\n"), "Missing name for data", "main.pond.hcl:1:1", ""},
	{"invalid data source name", hclOnly("data \"sea_query\" \"a.b\" {}\n"), "Invalid data source name", "main.pond.hcl:1:18", ""},
	{"resource without name", hclOnly("pool {}\n"), "Missing name for pool", "main.pond.hcl:1:1", ""},
	{"invalid resource name", hclOnly("pool \"a b\" {}\n"), "Invalid resource name", "main.pond.hcl:1:6", ""},
	{"duplicate resource across files", map[string]string{
		"a.pond.hcl": "pool \"campus\" {}\n",
		"b.pond.hcl": "# second\npool \"campus\" {}\n",
	}, "Duplicate pool.campus configuration", "b.pond.hcl:2:1", "a.pond.hcl:1:1"},
	{"count and for_each", hclOnly("pool \"a\" {\n  count    = 2\n  for_each = {}\n}\n"), `Invalid combination of "count" and "for_each"`, "main.pond.hcl:3:3", ""},
	{"depends_on not a list", hclOnly("pool \"a\" {\n  depends_on = pool.b\n}\n"), "Invalid depends_on", "main.pond.hcl:2:16", ""},
	{"depends_on a variable", hclOnly("pool \"a\" {\n  depends_on = [var.x]\n}\n"), "Invalid depends_on reference", "main.pond.hcl:2:17", "var.x"},
	{"depends_on a function call", hclOnly("pool \"a\" {\n  depends_on = [tolist(pool.b)]\n}\n"), "Invalid depends_on reference", "main.pond.hcl:2:17", ""},
	{"depends_on bare type", hclOnly("pool \"a\" {\n  depends_on = [pool]\n}\n"), "Invalid reference", "main.pond.hcl:2:17", ""},
	{"provider as a string", hclOnly("pool \"a\" {\n  provider = \"local\"\n}\n"), "Invalid provider reference", "main.pond.hcl:2:14", ""},
	{"provider without prefix", hclOnly("pool \"a\" {\n  provider = local.x\n}\n"), "Invalid provider reference", "main.pond.hcl:2:14", ""},
	{"provider too long", hclOnly("pool \"a\" {\n  provider = provider.local.a.b\n}\n"), "Invalid provider reference", "main.pond.hcl:2:14", ""},
	{"lifecycle bool from a variable", hclOnly("pool \"a\" {\n  lifecycle {\n    prevent_destroy = var.x\n  }\n}\n"), "Variables not allowed", "main.pond.hcl:3:23", ""},
	{"lifecycle bool a string", hclOnly("pool \"a\" {\n  lifecycle {\n    create_before_destroy = \"yes\"\n  }\n}\n"), "Incorrect attribute value type", "main.pond.hcl:3:29", ""},
	{"ignore_changes a string", hclOnly("pool \"a\" {\n  lifecycle {\n    ignore_changes = \"nodes\"\n  }\n}\n"), "Invalid ignore_changes", "main.pond.hcl:3:22", ""},
	{"ignore_changes element an expression", hclOnly("pool \"a\" {\n  lifecycle {\n    ignore_changes = [nodes, 1 + 1]\n  }\n}\n"), "Invalid ignore_changes", "main.pond.hcl:3:30", ""},
	{"lifecycle unknown argument", hclOnly("pool \"a\" {\n  lifecycle {\n    prevent_destroi = true\n  }\n}\n"), "Unsupported argument", "main.pond.hcl:3:5", `Did you mean "prevent_destroy"?`},
	{"duplicate lifecycle", hclOnly("pool \"a\" {\n  lifecycle {}\n  lifecycle {}\n}\n"), "Duplicate lifecycle block", "main.pond.hcl:3:3", ""},
	{"lifecycle in data", hclOnly("data \"sea_query\" \"q\" {\n  lifecycle {}\n}\n"), "Unsupported lifecycle block", "main.pond.hcl:2:3", ""},
	{"duplicate pond block", map[string]string{
		"a.pond.hcl": "pond {}\n",
		"b.pond.hcl": "pond {\n}\n",
	}, "Duplicate pond block", "b.pond.hcl:1:1", "a.pond.hcl:1:1"},
	{"duplicate backend", hclOnly("pond {\n  backend \"local\" {}\n  backend \"s3\" {}\n}\n"), "Duplicate backend block", "main.pond.hcl:3:3", "main.pond.hcl:2:3"},
	{"backend without type", hclOnly("pond {\n  backend {}\n}\n"), "Missing type for backend", "main.pond.hcl:2:11", ""},
	{"sea without address", hclOnly("pond {\n  sea {}\n}\n"), "Missing required argument", "main.pond.hcl:2:7", `"address"`},
	{"unknown block in pond", hclOnly("pond {\n  state {}\n}\n"), "Unsupported block type", "main.pond.hcl:2:3", ""},
	{"unclosed block", hclOnly("pool \"a\" {\n  nodes = 1\n"), "Unclosed configuration block", "main.pond.hcl:1:10", ""},
	{"semicolon separators with an error", hclOnly("variable \"workers\" { type = number; default = \"x\"; nullable = true }\n"), "Invalid default value for variable", "main.pond.hcl:1:47", ""},
	{"semicolon in an expression", hclOnly("locals {\n  a = 1 + ; 2\n}\n"), "Invalid character", "main.pond.hcl:2:11", "Use newlines"},
	{"missing equals", hclOnly("pool \"a\" {\n  nodes 1\n}\n"), "Argument or block definition required", "main.pond.hcl:2:3", ""},
	{"json syntax error", map[string]string{"main.pond.json": "{\"pool\": {\"a\": {}}\n"}, "Unclosed object", "main.pond.json:1:1", ""},
	{"json unknown top-level property", map[string]string{"main.pond.json": "{\n  \"pools\": {\"a\": {}}\n}\n"}, "Extraneous JSON object property", "main.pond.json:2:3", ""},
	{"json bad variable type", map[string]string{"main.pond.json": "{\n  \"variable\": {\"a\": {\"type\": \"lsit(string)\"}}\n}\n"}, "Invalid type specification", "main.pond.json:2:30", ""},
	{"json invalid local name", map[string]string{"main.pond.json": "{\n  \"locals\": {\"a b\": 1}\n}\n"}, "Invalid local value name", "main.pond.json:2:14", ""},
	{"json bad provider ref", map[string]string{"main.pond.json": "{\n  \"pool\": {\"a\": {\"provider\": \"local\"}}\n}\n"}, "Invalid provider reference", "main.pond.json:2:30", ""},
}

func TestLoadMalformed(t *testing.T) {
	if len(malformedConfigs) < 30 {
		t.Fatalf("only %d malformed configurations", len(malformedConfigs))
	}
	for _, tc := range malformedConfigs {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, tc.files)
			cfg, diags := LoadDir(dir, LoadOptions{})
			if cfg == nil {
				t.Fatal("LoadDir returned a nil config")
			}
			if !diags.HasErrors() {
				t.Fatalf("no error; diagnostics:\n%s", diagsString(diags))
			}
			d := diags.Errs()[0].(*hcl.Diagnostic)
			if d.Summary != tc.summary || diagPos(d) != tc.pos || !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("got first error\n  %s %q: %s\nwant\n  %s %q: ...%s...\nall:\n%s", diagPos(d), d.Summary, d.Detail, tc.pos, tc.summary, tc.detail, diagsString(diags))
			}
			// Every error must print without trouble.
			var b strings.Builder
			if err := WriteDiagnostics(&b, cfg.Files, diags, false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSnippetAfterInvalidUTF8 checks that the snippet of a diagnostic
// underlines the expression at fault when invalid UTF-8 comes before it on
// its line: hcl counts the overlong sequence \xc1\x84 as one column, while
// it prints as two characters.
func TestSnippetAfterInvalidUTF8(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"block", "pool \"p\" {\n  a = \"\xc1\x84\" + var.nope\n}\n",
			"  2:   a = \"\xc1\x84\" + var.nope\n                  ^^^^^^^^\n"},
		{"semicolons", "pool \"p\" { a = \"\xc1\x84\"; nodes = var.nope }\n",
			"  1: pool \"p\" { a = \"\xc1\x84\"; nodes = var.nope }\n                                  ^^^^^^^^\n"},
		{"line after", "# \xc1\x84\xff\npool \"p\" {\n  a = var.nope\n}\n",
			"  3:   a = var.nope\n           ^^^^^^^^\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"main.pond.hcl": tt.src})
			cfg, diags := LoadDir(dir, LoadOptions{})
			if diags.HasErrors() {
				t.Fatal(diagsString(diags))
			}
			for _, r := range cfg.Resources {
				_, d := ResourceReferences(r)
				diags = append(diags, d...)
			}
			diags = append(diags, cfg.Validate()...)
			var b strings.Builder
			if err := WriteDiagnostics(&b, cfg.Files, diags, false); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tt.want) {
				t.Fatalf("diagnostics:\n%s\nwant the snippet:\n%s", b.String(), tt.want)
			}
		})
	}
}
