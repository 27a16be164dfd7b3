package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// shape is a comparable summary of a decoded configuration.
type shape struct {
	Backend   string
	Sea       string
	Variables map[string]string // name -> "type default nullable sensitive validations"
	Locals    []string
	Outputs   map[string]string // name -> "sensitive depends_on"
	Providers []string
	Resources map[string]string // addr -> "count for_each provider depends_on lifecycle attrs"
}

func describe(t *testing.T, cfg *Config) shape {
	t.Helper()
	s := shape{Variables: map[string]string{}, Outputs: map[string]string{}, Resources: map[string]string{}}
	if cfg.Pond != nil {
		if cfg.Pond.Backend != nil {
			attrs, _ := cfg.Pond.Backend.Config.JustAttributes()
			s.Backend = cfg.Pond.Backend.Type + " " + attrNames(attrs)
		}
		if cfg.Pond.Sea != nil {
			s.Sea = cfg.Pond.Sea.Address
		}
	}
	for name, v := range cfg.Variables {
		def := "-"
		if v.Default != cty.NilVal {
			def = ValueString(v.Default)
		}
		s.Variables[name] = strings.Join([]string{typeexpr.TypeString(v.Type), def, boolStr(v.Nullable, "nullable"), boolStr(v.Sensitive, "sensitive"), strings.Repeat("V", len(v.Validations)), v.Description}, " ")
	}
	for name := range cfg.Locals {
		s.Locals = append(s.Locals, name)
	}
	sort.Strings(s.Locals)
	for name, o := range cfg.Outputs {
		s.Outputs[name] = boolStr(o.Sensitive, "sensitive") + " " + travs(o.DependsOn)
	}
	for k := range cfg.Providers {
		s.Providers = append(s.Providers, k)
	}
	sort.Strings(s.Providers)
	for addr, r := range cfg.Resources {
		prov := "-"
		if r.ProviderRef != nil {
			prov = r.ProviderRef.Key()
		}
		lc := boolStr(r.Lifecycle.PreventDestroy, "pd") + boolStr(r.Lifecycle.CreateBeforeDestroy, "cbd") + boolStr(r.Lifecycle.IgnoreAllChanges, "all") + travs(r.Lifecycle.IgnoreChanges)
		attrs := configAttrs(t, r.Config)
		s.Resources[addr] = strings.Join([]string{boolStr(r.Count != nil, "count"), boolStr(r.ForEach != nil, "for_each"), prov, travs(r.DependsOn), lc, attrNames(attrs)}, " ")
	}
	return s
}

// configAttrs lists the attributes of a resource body (hclsyntax's
// JustAttributes does not skip the hidden lifecycle block).
func configAttrs(t *testing.T, body hcl.Body) hcl.Attributes {
	if sb, ok := body.(*hclsyntax.Body); ok {
		attrs := hcl.Attributes{}
		for name, a := range sb.Attributes {
			if !slices.Contains(MetaArguments, name) {
				attrs[name] = a.AsHCLAttribute()
			}
		}
		return attrs
	}
	attrs, diags := body.JustAttributes()
	if diags.HasErrors() {
		t.Fatalf("JustAttributes: %s", diags.Error())
	}
	return attrs
}

func boolStr(b bool, s string) string {
	if b {
		return s
	}
	return "!" + s
}

func travs(ts []hcl.Traversal) string {
	var out []string
	for _, t := range ts {
		out = append(out, traversalString(t))
	}
	return "[" + strings.Join(out, ",") + "]"
}

func attrNames(attrs hcl.Attributes) string {
	var names []string
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	return "{" + strings.Join(names, ",") + "}"
}

const goodNative = `
pond {
  backend "local" { path = "pond.state" }
  sea { address = "127.0.0.1:7946" }
}

variable "workers" {
  type        = number
  default     = 4
  description = "Workers per pool."
  validation {
    condition     = var.workers > 0
    error_message = "At least one worker."
  }
}

variable "site" {
  type = object({
    name  = string
    zones = optional(list(string), ["a"])
  })
  default   = { name = "campus" }
  sensitive = true
  nullable  = false
}

variable "free" {}

locals {
  nodes = var.workers * 2
}

locals {
  label = "${var.site.name}-pool"
}

provider "local" {}

provider "local" {
  alias = "fast"
  root  = "/tmp"
}

pool "campus" {
  provider   = provider.local
  nodes      = local.nodes
  attributes = { HasMatlab = true }
  lifecycle {
    prevent_destroy = true
    ignore_changes  = [attributes["HasMatlab"], nodes]
  }
}

pool "burst" {
  count      = 2
  provider   = provider.local.fast
  nodes      = count.index
  depends_on = [pool.campus, data.sea_query.big]
  lifecycle {
    create_before_destroy = true
    ignore_changes        = all
  }
}

pond "p" {
  for_each        = toset(["x", "y"])
  central_manager = pool.campus.central_manager
  requirements    = "Memory >= ${each.key}"
}

flock "f" {
  pools = [pool.campus.id]
}

data "sea_query" "big" {
  requirements = "Cpus >= 2"
  k            = 10
}

output "members" {
  value      = pond.p
  sensitive  = true
  depends_on = [pool.burst]
}
`

