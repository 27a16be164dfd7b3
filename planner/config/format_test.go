package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFormat(t *testing.T) {
	tests := []struct{ in, want string }{
		{"pool \"a\" {\nnodes=1\n  slots    =   2\n}\n", "pool \"a\" {\n  nodes = 1\n  slots = 2\n}\n"},
		{"variable \"x\" {\n  type = number\n}\n", "variable \"x\" {\n  type = number\n}\n"},
		{"a=1\nbb=[1,2]\n", "a  = 1\nbb = [1, 2]\n"},
	}
	for _, tc := range tests {
		if got := string(Format([]byte(tc.in))); got != tc.want {
			t.Errorf("Format(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFormatPath(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"good.pond.hcl":   "pool \"a\" {\n  nodes = 1\n}\n",
		"bad.pond.hcl":    "pool \"a\" {\nnodes=1\n}\n",
		"vals.pondvars":   "a=1\nbb=2\n",
		"main.pond.json":  "{\"pool\":{}}",
		"broken.pond.hcl": "pool \"a\" {\n",
		"notes.txt":       "x=1\n",
	})
	sub := filepath.Join(dir, "sub")
	hidden := filepath.Join(dir, ".hidden")
	for _, d := range []string{sub, hidden} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "x.pond.hcl"), []byte("x=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := func(rs []FmtResult) []string {
		var out []string
		for _, r := range rs {
			rel, _ := filepath.Rel(dir, r.Path)
			out = append(out, rel)
		}
		return out
	}

	// -check: report, don't write.
	res, diags := FormatPath(dir, FmtOptions{Diff: true})
	if len(diags) != 1 || diags[0].Summary != "Unclosed configuration block" {
		t.Errorf("diagnostics: %s", diagsString(diags))
	}
	if diff := cmp.Diff([]string{"bad.pond.hcl", "vals.pondvars"}, names(res)); diff != "" {
		t.Errorf("changed files (-want +got):\n%s", diff)
	}
	wantDiff := "--- old/" + filepath.Join(dir, "bad.pond.hcl") + "\n+++ new/" + filepath.Join(dir, "bad.pond.hcl") + "\n" +
		"@@ -1,3 +1,3 @@\n pool \"a\" {\n-nodes=1\n+  nodes = 1\n }\n"
	if len(res) > 0 && res[0].Diff != wantDiff {
		t.Errorf("diff:\n%s\nwant:\n%s", res[0].Diff, wantDiff)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "bad.pond.hcl")); string(b) != "pool \"a\" {\nnodes=1\n}\n" {
		t.Errorf("check mode changed the file: %q", b)
	}

	// Recursive, writing.
	res, _ = FormatPath(dir, FmtOptions{Recursive: true, Write: true})
	if diff := cmp.Diff([]string{"bad.pond.hcl", "sub/x.pond.hcl", "vals.pondvars"}, names(res)); diff != "" {
		t.Errorf("changed files (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "vals.pondvars")); string(b) != "a  = 1\nbb = 2\n" {
		t.Errorf("written file: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(hidden, "x.pond.hcl")); string(b) != "x=1\n" {
		t.Errorf("hidden directory was formatted: %q", b)
	}
	// Now formatted: nothing left to change.
	res, _ = FormatPath(dir, FmtOptions{Recursive: true})
	if len(res) != 0 {
		t.Errorf("second pass changed %v", names(res))
	}
	// A single file.
	res, diags = FormatPath(filepath.Join(hidden, "x.pond.hcl"), FmtOptions{})
	if len(res) != 1 || diags.HasErrors() {
		t.Errorf("single file: %v %s", res, diagsString(diags))
	}
	if _, diags := FormatPath(filepath.Join(dir, "missing"), FmtOptions{}); !diags.HasErrors() {
		t.Error("missing path: no error")
	}
}

func TestUnifiedDiff(t *testing.T) {
	a := strings.Join([]string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14"}, "\n") + "\n"
	b := strings.Join([]string{"1", "2x", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "14", "15"}, "\n") + "\n"
	want := `--- old/f
+++ new/f
@@ -1,5 +1,5 @@
 1
-2
+2x
 3
 4
 5
@@ -10,5 +10,5 @@
 10
 11
 12
-13
 14
+15
`
	if got := UnifiedDiff("f", "f", a, b); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := UnifiedDiff("f", "f", "x\n", "x\n"); got != "" {
		t.Errorf("equal inputs: %q", got)
	}
	if got := UnifiedDiff("f", "f", "", "a\n"); got != "--- old/f\n+++ new/f\n@@ -0,0 +1 @@\n+a\n" {
		t.Errorf("from empty: %q", got)
	}
}
