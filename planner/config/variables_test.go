package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

const precedenceConfig = `
variable "a" {
  default = "default"
}
variable "b" {
  type    = number
  default = 1
}
variable "c" {
  type    = list(string)
  default = []
}
variable "d" {
  type = object({
    name = string
    size = optional(number, 2)
  })
  default = { name = "x" }
}
`

func TestCollectVariablesPrecedence(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // extra files in the configuration directory
		env   []string
		args  func(dir string) []VarArg
		want  map[string]string // variable -> expected value as HCL
	}{
		{
			name: "defaults",
			want: map[string]string{"a": `"default"`, "b": `1`, "c": `[]`, "d": `{name = "x", size = 2}`},
		},
		{
			name: "environment over default",
			env:  []string{"POND_VAR_a=env", "POND_VAR_b=7", `POND_VAR_c=["e"]`, "OTHER=1", "POND_VAR_undeclared=x"},
			want: map[string]string{"a": `"env"`, "b": `7`, "c": `["e"]`, "d": `{name = "x", size = 2}`},
		},
		{
			name:  "default file over environment",
			files: map[string]string{"pond.pondvars": "a = \"pondvars\"\n"},
			env:   []string{"POND_VAR_a=env"},
			want:  map[string]string{"a": `"pondvars"`, "b": `1`, "c": `[]`, "d": `{name = "x", size = 2}`},
		},
		{
			name: "auto files in lexical order over the default file",
			files: map[string]string{
				"pond.pondvars":           "a = \"pondvars\"\nb = 2\n",
				"a.auto.pondvars":         "a = \"auto-a\"\nb = 3\n",
				"b.auto.pondvars.json":    `{"a": "auto-b-json", "d": {"name": "j", "size": 9}}`,
				"c.auto.pondvars":         "c = [\"auto-c\"]\n",
				"ignored.pondvars":        "a = \"ignored\"\n",
				"z.auto.pondvars.example": "a = \"ignored\"\n",
			},
			want: map[string]string{"a": `"auto-b-json"`, "b": `3`, "c": `["auto-c"]`, "d": `{name = "j", size = 9}`},
		},
		{
			name:  "command line in order over files",
			files: map[string]string{"a.auto.pondvars": "a = \"auto\"\nb = 3\n", "x.pondvars": "a = \"x-file\"\nc = [\"x\"]\n", "y.pondvars.json": `{"a": "y-file", "b": 5}`},
			env:   []string{"POND_VAR_b=8"},
			args: func(dir string) []VarArg {
				return []VarArg{
					{Assignment: "a=cli-1"},
					{File: filepath.Join(dir, "x.pondvars")},
					{Assignment: "b=4"},
					{File: filepath.Join(dir, "y.pondvars.json")},
					{Assignment: `d={name="cli"}`},
				}
			},
			want: map[string]string{"a": `"y-file"`, "b": `5`, "c": `["x"]`, "d": `{name = "cli", size = 2}`},
		},
		{
			name: "literal or expression by type",
			files: map[string]string{"more.pond.hcl": `
variable "untyped" {}
variable "anyt" {
  type = any
}
variable "legacy" {
  type    = list
  default = []
}
`},
			env: []string{"POND_VAR_untyped=[1, 2]", "POND_VAR_anyt=[1, 2]", `POND_VAR_legacy=["x", "y"]`},
			args: func(string) []VarArg {
				return []VarArg{{Assignment: "b=12"}, {Assignment: "a=1 + 1"}}
			},
			want: map[string]string{"untyped": `"[1, 2]"`, "anyt": `[1, 2]`, "legacy": `["x", "y"]`, "a": `"1 + 1"`, "b": `12`},
		},
		{
			name: "last -var wins and values keep their text",
			args: func(string) []VarArg {
				return []VarArg{{Assignment: "a=first"}, {Assignment: "a= with = signs "}}
			},
			want: map[string]string{"a": `" with = signs "`, "b": `1`, "c": `[]`, "d": `{name = "x", size = 2}`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"main.pond.hcl": precedenceConfig}
			for k, v := range tc.files {
				files[k] = v
			}
			dir := writeDir(t, files)
			cfg, diags := LoadDir(dir, LoadOptions{})
			if diags.HasErrors() {
				t.Fatal(diagsString(diags))
			}
			opts := VarOptions{Environ: append([]string{}, tc.env...)}
			if tc.args != nil {
				opts.Args = tc.args(dir)
			}
			got, diags := CollectVariables(cfg, opts)
			if diags.HasErrors() {
				t.Fatal(diagsString(diags))
			}
			for name, wantSrc := range tc.want {
				want := mustEval(t, wantSrc)
				conv, err := cfg.Variables[name].ConvertValue(want)
				if err != nil {
					t.Fatal(err)
				}
				if !got[name].RawEquals(conv) {
					t.Errorf("var.%s = %s, want %s", name, ValueString(got[name]), ValueString(conv))
				}
			}
		})
	}
}