const goodJSON = `{
  "pond": {
    "backend": {"local": {"path": "pond.state"}},
    "sea": {"address": "127.0.0.1:7946"}
  },
  "variable": {
    "workers": {
      "type": "number",
      "default": 4,
      "description": "Workers per pool.",
      "validation": [{"condition": "${var.workers > 0}", "error_message": "At least one worker."}]
    },
    "site": {
      "type": "object({name = string, zones = optional(list(string), [\"a\"])})",
      "default": {"name": "campus"},
      "sensitive": true,
      "nullable": false
    },
    "free": {}
  },
  "locals": [
    {"nodes": "${var.workers * 2}"},
    {"label": "${var.site.name}-pool"}
  ],
  "provider": {
    "local": [
      {},
      {"alias": "fast", "root": "/tmp"}
    ]
  },
  "pool": {
    "campus": {
      "provider": "provider.local",
      "nodes": "${local.nodes}",
      "attributes": {"HasMatlab": true},
      "lifecycle": {"prevent_destroy": true, "ignore_changes": ["attributes[\"HasMatlab\"]", "nodes"]}
    },
    "burst": {
      "count": 2,
      "provider": "provider.local.fast",
      "nodes": "${count.index}",
      "depends_on": ["pool.campus", "data.sea_query.big"],
      "lifecycle": {"create_before_destroy": true, "ignore_changes": "all"}
    }
  },
  "flock": {"f": {"pools": ["${pool.campus.id}"]}},
  "data": {"sea_query": {"big": {"requirements": "Cpus >= 2", "k": 10}}},
  "output": {"members": {"value": "${pond.p}", "sensitive": true, "depends_on": ["pool.burst"]}}
}
`

// The pond resource is in a second JSON file: a "pond" property holds
// either the settings block or pond resources.
const goodJSONPonds = `{
  "pond": {
    "p": {
      "for_each": "${toset([\"x\", \"y\"])}",
      "central_manager": "${pool.campus.central_manager}",
      "requirements": "Memory >= ${each.key}"
    }
  }
}
`

func TestLoadGood(t *testing.T) {
	want := shape{
		Backend: "local {path}",
		Sea:     "127.0.0.1:7946",
		Variables: map[string]string{
			"workers": `number 4 nullable !sensitive V Workers per pool.`,
			"site":    `object({name=string,zones=list(string)}) {"name":"campus","zones":["a"]} !nullable sensitive  `,
			"free":    `any - nullable !sensitive  `,
		},
		Locals:    []string{"label", "nodes"},
		Outputs:   map[string]string{"members": "sensitive [pool.burst]"},
		Providers: []string{"local", "local.fast"},
		Resources: map[string]string{
			"pool.campus":        `!count !for_each local [] pd!cbd!all[attributes["HasMatlab"],nodes] {attributes,nodes}`,
			"pool.burst":         `count !for_each local.fast [pool.campus,data.sea_query.big] !pdcbdall[] {nodes}`,
			"pond.p":             `!count for_each - [] !pd!cbd!all[] {central_manager,requirements}`,
			"flock.f":            `!count !for_each - [] !pd!cbd!all[] {pools}`,
			"data.sea_query.big": `!count !for_each - [] !pd!cbd!all[] {k,requirements}`,
		},
	}
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"native", map[string]string{"main.pond.hcl": goodNative}},
		{"json", map[string]string{"main.pond.json": goodJSON, "ponds.pond.json": goodJSONPonds}},
		{"mixed", map[string]string{"main.pond.json": goodJSON, "ponds.pond.hcl": `
pond "p" {
  for_each        = toset(["x", "y"])
  central_manager = pool.campus.central_manager
  requirements    = "Memory >= ${each.key}"
}
`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, tc.files)
			cfg, diags := LoadDir(dir, LoadOptions{})
			if diags.HasErrors() {
				t.Fatalf("unexpected errors:\n%s", diagsString(diags))
			}
			if diff := cmp.Diff(want, describe(t, cfg)); diff != "" {
				t.Errorf("decoded configuration (-want +got):\n%s", diff)
			}
			if vd := cfg.Validate(); vd.HasErrors() {
				t.Errorf("Validate:\n%s", diagsString(vd))
			}
		})
	}
}

