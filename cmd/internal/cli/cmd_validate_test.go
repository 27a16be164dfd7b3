package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pondctl runs the command line in dir with env and returns the exit code
// and what was printed.
func pondctl(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(context.Background(), append([]string{"-chdir=" + dir}, args...), strings.NewReader(""), &out, &errOut, env)
	return code, out.String(), errOut.String()
}

// configDir returns a directory holding main.pond.hcl with src.
func configDir(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.pond.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFlockBadPolicy checks that validate and plan refuse a flock whose
// policy expression does not parse, with the error at the argument
// (file:line:col) and the parser's message.
func TestFlockBadPolicy(t *testing.T) {
	dir := configDir(t, `variable "cm" { default = "127.0.0.1:9618" }

flock "campus" {
  from  = [var.cm]
  allow = "Cpus >"
}
`)
	for _, cmd := range [][]string{{"validate"}, {"plan", "-input=false"}} {
		t.Run(cmd[0], func(t *testing.T) {
			code, stdout, stderr := pondctl(t, dir, nil, append(cmd, "-no-color")...)
			if code != 1 {
				t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, want := range []string{
				`main.pond.hcl line 5, in flock "campus":`,
				`5:   allow = "Cpus >"`,
				"allow: not a ClassAd expression",
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
	t.Run("validate -json", func(t *testing.T) {
		code, stdout, _ := pondctl(t, dir, nil, "validate", "-json")
		if code != 1 {
			t.Fatalf("exit code %d, want 1", code)
		}
		var out struct {
			Valid       bool `json:"valid"`
			Diagnostics []struct {
				Severity string `json:"severity"`
				Detail   string `json:"detail"`
				Range    struct {
					Filename string `json:"filename"`
					Start    struct{ Line, Column int }
				} `json:"range"`
			} `json:"diagnostics"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v:\n%s", err, stdout)
		}
		if out.Valid || len(out.Diagnostics) != 1 {
			t.Fatalf("valid %v, %d diagnostics, want one error:\n%s", out.Valid, len(out.Diagnostics), stdout)
		}
		d := out.Diagnostics[0]
		if d.Severity != "error" || filepath.Base(d.Range.Filename) != "main.pond.hcl" || d.Range.Start.Line != 5 || d.Range.Start.Column != 11 {
			t.Fatalf("diagnostic %+v, want the allow error at main.pond.hcl:5:11", d)
		}
	})
}

// TestRequirementsNotBoolean checks that requirements that can never be
// true, such as a number, are refused at the argument, for a pond by
// validate and plan and for a sea_query by plan.
func TestRequirementsNotBoolean(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		cmd       []string
		want      string
	}{
		{"pond, validate", "pond \"p\" {\n  central_manager = \"127.0.0.1:1\"\n  requirements    = 42\n}\n", []string{"validate"}, "main.pond.hcl line 3, in pond \"p\":\n  3:   requirements    = 42\n                         ^^\n"},
		{"pond, plan", "pond \"p\" {\n  central_manager = \"127.0.0.1:1\"\n  requirements    = 42\n}\n", []string{"plan", "-input=false"}, "main.pond.hcl line 3, in pond \"p\":\n  3:   requirements    = 42\n                         ^^\n"},
		{"sea_query, plan", "data \"sea_query\" \"q\" {\n  requirements = \"\\\"x\\\"\"\n}\n", []string{"plan", "-input=false"}, "main.pond.hcl line 2, in data \"sea_query\" \"q\":\n  2:   requirements = \"\\\"x\\\"\"\n                      ^^^^^^^\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := configDir(t, tt.src)
			code, stdout, stderr := pondctl(t, dir, nil, append(tt.cmd, "-no-color")...)
			if code != 1 {
				t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, want := range []string{tt.want, "not a boolean ClassAd expression"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestGlideinValidate checks that validate accepts the glidein examples
// and refuses a bad glidein argument at that argument, and that plan says
// which site this pondctl lacks rather than planning.
func TestGlideinValidate(t *testing.T) {
	for _, ex := range []string{"slurm", "slurm-factory", "ssh", "aws", "aws-factory"} {
		dir := filepath.Join("..", "..", "..", "examples", ex)
		if code, stdout, stderr := pondctl(t, dir, nil, "validate", "-no-color"); code != 0 {
			t.Errorf("examples/%s: validate exit code %d\n%s%s", ex, code, stdout, stderr)
		}
	}
	dir := configDir(t, `provider "slurm" {
  bind_address = "127.0.0.1"
}

glidein "hpc" {
  provider = provider.slurm
  pool     = "127.0.0.1:9618"
  lifetime = "4 hours"
}
`)
	code, stdout, stderr := pondctl(t, dir, nil, "validate", "-no-color")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{`lifetime: "4 hours" is not a duration`, "main.pond.hcl line 8", `8:   lifetime = "4 hours"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestGlideinFactoryValidate checks that a glidein with a factory block
// validates, and that nodes beside a factory block, or a bad argument of
// the block, is refused at that argument: file, line and column.
func TestGlideinFactoryValidate(t *testing.T) {
	const head = `provider "slurm" {
  bind_address = "127.0.0.1"
}

glidein "hpc" {
  provider = provider.slurm
  pool     = "127.0.0.1:9618"
`
	good := head + `  factory {
    max_queued           = 4
    max_running          = 20
    max_submit_per_cycle = 2
    ramp                 = "linear"
    breaker_window       = "5m"
  }
}
`
	if code, stdout, stderr := pondctl(t, configDir(t, good), nil, "validate", "-no-color"); code != 0 {
		t.Fatalf("a good factory block: exit code %d\n%s%s", code, stdout, stderr)
	}
	for _, tc := range []struct {
		name, src, want string
		line, column    int
	}{
		{"nodes and factory", head + "  nodes    = 3\n  factory {\n    max_queued  = 1\n    max_running = 2\n  }\n}\n",
			"nodes and a factory block are mutually exclusive", 8, 14},
		{"bad ramp", strings.Replace(good, `"linear"`, `"steep"`, 1), `factory.ramp: "steep": want exponential, linear or none`, 12, 28},
		{"queued over running", strings.Replace(good, "max_queued           = 4", "max_queued           = 40", 1),
			"factory.max_queued: 40 is more than max_running (20)", 9, 28},
		{"no limits", head + "  factory {\n  }\n}\n", "max_running\" is required", 8, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := configDir(t, tc.src)
			code, stdout, stderr := pondctl(t, dir, nil, "validate", "-no-color")
			if code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, fmt.Sprintf("main.pond.hcl line %d", tc.line)) {
				t.Fatalf("exit code %d, want 1 and %q at line %d\nstdout:\n%s\nstderr:\n%s", code, tc.want, tc.line, stdout, stderr)
			}
			_, stdout, _ = pondctl(t, dir, nil, "validate", "-json")
			var out struct {
				Diagnostics []struct {
					Detail string `json:"detail"`
					Range  struct {
						Filename string `json:"filename"`
						Start    struct{ Line, Column int }
					} `json:"range"`
				} `json:"diagnostics"`
			}
			if err := json.Unmarshal([]byte(stdout), &out); err != nil || len(out.Diagnostics) == 0 {
				t.Fatalf("%v:\n%s", err, stdout)
			}
			d := out.Diagnostics[0]
			if filepath.Base(d.Range.Filename) != "main.pond.hcl" || d.Range.Start.Line != tc.line || d.Range.Start.Column != tc.column {
				t.Fatalf("diagnostic %+v, want it at main.pond.hcl:%d:%d", d, tc.line, tc.column)
			}
		})
	}
}

// TestNoConfigurationFiles checks that a directory without a
// configuration file (the wrong directory, renamed files) is an error for
// plan, apply and validate, which would otherwise read it as "destroy
// everything", and not for the commands that destroy on purpose; the
// state of a live resource is left as it was.
func TestNoConfigurationFiles(t *testing.T) {
	dir := t.TempDir()
	// A state, as a pool's directory whose configuration was renamed
	// away keeps it.
	src := configDir(t, `output "kept" { value = 1 }`)
	if code, _, stderr := pondctl(t, src, nil, "apply", "-auto-approve", "-no-color"); code != 0 {
		t.Fatalf("apply: %d %s", code, stderr)
	}
	state, err := os.ReadFile(filepath.Join(src, "pond.state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "main.pond.hcl")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir  string
		args []string
		code int
		want string
	}{
		{dir, []string{"plan"}, 1, "run pondctl plan -destroy"},
		{src, []string{"plan"}, 1, "Planning without a configuration would destroy everything"},
		{src, []string{"plan", "-detailed-exitcode"}, 1, "No configuration files"},
		{src, []string{"apply", "-auto-approve"}, 1, "run pondctl destroy"},
		{dir, []string{"validate"}, 1, "No configuration files"},
		{src, []string{"plan", "-destroy"}, 0, ""},
		{dir, []string{"destroy", "-auto-approve"}, 0, ""},
	} {
		args := append(append([]string{}, c.args...), "-no-color")
		code, _, stderr := pondctl(t, c.dir, nil, args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v in %s: exit %d, %q; want exit %d and %q", c.args, filepath.Base(c.dir), code, stderr, c.code, c.want)
		}
	}
	if after, err := os.ReadFile(filepath.Join(src, "pond.state")); err != nil || !bytes.Equal(after, state) {
		t.Errorf("the state changed: %v", err)
	}
}

// TestFmtBadInput checks that fmt refuses a file that does not parse and
// a path that does not exist with exit 1, the parse error printed with the
// line it names, and leaves the file as it was.
func TestFmtBadInput(t *testing.T) {
	src := "pool \"a\" {\n  nodes = \n}\n"
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pond.hcl")
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		arg  string
		want []string
	}{
		{"bad.pond.hcl", []string{"Invalid expression", "on bad.pond.hcl line 2", "2:   nodes = "}},
		{"missing.pond.hcl", []string{"missing.pond.hcl could not be read"}},
	} {
		code, _, stderr := pondctl(t, dir, nil, "fmt", "-no-color", c.arg)
		if code != 1 {
			t.Errorf("fmt %s: exit %d, want 1\n%s", c.arg, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("fmt %s: %q is not in\n%s", c.arg, w, stderr)
			}
		}
	}
	if b, _ := os.ReadFile(bad); string(b) != src {
		t.Errorf("fmt changed the file that does not parse: %q", b)
	}
}
