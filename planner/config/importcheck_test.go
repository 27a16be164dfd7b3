package config

import (
	"strings"
	"testing"
)

// TestImportCheckErrors checks that each wrong import or check block is an
// error at the place it is wrong (line and column), saying why.
func TestImportCheckErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		summary   string
		line, col int
	}{
		{"import missing id", "pool \"a\" {}\nimport {\n  to = pool.a\n}", "Missing required argument", 2, 8},
		{"import quoted to", "pool \"a\" {}\nimport {\n  to = \"pool.a\"\n  id = \"a\"\n}", "Invalid address", 3, 8},
		{"import data source", "import {\n  to = data.sea_query.a\n  id = \"a\"\n}", "Invalid address", 2, 8},
		{"import label", "import \"x\" {\n  to = pool.a\n  id = \"a\"\n}", "Extraneous label for import", 1, 8},
		{"import provider", "import {\n  to = pool.a\n  id = \"a\"\n  provider = provider.local\n}", "Unsupported argument", 4, 3},
		{"import each without for_each", "pool \"a\" {\n  for_each = {}\n}\nimport {\n  to = pool.a[each.key]\n  id = \"a\"\n}", `Reference to "each" in import block without for_each`, 5, 15},
		{"import refers to resource", "pool \"a\" {}\npool \"b\" {}\nimport {\n  to = pool.b\n  id = pool.a.id\n}", "Invalid reference in import block", 5, 8},
		{"import undeclared variable", "pool \"a\" {}\nimport {\n  to = pool.a\n  id = var.nope\n}", "Reference to undeclared input variable", 4, 8},
		{"import twice", "pool \"a\" {}\nimport {\n  to = pool.a\n  id = \"a\"\n}\nimport {\n  to = pool.a\n  id = \"b\"\n}", "Duplicate import configuration", 7, 8},
		{"check without name", "check {\n  assert {\n    condition = true\n    error_message = \"x\"\n  }\n}", "Missing name for check", 1, 1},
		{"check without assert", "check \"c\" {\n}", "Missing assert block", 1, 1},
		{"assert without message", "check \"c\" {\n  assert {\n    condition = true\n  }\n}", "Missing required argument", 2, 10},
		{"check twice", "check \"c\" {\n  assert {\n    condition = true\n    error_message = \"x\"\n  }\n}\ncheck \"c\" {\n  assert {\n    condition = true\n    error_message = \"x\"\n  }\n}", "Duplicate check block", 7, 1},
		{"check undeclared resource", "check \"c\" {\n  assert {\n    condition = pool.nope.nodes > 0\n    error_message = \"x\"\n  }\n}", "Reference to undeclared resource", 3, 17},
		{"check data count", "check \"c\" {\n  data \"sea_query\" \"q\" {\n    count = 2\n    requirements = \"true\"\n  }\n  assert {\n    condition = true\n    error_message = \"x\"\n  }\n}", "Unsupported argument in a check's data source", 3, 5},
		{"check data clashes", "data \"sea_query\" \"q\" {\n  requirements = \"true\"\n}\ncheck \"c\" {\n  data \"sea_query\" \"q\" {\n    requirements = \"true\"\n  }\n  assert {\n    condition = true\n    error_message = \"x\"\n  }\n}", "Duplicate data.sea_query.q configuration", 5, 3},
		{"scoped data used outside", "check \"c\" {\n  data \"sea_query\" \"q\" {\n    requirements = \"true\"\n  }\n  assert {\n    condition = true\n    error_message = \"x\"\n  }\n}\noutput \"o\" {\n  value = data.sea_query.q.matches\n}", "Reference to undeclared data source", 11, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := LoadFiles("", map[string][]byte{"main.pond.hcl": []byte(tt.src)}, LoadOptions{})
			if !diags.HasErrors() {
				diags = append(diags, cfg.Validate()...)
			}
			if !diags.HasErrors() {
				t.Fatalf("no error, want %q", tt.summary)
			}
			d := diags[0]
			if !strings.HasPrefix(d.Summary, tt.summary) {
				t.Fatalf("error %q (%s), want %q", d.Summary, d.Detail, tt.summary)
			}
			if d.Subject == nil || d.Subject.Filename != "main.pond.hcl" || d.Subject.Start.Line != tt.line || d.Subject.Start.Column != tt.col {
				t.Fatalf("error %q at %v, want main.pond.hcl:%d,%d", d.Summary, d.Subject, tt.line, tt.col)
			}
		})
	}
}

// TestImportCheckDecode checks what good import and check blocks decode
// to, in native syntax and JSON.
func TestImportCheckDecode(t *testing.T) {
	native := `
variable "m" {
  default = { a = "x" }
}
pool "p" {
  for_each = var.m
}
pool "q" {
  count = 2
}
import {
  for_each = var.m
  to       = pool.p[each.key]
  id       = each.value
}
import {
  to = pool.q[1]
  id = "q1"
}
check "c" {
  data "sea_query" "d" {
    requirements = "true"
  }
  assert {
    condition     = length(data.sea_query.d.matches) > 0
    error_message = "none"
  }
}
`
	json := `{
  "pool": {"q": {"count": 2}},
  "import": [{"to": "pool.q[1]", "id": "q1"}],
  "check": {"c": {"assert": [{"condition": "${true}", "error_message": "x"}]}}
}`
	for name, files := range map[string]map[string][]byte{
		"native": {"main.pond.hcl": []byte(native)},
		"json":   {"main.pond.json": []byte(json)},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, diags := LoadFiles("", files, LoadOptions{})
			if !diags.HasErrors() {
				diags = append(diags, cfg.Validate()...)
			}
			if diags.HasErrors() {
				t.Fatal(diagsString(diags))
			}
			if len(cfg.Checks) != 1 || cfg.Checks[0].Name != "c" || len(cfg.Checks[0].Asserts) != 1 {
				t.Fatalf("checks %+v", cfg.Checks)
			}
			last := cfg.Imports[len(cfg.Imports)-1]
			if last.To.String() != "pool.q" || last.ToKey == nil {
				t.Fatalf("import to %s, key %v", last.To, last.ToKey)
			}
			if k, _ := last.ToKey.Value(nil); !k.RawEquals(keyValue(1)) {
				t.Fatalf("import key %#v, want 1", k)
			}
			if name == "native" && (len(cfg.Imports) != 2 || cfg.Imports[0].ForEach == nil || len(cfg.Checks[0].Data) != 1) {
				t.Fatalf("imports %+v, check data %+v", cfg.Imports, cfg.Checks[0].Data)
			}
		})
	}
}

// importCheckSeeds are FuzzLoad's seeds of import and check blocks.
var importCheckSeeds = []string{
	"pool \"p\" {\n  for_each = { a = 1 }\n}\nimport {\n  for_each = { a = \"x\" }\n  to       = pool.p[each.key]\n  id       = each.value\n}\n",
	"import {\n  to = pool.q[1]\n  id = \"q1\"\n}\n",
	"check \"c\" {\n  data \"sea_query\" \"d\" {\n    requirements = \"true\"\n  }\n  assert {\n    condition     = length(data.sea_query.d.matches) > 0\n    error_message = \"none\"\n  }\n}\n",
}