func TestLoadOptionsTypes(t *testing.T) {
	src := map[string]string{"main.pond.hcl": "glidein \"g\" {}\ndata \"ec2_ami\" \"a\" {}\n"}
	dir := writeDir(t, src)
	cfg, diags := LoadDir(dir, LoadOptions{ManagedTypes: []string{"glidein"}, DataTypes: []string{"ec2_ami"}})
	if diags.HasErrors() {
		t.Fatalf("unexpected errors:\n%s", diagsString(diags))
	}
	for _, addr := range []string{"glidein.g", "data.ec2_ami.a"} {
		if cfg.Resources[addr] == nil {
			t.Errorf("missing %s", addr)
		}
	}
	// The default types are then unknown.
	_, diags = LoadFiles(dir, map[string][]byte{"x.pond.hcl": []byte("pool \"p\" {}\n")}, LoadOptions{ManagedTypes: []string{"glidein"}})
	if !diags.HasErrors() || diags[0].Summary != "Unsupported block type" {
		t.Errorf("pool with only glidein managed: %s", diagsString(diags))
	}
}

func TestLoadDirIgnoresOtherFiles(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"a.pond.hcl":      "pool \"a\" {}\n",
		".b.pond.hcl":     "garbage {",
		"c.pond.hcl~":     "garbage {",
		"README.md":       "garbage {",
		"x.auto.pondvars": "workers = 1\n",
	})
	cfg, diags := LoadDir(dir, LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("unexpected errors:\n%s", diagsString(diags))
	}
	if len(cfg.Files) != 1 || len(cfg.Resources) != 1 {
		t.Errorf("files %d resources %d, want 1 and 1", len(cfg.Files), len(cfg.Resources))
	}
	if _, diags := LoadDir(dir+"/missing", LoadOptions{}); !diags.HasErrors() {
		t.Error("missing directory: no error")
	}
}