func mustEval(t *testing.T, src string) cty.Value {
	t.Helper()
	cfg, diags := LoadFiles(".", map[string][]byte{"v.pond.hcl": []byte("locals {\n  v = " + src + "\n}\n")}, LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diagsString(diags))
	}
	v, diags := cfg.Locals["v"].Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatal(diagsString(diags))
	}
	return v
}

func TestCollectVariablesErrors(t *testing.T) {
	const cfgSrc = `variable "n" {
  type = number
  validation {
    condition     = var.n > 0
    error_message = "n must be positive, not ${var.n}."
  }
}
variable "s" {
  type     = string
  default  = "x"
  nullable = false
}
variable "o" {
  type    = object({ k = string })
  default = { k = "v" }
}
`
	tests := []struct {
		name    string
		files   map[string]string
		env     []string
		args    []VarArg
		summary string
		pos     string // "-" for no subject
		detail  string
		warning bool
	}{
		{name: "missing required", summary: "No value for required variable", pos: "main.pond.hcl:1:1", detail: "POND_VAR_n"},
		{name: "undeclared on the command line", args: []VarArg{{Assignment: "n=1"}, {Assignment: "zz=1"}}, summary: "Value for undeclared variable", pos: "-", detail: `"zz"`},
		{name: "undeclared in a file", files: map[string]string{"a.auto.pondvars": "n = 1\nzz = 2\n"}, summary: "Value for undeclared variable", pos: "a.auto.pondvars:2:1", warning: true},
		{name: "malformed -var", args: []VarArg{{Assignment: "n"}}, summary: "Invalid -var option", pos: "-"},
		{name: "wrong type from -var", args: []VarArg{{Assignment: "n=many"}}, summary: "Invalid value for input variable", pos: "-", detail: "a number is required"},
		{name: "wrong type from a file", files: map[string]string{"a.auto.pondvars": "n = 1\no = { k = [1] }\n"}, summary: "Invalid value for input variable", pos: "a.auto.pondvars:2:5", detail: `attribute "k"`},
		{name: "bad expression from the environment", env: []string{"POND_VAR_o={k = "}, args: []VarArg{{Assignment: "n=1"}}, summary: "Invalid value for input variable", pos: "-", detail: "POND_VAR_o"},
		{name: "validation fails", args: []VarArg{{Assignment: "n=-3"}}, summary: "Invalid value for variable", pos: "main.pond.hcl:4:21", detail: "n must be positive, not -3."},
		{name: "validation fails from a file", files: map[string]string{"a.auto.pondvars": "\nn = 0\n"}, summary: "Invalid value for variable", pos: "a.auto.pondvars:2:5", detail: "n must be positive, not 0."},
		{name: "null for a non-nullable variable without default", files: map[string]string{"b.pond.hcl": "variable \"r\" {\n  nullable = false\n}\n"}, args: []VarArg{{Assignment: "n=1"}, {File: "FILE"}}, summary: "Required variable not set", pos: "r.pondvars:1:5"},
		{name: "missing var file", args: []VarArg{{Assignment: "n=1"}, {File: "/nonexistent/x.pondvars"}}, summary: "Failed to read variables file", pos: "-", detail: "does not exist"},
		{name: "var file syntax error", files: map[string]string{"a.auto.pondvars": "n = \n"}, summary: "Invalid expression", pos: "a.auto.pondvars:1:5"},
		{name: "var file refers to a variable", files: map[string]string{"a.auto.pondvars": "n = var.x\n"}, summary: "Variables not allowed", pos: "a.auto.pondvars:1:5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"main.pond.hcl": cfgSrc}
			for k, v := range tc.files {
				files[k] = v
			}
			dir := writeDir(t, files)
			for i, a := range tc.args {
				if a.File == "FILE" {
					p := filepath.Join(dir, "r.pondvars")
					if err := os.WriteFile(p, []byte("r = null\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					tc.args[i].File = p
				}
			}
			cfg, diags := LoadDir(dir, LoadOptions{})
			if diags.HasErrors() {
				t.Fatal(diagsString(diags))
			}
			_, diags = CollectVariables(cfg, VarOptions{Environ: append([]string{}, tc.env...), Args: tc.args})
			var d *hcl.Diagnostic
			for _, x := range diags {
				if (x.Severity == hcl.DiagWarning) == tc.warning {
					d = x
					break
				}
			}
			if d == nil {
				t.Fatalf("no diagnostic of the expected severity:\n%s", diagsString(diags))
			}
			if d.Summary != tc.summary || diagPos(d) != tc.pos || !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("got\n  %s %q: %s\nwant\n  %s %q: ...%s...\nall:\n%s", diagPos(d), d.Summary, d.Detail, tc.pos, tc.summary, tc.detail, diagsString(diags))
			}
			var b strings.Builder
			if err := WriteDiagnostics(&b, cfg.Files, diags, false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCollectVariablesPrompt(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.pond.hcl": `
variable "n" {
  type        = number
  description = "How many."
}
variable "l" {
  type = list(number)
}
variable "given" {
  default = "g"
}
`})
	cfg, diags := LoadDir(dir, LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diagsString(diags))
	}
	var asked []string
	prompt := func(name, desc string) (string, error) {
		asked = append(asked, name+":"+desc)
		return map[string]string{"n": "3", "l": "[1, 2]"}[name], nil
	}
	got, diags := CollectVariables(cfg, VarOptions{Environ: []string{}, Input: true, Prompt: prompt})
	if diags.HasErrors() {
		t.Fatal(diagsString(diags))
	}
	if strings.Join(asked, ",") != "l:,n:How many." {
		t.Errorf("asked %v", asked)
	}
	if !got["n"].RawEquals(cty.NumberIntVal(3)) || !got["l"].RawEquals(cty.ListVal([]cty.Value{cty.NumberIntVal(1), cty.NumberIntVal(2)})) {
		t.Errorf("got %#v", got)
	}
	// Without Input the prompt is not used.
	_, diags = CollectVariables(cfg, VarOptions{Environ: []string{}, Input: false, Prompt: prompt})
	if len(diags) != 2 || diags[0].Summary != "No value for required variable" {
		t.Errorf("without input: %s", diagsString(diags))
	}
}

func TestVarFlags(t *testing.T) {
	var args []VarArg
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.Var(VarFlag(&args), "var", "")
	fs.Var(VarFileFlag(&args), "var-file", "")
	if err := fs.Parse([]string{"-var", "a=1", "-var-file", "x.pondvars", "-var=b=2"}); err != nil {
		t.Fatal(err)
	}
	want := []VarArg{{Assignment: "a=1"}, {File: "x.pondvars"}, {Assignment: "b=2"}}
	if len(args) != 3 || args[0] != want[0] || args[1] != want[1] || args[2] != want[2] {
		t.Errorf("got %v, want %v", args, want)
	}
	fs.SetOutput(new(strings.Builder))
	if err := fs.Parse([]string{"-var", "novalue"}); err == nil {
		t.Error("-var novalue: no error")
	}
}

// TestSensitiveVariableValidation checks that a failed validation of a
// sensitive variable shows its value as (sensitive value), and a message
// made from it not at all.
func TestSensitiveVariableValidation(t *testing.T) {
	dir := writeDir(t, map[string]string{"main.pond.hcl": `
variable "db" {
  type      = string
  sensitive = true
  validation {
    condition     = length(var.db) > 20
    error_message = "too short: ${var.db}"
  }
}
`})
	cfg, diags := LoadDir(dir, LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diagsString(diags))
	}
	_, diags = CollectVariables(cfg, VarOptions{Environ: []string{"POND_VAR_db=sh0rt-s3cret"}})
	if !diags.HasErrors() {
		t.Fatal("no error")
	}
	var b strings.Builder
	if err := WriteDiagnostics(&b, cfg.Files, diags, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "sh0rt-s3cret") || !strings.Contains(out, "var.db is (sensitive value)") {
		t.Fatalf("diagnostics:\n%s", out)
	}
}
