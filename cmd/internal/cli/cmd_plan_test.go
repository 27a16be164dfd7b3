package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/cmd/internal/ui/jsonview"
)

// unreachablePond is a pond whose central manager does not answer, so that
// the sea provider's plan-time query fails.
const unreachablePond = `pond "burst" {
  central_manager = "127.0.0.1:1"
  requirements    = "Cpus >= 1"
}
`

// TestProviderWarningAfterPlan checks that a provider's warning reaches
// plan's output after the plan, at the resource's block, with its source.
func TestProviderWarningAfterPlan(t *testing.T) {
	dir := configDir(t, unreachablePond)
	var out bytes.Buffer // both streams, to see the order
	code := Run(context.Background(), []string{"-chdir=" + dir, "plan", "-input=false", "-no-color"}, strings.NewReader(""), &out, &out, nil)
	got := out.String()
	if code != 0 {
		t.Fatalf("exit code %d, want 0:\n%s", code, got)
	}
	var last int
	for _, want := range []string{
		"# pond.burst will be created",
		"Plan: 1 to add, 0 to change, 0 to destroy.",
		"Warning: No candidates for pond.burst",
		`main.pond.hcl line 1, in pond "burst":`,
		`1: pond "burst" {`,
		"The sea query that finds who would join failed",
		"127.0.0.1:1",
		"Note: You didn't use the -out option",
	} {
		i := strings.Index(got[last:], want)
		if i < 0 {
			t.Fatalf("output lacks %q after byte %d:\n%s", want, last, got)
		}
		last += i
	}
}

// TestProviderWarningInPlanJSON checks that plan -json prints the
// machine-readable UI, one message a line: the version first, the planned
// change, the summary, and a provider's warning with its range.
func TestProviderWarningInPlanJSON(t *testing.T) {
	dir := configDir(t, unreachablePond)
	code, stdout, stderr := pondctl(t, dir, nil, "plan", "-input=false", "-json")
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("plan -json printed on stderr:\n%s", stderr)
	}
	type message struct {
		Level     string `json:"@level"`
		Message   string `json:"@message"`
		Module    string `json:"@module"`
		Timestamp string `json:"@timestamp"`
		Type      string `json:"type"`
		UI        string `json:"ui"`
		Change    struct {
			Resource struct{ Addr string }
			Action   string
		}
		Changes struct {
			Add, Change, Remove int
			Operation           string
		}
		Diagnostic struct {
			Severity, Summary, Detail string
			Range                     struct {
				Filename string
				Start    struct{ Line, Column int }
			}
		}
	}
	var msgs []message
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m message
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, m.Timestamp); err != nil || m.Module != "pondctl.ui" || m.Level == "" || m.Message == "" {
			t.Errorf("line %q lacks a common field", line)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 || msgs[0].Type != "version" || msgs[0].UI != "1.2" {
		t.Fatalf("the first message is not the version:\n%s", stdout)
	}
	byType := map[string][]message{}
	for _, m := range msgs {
		byType[m.Type] = append(byType[m.Type], m)
	}
	if pc := byType["planned_change"]; len(pc) != 1 || pc[0].Change.Resource.Addr != "pond.burst" || pc[0].Change.Action != "create" {
		t.Errorf("planned changes %+v, want pond.burst created", pc)
	}
	if cs := byType["change_summary"]; len(cs) != 1 || cs[0].Changes.Add != 1 || cs[0].Changes.Operation != "plan" {
		t.Errorf("change summaries %+v, want one of 1 to add", cs)
	}
	ds := byType["diagnostic"]
	if len(ds) != 1 {
		t.Fatalf("diagnostics %+v, want one warning", ds)
	}
	d := ds[0].Diagnostic
	if ds[0].Level != "warn" || d.Severity != "warning" || d.Summary != "No candidates for pond.burst" || !strings.Contains(d.Detail, "127.0.0.1:1") ||
		filepath.Base(d.Range.Filename) != "main.pond.hcl" || d.Range.Start.Line != 1 || d.Range.Start.Column != 1 {
		t.Fatalf("diagnostic %+v, want the query warning at main.pond.hcl:1:1", d)
	}
}

// TestPlanJSONErrors checks that plan -json prints an error of the
// configuration as a diagnostic message with its range, exits 1, and
// leaves stderr empty.
func TestPlanJSONErrors(t *testing.T) {
	dir := configDir(t, "pool \"p\" {\n  nodes = \"many\"\n  bogus = 1\n}\n")
	code, stdout, stderr := pondctl(t, dir, nil, "plan", "-input=false", "-json")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\n%s%s", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("plan -json printed on stderr:\n%s", stderr)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m struct {
			Type       string `json:"type"`
			Level      string `json:"@level"`
			Diagnostic struct {
				Severity string
				Range    *struct {
					Filename string
					Start    struct{ Line int }
				}
			}
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if m.Type == "diagnostic" && m.Level == "error" && m.Diagnostic.Severity == "error" && m.Diagnostic.Range != nil &&
			m.Diagnostic.Range.Filename == "main.pond.hcl" && m.Diagnostic.Range.Start.Line >= 2 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no error diagnostic at main.pond.hcl:\n%s", stdout)
	}
}