func TestWriteDiagnostics(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.pond.hcl": "pool \"campus\" {\n  nodes = 1\n  lifecycle {\n    prevent_destroi = true\n  }\n}\n"})
	cfg, diags := LoadDir(dir, LoadOptions{})
	if !diags.HasErrors() {
		t.Fatal("want an error")
	}
	var b strings.Builder
	if err := WriteDiagnostics(&b, cfg.Files, diags, false); err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(b.String(), dir+"/", "")
	want := `
Error: Unsupported argument

  on main.pond.hcl line 4, in pool "campus":
  4:     prevent_destroi = true
         ^^^^^^^^^^^^^^^

An argument named "prevent_destroi" is not expected here. Did you mean "prevent_destroy"?
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WriteDiagnostics (-want +got):\n%s", diff)
	}
	b.Reset()
	if err := WriteDiagnostics(&b, cfg.Files, diags, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), ansiUnderline+"prevent_destroi"+ansiReset) {
		t.Errorf("colored output does not underline the subject:\n%q", b.String())
	}

	js, err := json.Marshal(DiagnosticsJSON(diags))
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `[{"severity":"error","summary":"Unsupported argument","detail":"An argument named \"prevent_destroi\" is not expected here. Did you mean \"prevent_destroy\"?","range":{"filename":"main.pond.hcl","start":{"line":4,"column":5,"byte":46},"end":{"line":4,"column":20,"byte":61}}}]`
	if got := strings.ReplaceAll(string(js), dir+"/", ""); got != wantJSON {
		t.Errorf("DiagnosticsJSON:\n got %s\nwant %s", got, wantJSON)
	}
	if got := DiagnosticsJSON(nil); got == nil || len(got) != 0 {
		t.Errorf("DiagnosticsJSON(nil) = %#v, want empty non-nil", got)
	}
}

// The sketch in the product contract loads and validates as it stands,
// semicolons included, with positions in the file as written.
func TestSpecSketch(t *testing.T) {
	cfg, diags := LoadDir(filepath.Join("testdata", "spec"), LoadOptions{})
	diags = append(diags, cfg.Validate()...)
	if len(diags) != 0 {
		t.Fatal(diagsString(diags))
	}
	vals, diags := CollectVariables(cfg, VarOptions{Environ: []string{}})
	if len(diags) != 0 {
		t.Fatal(diagsString(diags))
	}
	if !vals["workers"].RawEquals(cty.NumberIntVal(4)) {
		t.Errorf("workers = %#v", vals["workers"])
	}
	var addrs []string
	for a := range cfg.Resources {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	want := []string{"data.sea_query.big", "pond.burst", "pool.campus", "pool.sea"}
	if diff := cmp.Diff(want, addrs); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if cfg.Pond.Backend.Type != "local" || cfg.Pond.Sea.Address != "127.0.0.1:7946" {
		t.Errorf("pond settings %+v %+v", cfg.Pond.Backend, cfg.Pond.Sea)
	}
	if p := cfg.Resources["pool.campus"].ProviderRef; p == nil || p.Key() != "local" {
		t.Errorf("pool.campus provider %v", p)
	}
	if got := RangeString(cfg.Resources["pool.campus"].DeclRange); got != filepath.Join("testdata", "spec", "main.pond.hcl")+":10:1" {
		t.Errorf("pool.campus declared at %s", got)
	}
	v := cfg.Variables["workers"]
	if got := RangeString(v.DefaultRange); got != filepath.Join("testdata", "spec", "main.pond.hcl")+":6:47" {
		t.Errorf("default of var.workers at %s", got)
	}
	if v.DefaultRange.End.Byte-v.DefaultRange.Start.Byte != 1 {
		t.Errorf("default range %v", v.DefaultRange)
	}
}

func TestSemicolons(t *testing.T) {
	src := "variable \"a\" { type = number; default = 4 }\npool \"p\" { nodes = var.a; attributes = { X = 1, Y = \"a;b\" }; lifecycle { prevent_destroy = true; create_before_destroy = true } }\n# a; comment\nlocals { s = \"${var.a};\" }\n"
	cfg, diags := LoadFiles(".", map[string][]byte{"s.pond.hcl": []byte(src)}, LoadOptions{})
	diags = append(diags, cfg.Validate()...)
	if len(diags) != 0 {
		t.Fatal(diagsString(diags))
	}
	p := cfg.Resources["pool.p"]
	if !p.Lifecycle.PreventDestroy || !p.Lifecycle.CreateBeforeDestroy {
		t.Errorf("lifecycle %+v", p.Lifecycle)
	}
	attrs := configAttrs(t, p.Config)
	if got := RangeString(attrs["attributes"].Expr.Range()); got != "s.pond.hcl:2:40" {
		t.Errorf("attributes expression at %s", got)
	}
	if got := RangeString(cfg.Locals["s"].DeclRange); got != "s.pond.hcl:4:10" {
		t.Errorf("local s at %s", got)
	}
	want := "variable \"a\" {\n  type    = number\n  default = 4\n}\n"
	dir := writeDir(t, map[string]string{"s.pond.hcl": "variable \"a\" { type = number; default = 4 }\n"})
	res, diags := FormatPath(dir, FmtOptions{Write: true})
	if len(res) != 1 || diags.HasErrors() {
		t.Fatalf("FormatPath: %v %s", res, diagsString(diags))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "s.pond.hcl")); string(b) != want {
		t.Errorf("formatted:\n%s\nwant:\n%s", b, want)
	}
}

func TestWriteDiagnosticsValues(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.pond.hcl": `variable "n" {
  type = number
  validation {
    condition = (
      var.n > 0
    )
    error_message = "Must be positive."
  }
}
`})
	cfg, diags := LoadDir(dir, LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diagsString(diags))
	}
	_, diags = CollectVariables(cfg, VarOptions{Environ: []string{"POND_VAR_n=-2"}})
	var b strings.Builder
	if err := WriteDiagnostics(&b, cfg.Files, diags, false); err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(b.String(), dir+"/", "")
	want := `
Error: Invalid value for variable

  on main.pond.hcl line 4, in variable "n":
  4:     condition = (
                     ^
  5:       var.n > 0
           ^^^^^^^^^
  6:     )
         ^
    ├────────────────
    │ var.n is -2

Must be positive.

The value of var.n (from the environment variable POND_VAR_n) was checked by the validation rule at main.pond.hcl:3:3.
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
