package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestNestingLimit checks that configuration, variables files and -var
// values nested deeper than MaxNesting fail with an error at the first
// construct too deep, rather than crash pondctl by exhausting the stack,
// while nesting up to the limit still loads.
func TestNestingLimit(t *testing.T) {
	deep := func(open, mid, closer string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(closer, n)
	}
	// local wraps an expression in a locals block: one level of nesting.
	local := func(expr string) string { return "locals {\n  x = " + expr + "\n}\n" }
	// at is the column of the first construct too deep in local(expr)
	// with every level one byte wide.
	at := hcl.Pos{Line: 2, Column: 7 + MaxNesting - 1, Byte: 15 + MaxNesting - 1}
	for _, tt := range []struct {
		name string
		file string
		src  string
		want *hcl.Pos // nil: loads without a nesting error
	}{
		{"brackets at the limit", "main.pond.hcl", local(deep("[", "", "]", MaxNesting-1)), nil},
		{"brackets", "main.pond.hcl", local(deep("[", "", "]", MaxNesting)), &at},
		{"parentheses", "main.pond.hcl", local(deep("(", "1", ")", MaxNesting)), &at},
		{"negations", "main.pond.hcl", local(strings.Repeat("-", MaxNesting) + "1"), &at},
		{"nots", "main.pond.hcl", local(strings.Repeat("!", MaxNesting) + "true"), &at},
		{"blocks", "main.pond.hcl", deep("a {\n", "", "}\n", MaxNesting+1),
			&hcl.Pos{Line: MaxNesting + 1, Column: 3, Byte: 4*MaxNesting + 2}},
		{"interpolations", "main.pond.hcl", local(deep(`"${`, "1", `}"`, MaxNesting)),
			&hcl.Pos{Line: 2, Column: 7 + 3*MaxNesting - 3 + 1, Byte: 15 + 3*MaxNesting - 3 + 1}},
		{"after malformed UTF-8", "main.pond.hcl", "# \xff\n" + local(deep("[", "", "]", MaxNesting)),
			&hcl.Pos{Line: 3, Column: at.Column, Byte: at.Byte + 4}},
		// Deep enough to exhaust the stack of the HCL parser.
		{"brackets by the hundred thousand", "main.pond.hcl", local(deep("[", "", "]", 100_000)), &at},
		{"negations by the hundred thousand", "main.pond.hcl", local(strings.Repeat("-", 300_000) + "1"), &at},
		{"JSON at the limit", "main.pond.json", `{"locals": {"x": ` + deep("[", "", "]", MaxNesting-2) + "}}", nil},
		{"JSON", "main.pond.json", `{"locals": {"x": ` + deep("[", "", "]", MaxNesting-1) + "}}",
			&hcl.Pos{Line: 1, Column: 18 + MaxNesting - 2, Byte: 17 + MaxNesting - 2}},
		{"JSON brackets in strings", "main.pond.json", `{"locals": {"x": "` + strings.Repeat(`[{\"`, 1000) + `"}}`, nil},
		{"JSON by the hundred thousand", "main.pond.json", deep(`{"a":`, "1", "}", 100_000),
			&hcl.Pos{Line: 1, Column: 5*MaxNesting + 1, Byte: 5 * MaxNesting}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{tt.file: tt.src})
			_, diags := LoadDir(dir, LoadOptions{})
			checkNestingDiag(t, diags, filepath.Join(dir, tt.file), tt.want)
		})
	}
}

func checkNestingDiag(t *testing.T, diags hcl.Diagnostics, file string, want *hcl.Pos) {
	t.Helper()
	var found *hcl.Diagnostic
	for _, d := range diags {
		if d.Summary == "Nested too deeply" {
			found = d
		}
	}
	switch {
	case want == nil && found != nil:
		t.Fatalf("unexpected %s", diagsString(diags))
	case want == nil:
		return
	case found == nil:
		t.Fatalf("no nesting error among %s", diagsString(diags))
	case found.Subject == nil || found.Subject.Filename != file || found.Subject.Start != *want:
		t.Fatalf("nesting error at %+v, want %s at %+v", found.Subject, file, *want)
	}
}

// TestNestingLimitVariables checks the limit on variables files and -var
// values.
func TestNestingLimitVariables(t *testing.T) {
	main := "variable \"l\" {\n  type = any\n}\n"
	for _, tt := range []struct {
		name  string
		files map[string]string
		args  []VarArg
	}{
		{"vars file", map[string]string{"x.auto.pondvars": "l = " + strings.Repeat("[", 100_000)}, nil},
		{"JSON vars file", map[string]string{"x.auto.pondvars.json": `{"l": ` + strings.Repeat("[", 100_000)}, nil},
		{"-var", nil, []VarArg{{Assignment: "l=" + strings.Repeat("(", 100_000) + "1"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"main.pond.hcl": main}
			for k, v := range tt.files {
				files[k] = v
			}
			cfg, diags := LoadDir(writeDir(t, files), LoadOptions{})
			if diags.HasErrors() {
				t.Fatal(diagsString(diags))
			}
			_, diags = CollectVariables(cfg, VarOptions{Environ: []string{}, Args: tt.args})
			if !diags.HasErrors() || !strings.Contains(diagsString(diags), "Nested too deeply") {
				t.Fatalf("want a nesting error, got %s", diagsString(diags))
			}
		})
	}
}