// TestDiagnosticEvents checks the JSON events apply -json prints for
// warnings.
func TestDiagnosticEvents(t *testing.T) {
	var out bytes.Buffer
	h := newUIHooks(&out, colorizer{}, jsonview.New(&out))
	rng := hcl.Range{Filename: "main.pond.hcl", Start: hcl.Pos{Line: 3, Column: 1, Byte: 20}, End: hcl.Pos{Line: 3, Column: 9, Byte: 28}}
	h.diagnostics(hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Few nodes", Detail: "Only one.", Subject: &rng}})
	var ev struct {
		Level      string `json:"@level"`
		Message    string `json:"@message"`
		Module     string `json:"@module"`
		Timestamp  string `json:"@timestamp"`
		Type       string `json:"type"`
		Diagnostic struct {
			Severity, Summary, Detail string
			Range                     struct{ Start struct{ Line int } }
		} `json:"diagnostic"`
	}
	if err := json.Unmarshal(out.Bytes(), &ev); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if _, err := time.Parse(time.RFC3339Nano, ev.Timestamp); err != nil {
		t.Errorf("timestamp: %v", err)
	}
	if ev.Level != "warn" || ev.Message != "Warning: Few nodes" || ev.Type != "diagnostic" || ev.Module != "pondctl.ui" || ev.Diagnostic.Severity != "warning" ||
		ev.Diagnostic.Detail != "Only one." || ev.Diagnostic.Range.Start.Line != 3 {
		t.Fatalf("event %s", out.String())
	}
}

// TestPlanNamesBadVariableInputs checks that plan names the -var flag
// that sets an undeclared variable or has no "=", and the missing file
// given to -var-file.
func TestPlanNamesBadVariableInputs(t *testing.T) {
	dir := configDir(t, "variable \"a\" {\n  default = 1\n}\n")
	missing := filepath.Join(dir, "missing.pondvars")
	for _, tt := range []struct {
		arg  string
		want []string
	}{
		{"-var=nope=1", []string{"Value for undeclared variable", `The argument -var="nope=1" assigns a variable named "nope"`}},
		{"-var=nope", []string{`invalid value "nope" for flag -var: no "=" in "nope"`, "-var 'NAME=VALUE'"}},
		{"-var-file=" + missing, []string{"Failed to read variables file", missing + " does not exist"}},
	} {
		code, stdout, stderr := pondctl(t, dir, nil, "plan", "-input=false", "-no-color", tt.arg)
		if code != 1 {
			t.Fatalf("plan %s: exit code %d, want 1\n%s%s", tt.arg, code, stdout, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("plan %s: error lacks %q:\n%s", tt.arg, w, stderr)
			}
		}
	}
}

// TestLockHeldOnAnotherHost checks that a state lock taken on another
// host is reported with the lock file, the holder and its host, and how
// to release it.
func TestLockHeldOnAnotherHost(t *testing.T) {
	dir := configDir(t, "variable \"a\" {\n  default = 1\n}\n")
	lock := `{"ID":"3f1c0e2a-lock","Operation":"OperationTypeApply","Who":"alice@build-7.example.org","Version":"1","Created":"2026-01-02T03:04:05Z","PID":4242,"Path":"pond.state"}`
	if err := os.WriteFile(filepath.Join(dir, "pond.state.lock.info"), []byte(lock), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := pondctl(t, dir, nil, "plan", "-input=false", "-no-color")
	if code != 1 {
		t.Fatalf("plan under a lock: exit %d\n%s", code, stderr)
	}
	for _, w := range []string{
		"Error acquiring the state lock",
		"in lock file " + filepath.Join(dir, "pond.state.lock.info"),
		"alice@build-7.example.org", "pid 4242", "lock ID 3f1c0e2a-lock",
		"another host, build-7.example.org",
		"pondctl force-unlock 3f1c0e2a-lock",
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("lock error lacks %q:\n%s", w, stderr)
		}
	}
}

// TestChdirPaths checks that, as with Terraform, the paths given on the
// command line (-var-file, -out, a saved plan to show) are read and
// written in the directory -chdir names, not in the caller's.
func TestChdirPaths(t *testing.T) {
	dir := configDir(t, `variable "req" {}
pond "burst" {
  central_manager = "127.0.0.1:1"
  requirements    = var.req
}
`)
	if err := os.WriteFile(filepath.Join(dir, "in.pondvars"), []byte(`req = "Cpus >= 3"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // the caller's directory holds none of them
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if code := Run(context.Background(), append([]string{"-chdir=" + dir}, args...), strings.NewReader(""), &out, &out, nil); code != 0 {
			t.Fatalf("pondctl %v: exit %d:\n%s", args, code, out.String())
		}
		return out.String()
	}
	run("plan", "-input=false", "-no-color", "-var-file=in.pondvars", "-out=saved.plan")
	if _, err := os.Stat(filepath.Join(dir, "saved.plan")); err != nil {
		t.Fatalf("the plan was not saved in the -chdir directory: %v", err)
	}
	if _, err := os.Stat("saved.plan"); err == nil {
		t.Fatal("the plan was saved in the caller's directory")
	}
	if got := run("show", "-no-color", "saved.plan"); !strings.Contains(got, "Cpus >= 3") {
		t.Fatalf("show of the saved plan lacks the -var-file's value:\n%s", got)
	}
}
