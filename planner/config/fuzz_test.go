package config

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// fuzzLoad loads src as the only file of a configuration and exercises
// everything downstream of the loader: it must never panic, and every
// diagnostic must carry a summary.
func fuzzLoad(t *testing.T, name string, src []byte) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := LoadDir(dir, LoadOptions{})
	if cfg == nil {
		t.Fatal("nil config")
	}
	if !diags.HasErrors() {
		diags = append(diags, cfg.Validate()...)
		for _, r := range cfg.Resources {
			_, d := ResourceReferences(r)
			diags = append(diags, d...)
		}
		if !diags.HasErrors() {
			_, d := CollectVariables(cfg, VarOptions{Environ: []string{}})
			diags = append(diags, d...)
		}
	}
	checkDiags(t, cfg.Files, diags)
	// Every position lies within the file and agrees with its byte offset.
	lines := bytes.Split(src, []byte("\n"))
	for _, d := range diags {
		if d.Subject == nil || d.Subject.Filename != filepath.Join(dir, name) {
			continue
		}
		p := d.Subject.Start
		if p.Byte < 0 || p.Byte > len(src) || p.Line < 1 || p.Line > len(lines) {
			t.Fatalf("%q: position %+v outside the file", d.Summary, p)
		}
		lineStart := len(bytes.Join(lines[:p.Line-1], []byte("\n")))
		if p.Line > 1 {
			lineStart++
		}
		if p.Byte < lineStart || p.Byte > lineStart+len(lines[p.Line-1]) {
			t.Fatalf("%q: position %+v is not on line %d", d.Summary, p, p.Line)
		}
	}
}

func checkDiags(t *testing.T, files map[string]*hcl.File, diags hcl.Diagnostics) {
	for _, d := range diags {
		if d.Summary == "" {
			t.Errorf("diagnostic without summary: %#v", d)
		}
	}
	if err := WriteDiagnostics(io.Discard, files, diags, true); err != nil {
		t.Fatal(err)
	}
	if err := WriteDiagnostics(io.Discard, files, diags, false); err != nil {
		t.Fatal(err)
	}
	_ = DiagnosticsJSON(diags)
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(goodNative))
	for _, src := range refactorSeeds {
		f.Add([]byte(src))
	}
	for _, src := range importCheckSeeds {
		f.Add([]byte(src))
	}
	for _, m := range malformedConfigs {
		for name, src := range m.files {
			if filepath.Ext(name) == ".hcl" {
				f.Add([]byte(src))
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		fuzzLoad(t, "main.pond.hcl", src)
	})
}

func FuzzLoadJSON(f *testing.F) {
	f.Add([]byte(goodJSON))
	f.Add([]byte(goodJSONPonds))
	for _, m := range malformedConfigs {
		for name, src := range m.files {
			if filepath.Ext(name) == ".json" {
				f.Add([]byte(src))
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		fuzzLoad(t, "main.pond.json", src)
	})
}

func FuzzVarsFile(f *testing.F) {
	f.Add([]byte("n = 1\nl = [1, 2]\no = { k = \"v\" }\n"), false)
	f.Add([]byte(`{"n": 1, "l": [1, 2], "o": {"k": "v"}}`), true)
	f.Add([]byte("n = var.x\n"), false)
	f.Add([]byte("n = \n"), false)
	f.Fuzz(func(t *testing.T, src []byte, isJSON bool) {
		dir := t.TempDir()
		name := "x.auto.pondvars"
		if isJSON {
			name += ".json"
		}
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, diags := LoadFiles(dir, map[string][]byte{"main.pond.hcl": []byte(`
variable "n" {
  type = number
  validation {
    condition     = var.n != 13
    error_message = "Not 13."
  }
}
variable "l" {
  type    = list(number)
  default = []
}
variable "o" {
  type    = object({ k = string, z = optional(bool, true) })
  default = null
}
`)}, LoadOptions{})
		if diags.HasErrors() {
			t.Fatal(diagsString(diags))
		}
		_, diags = CollectVariables(cfg, VarOptions{Environ: []string{}})
		checkDiags(t, cfg.Files, diags)
	})
}

func FuzzFormat(f *testing.F) {
	f.Add([]byte(goodNative))
	f.Add([]byte("a=1\nbb=[1,2]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		out := Format(src)
		if _, diags := hclsyntax.ParseConfig(src, "f.pond.hcl", hcl.InitialPos); diags.HasErrors() {
			return // pondctl fmt refuses files with syntax errors
		}
		// Formatting valid source is idempotent.
		if again := Format(out); string(again) != string(out) {
			t.Errorf("Format is not idempotent:\n%q\n%q", out, again)
		}
	})
}

// TestPositionsAfterInvalidUTF8 checks that a diagnostic after a
// malformed UTF-8 sequence that hcl reads across a newline points at
// the right line and column.
func TestPositionsAfterInvalidUTF8(t *testing.T) {
	for _, tt := range []struct {
		src     string
		summary string
		want    hcl.Pos
	}{
		{"pool \"p\" {\n  n\xec0\n  bogus = 2\n}\n", "Invalid block definition", hcl.Pos{Line: 3, Column: 9, Byte: 25}},
		{"\xec0\n\"", "Unterminated string literal", hcl.Pos{Line: 2, Column: 2, Byte: 4}},
	} {
		_, diags := LoadFiles(t.TempDir(), map[string][]byte{"main.pond.hcl": []byte(tt.src)}, LoadOptions{})
		found := false
		for _, d := range diags {
			if d.Summary == tt.summary && d.Subject != nil {
				found = true
				if d.Subject.Start != tt.want {
					t.Errorf("%q: %q at %+v, want %+v", tt.src, d.Summary, d.Subject.Start, tt.want)
				}
			}
		}
		if !found {
			t.Errorf("%q: no %q among %v", tt.src, tt.summary, diags)
		}
	}
}

// TestJSONPositionsAfterInvalidUTF8 checks that the lines and columns of
// diagnostics in JSON files and JSON variables files agree with their byte
// offsets after malformed UTF-8 that runs into a newline.
func TestJSONPositionsAfterInvalidUTF8(t *testing.T) {
	for _, tt := range []struct{ name, src string }{
		{"main.pond.json", "\"0\xcd\n"},
		{"main.pond.json", "{\"a\": \"\xe6\x97\n\"}"},
		{"x.auto.pondvars.json", "\"0\xcd\n"},
	} {
		dir := writeDir(t, map[string]string{"main.pond.hcl": "", tt.name: tt.src})
		cfg, diags := LoadDir(dir, LoadOptions{})
		if !diags.HasErrors() {
			_, diags = CollectVariables(cfg, VarOptions{Environ: []string{}})
		}
		found := false
		for _, d := range diags {
			if d.Subject == nil || d.Subject.Filename != filepath.Join(dir, tt.name) {
				continue
			}
			found = true
			for _, p := range []hcl.Pos{d.Subject.Start, d.Subject.End} {
				before := tt.src[:p.Byte]
				ls := strings.LastIndexByte(before, '\n') + 1
				want := hcl.Pos{Line: strings.Count(before, "\n") + 1, Column: utf8.RuneCountInString(before[ls:]) + 1, Byte: p.Byte}
				if p != want {
					t.Errorf("%q: %q at %+v, want %+v", tt.src, d.Summary, p, want)
				}
			}
		}
		if !found {
			t.Errorf("%q: no diagnostic in %s among %v", tt.src, tt.name, diags)
		}
	}
}
