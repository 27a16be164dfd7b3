package config

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		src       string
		subject   string
		kind      RefKind
		remaining string
		err       string
	}{
		{"var.workers", "var.workers", RefVar, "", ""},
		{"var.site.zones[0]", "var.site", RefVar, "zones[0]", ""},
		{"local.n", "local.n", RefLocal, "", ""},
		{"pool.campus", "pool.campus", RefResource, "", ""},
		{"pool.campus[0].members", "pool.campus", RefResource, "[0].members", ""},
		{"pond.burst[\"a\"]", "pond.burst", RefResource, "[\"a\"]", ""},
		{"data.sea_query.big.nodes", "data.sea_query.big", RefData, "nodes", ""},
		{"count.index", "count.index", RefCount, "", ""},
		{"each.key", "each.key", RefEach, "", ""},
		{"each.value.cpus", "each.value", RefEach, "cpus", ""},
		{"path.module", "path.module", RefPath, "", ""},
		{"path.cwd", "path.cwd", RefPath, "", ""},
		{"self.id", "self", RefSelf, "id", ""},
		{"var", "", 0, "", `"var" object cannot be used directly`},
		{"var[0]", "", 0, "", `"var" object cannot be used directly`},
		{"local", "", 0, "", "local value"},
		{"data.sea_query", "", 0, "", "type and name"},
		{"count.value", "", 0, "", `only the attribute "index"`},
		{"each.index", "", 0, "", `"key" and "value"`},
		{"path.home", "", 0, "", `"module", "root" and "cwd"`},
		{"pool", "", 0, "", "followed by the resource name"},
		{"pool[0]", "", 0, "", "followed by the resource name"},
		{"module.x", "", 0, "", "reserved"},
		{"provider.local", "", 0, "", "reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			tr, diags := hclsyntax.ParseTraversalAbs([]byte(tc.src), "t.hcl", hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			ref, diags := ParseRef(tr)
			if tc.err != "" {
				if !diags.HasErrors() || !strings.Contains(diags[0].Detail, tc.err) {
					t.Fatalf("got %v %v, want error containing %q", ref, diags, tc.err)
				}
				if diags[0].Subject == nil || diags[0].Subject.Start.Column != 1 {
					t.Errorf("error subject %v", diags[0].Subject)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if ref.Subject() != tc.subject || ref.Kind != tc.kind || traversalString(ref.Remaining) != tc.remaining {
				t.Errorf("got %s (%v) remaining %q, want %s (%v) remaining %q", ref.Subject(), ref.Kind, traversalString(ref.Remaining), tc.subject, tc.kind, tc.remaining)
			}
			if ref.SourceRange.End.Column != len(tc.src)+1 {
				t.Errorf("range %v does not cover the traversal", ref.SourceRange)
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		summary string
		pos     string
		detail  string
	}{
		{"undeclared variable", hclOnly("locals {\n  a = var.workrs\n}\nvariable \"workers\" {}\n"), "Reference to undeclared input variable", "main.pond.hcl:2:7", "Did you mean var.workers?"},
		{"undeclared local", hclOnly("output \"o\" {\n  value = local.x\n}\n"), "Reference to undeclared local value", "main.pond.hcl:2:11", `"x"`},
		{"undeclared resource", hclOnly("pool \"a\" {\n  nodes = pool.b.nodes\n}\n"), "Reference to undeclared resource", "main.pond.hcl:2:11", `"pool" "b"`},
		{"typo of var", hclOnly("variable \"x\" {}\npool \"a\" {\n  nodes = vr.x\n}\n"), "Reference to undeclared resource", "main.pond.hcl:3:11", "Did you mean var.x?"},
		{"undeclared data source", hclOnly("output \"o\" {\n  value = data.sea_query.q\n}\n"), "Reference to undeclared data source", "main.pond.hcl:2:11", ""},
		{"count without count", hclOnly("pool \"a\" {\n  nodes = count.index\n}\n"), `Reference to "count" in non-counted context`, "main.pond.hcl:2:11", ""},
		{"count in a local", hclOnly("locals {\n  i = count.index\n}\n"), `Reference to "count" in non-counted context`, "main.pond.hcl:2:7", ""},
		{"count in its own count", hclOnly("pool \"a\" {\n  count = count.index\n}\n"), `Reference to "count" in non-counted context`, "main.pond.hcl:2:11", ""},
		{"each without for_each", hclOnly("pool \"a\" {\n  count = 1\n  nodes = each.value\n}\n"), `Reference to "each" in context without for_each`, "main.pond.hcl:3:11", ""},
		{"each in an output", hclOnly("output \"o\" {\n  value = each.key\n}\n"), `Reference to "each" in context without for_each`, "main.pond.hcl:2:11", ""},
		{"self", hclOnly("pool \"a\" {\n  nodes = self.x\n}\n"), `Invalid "self" reference`, "main.pond.hcl:2:11", ""},
		{"self-referential", hclOnly("pool \"a\" {\n  nodes = pool.a.nodes\n}\n"), "Self-referential block", "main.pond.hcl:2:11", ""},
		{"depends_on undeclared", hclOnly("pool \"a\" {\n  depends_on = [pool.zz]\n}\n"), "Reference to undeclared resource", "main.pond.hcl:2:17", ""},
		{"output depends_on undeclared", hclOnly("output \"o\" {\n  value = 1\n  depends_on = [data.sea_query.x]\n}\n"), "Reference to undeclared data source", "main.pond.hcl:3:17", ""},
		{"for_each undeclared", hclOnly("pool \"a\" {\n  for_each = local.m\n}\n"), "Reference to undeclared local value", "main.pond.hcl:2:14", ""},
		{"nested block reference", hclOnly("pool \"a\" {\n  attrs {\n    x = var.nope\n  }\n}\n"), "Reference to undeclared input variable", "main.pond.hcl:3:9", ""},
		{"validation refers to another variable", hclOnly("variable \"a\" {\n  validation {\n    condition     = var.a > var.b\n    error_message = \"no\"\n  }\n}\nvariable \"b\" {}\n"), "Invalid reference in variable validation", "main.pond.hcl:3:29", "var.b"},
		{"validation without its variable", hclOnly("variable \"a\" {\n  validation {\n    condition     = true\n    error_message = \"no\"\n  }\n}\n"), "Invalid variable validation condition", "main.pond.hcl:3:21", "var.a"},
		{"validation message refers to a local", hclOnly("locals {\n  l = 1\n}\nvariable \"a\" {\n  validation {\n    condition     = var.a > 0\n    error_message = \"${local.l}\"\n  }\n}\n"), "Invalid reference in variable validation", "main.pond.hcl:7:24", ""},
		{"local self cycle", hclOnly("locals {\n  a = local.a + 1\n}\n"), "Cycle in local values", "main.pond.hcl:2:3", "local.a -> local.a"},
		{"local cycle of three", hclOnly("locals {\n  a = local.b\n  b = local.c\n  c = [local.a]\n  d = local.a\n}\n"), "Cycle in local values", "main.pond.hcl:2:3", "local.a -> local.b -> local.c -> local.a"},
		{"backend uses a variable", hclOnly("pond {\n  backend \"local\" {\n    path = var.p\n  }\n}\nvariable \"p\" {}\n"), "Variables not allowed", "main.pond.hcl:3:12", ""},
		{"provider uses an undeclared local", hclOnly("provider \"local\" {\n  root = local.r\n}\n"), "Reference to undeclared local value", "main.pond.hcl:2:10", ""},
		{"json undeclared variable", map[string]string{"main.pond.json": "{\n  \"pool\": {\"a\": {\"nodes\": \"${var.n}\"}}\n}\n"}, "Reference to undeclared input variable", "main.pond.json:2:30", ""},
		{"json count.index without count", map[string]string{"main.pond.json": "{\n  \"pool\": {\"a\": {\"nodes\": \"${count.index}\"}}\n}\n"}, `Reference to "count" in non-counted context`, "main.pond.json:2:30", ""},
		{"bad reference form", hclOnly("locals {\n  a = path.home\n}\n"), "Invalid reference", "main.pond.hcl:2:7", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := LoadDir(writeDir(t, tc.files), LoadOptions{})
			if diags.HasErrors() {
				t.Fatalf("load errors:\n%s", diagsString(diags))
			}
			diags = cfg.Validate()
			if !diags.HasErrors() {
				t.Fatal("no error")
			}
			d := diags[0]
			if d.Summary != tc.summary || diagPos(d) != tc.pos || !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("got first error\n  %s %q: %s\nwant\n  %s %q: ...%s...\nall:\n%s", diagPos(d), d.Summary, d.Detail, tc.pos, tc.summary, tc.detail, diagsString(diags))
			}
		})
	}
}

func TestValidateGood(t *testing.T) {
	src := `
variable "n" {
  type = number
  validation {
    condition     = var.n >= 0 && length([for i in range(var.n) : i]) == var.n
    error_message = "Must not be negative, got ${var.n}."
  }
}
locals {
  a = local.b + 1
  b = var.n
  m = { for k, v in { x = 1 } : k => v + local.a }
  p = path.module
}
pool "a" {
  count = var.n
  nodes = count.index + local.a
  dynamic "attr" {
    for_each = local.m
    iterator = it
    content {
      name  = it.key
      value = it.value
    }
  }
  dynamic "knob" {
    for_each = local.m
    labels   = [knob.key]
    content {
      v = knob.value
    }
  }
}
pool "b" {
  for_each   = local.m
  nodes      = each.value
  name       = "${each.key}-${pool.a[0].id}"
  depends_on = [pool.a]
}
output "o" {
  value = [for p in pool.b : p.id]
}
`
	cfg, diags := LoadDir(writeDir(t, hclOnly(src)), LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("load errors:\n%s", diagsString(diags))
	}
	if diags := cfg.Validate(); len(diags) != 0 {
		t.Fatalf("Validate:\n%s", diagsString(diags))
	}
	refs, diags := ResourceReferences(cfg.Resources["pool.b"])
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, r := range refs {
		got = append(got, r.Subject())
	}
	want := "local.m pool.a each.key pool.a each.value"
	if strings.Join(got, " ") != want {
		t.Errorf("ResourceReferences(pool.b) = %v, want %s", got, want)
	}
}
