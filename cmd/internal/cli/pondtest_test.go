package cli

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
)

// TestDecodeTestFileErrors checks that each mistake in a test file is
// refused with its file, line and column.
func TestDecodeTestFileErrors(t *testing.T) {
	tests := []struct {
		name, src, summary, at string
	}{
		{"syntax", "run \"a\" {\n  command = \n}\n", "Invalid expression", "t.pondtest.hcl:2,13"},
		{"unknown block", "provider \"local\" {}\n", "Unsupported block type", "t.pondtest.hcl:1,1"},
		{"unknown argument", "run \"a\" {\n  module = 1\n}\n", "Unsupported argument", "t.pondtest.hcl:2,3"},
		{"bad command", "run \"a\" {\n  command = \"apply\"\n}\n", "Invalid run command", "t.pondtest.hcl:2,13"},
		{"other command", "run \"a\" {\n  command = destroy\n}\n", "Invalid run command", "t.pondtest.hcl:2,13"},
		{"duplicate run", "run \"a\" {}\nrun \"a\" {}\n", "Duplicate run block", "t.pondtest.hcl:2,5"},
		{"bad run name", "run \"1a\" {}\n", "Invalid run block name", "t.pondtest.hcl:1,5"},
		{"two variables blocks", "variables {}\nvariables {}\n", "Duplicate variables block", "t.pondtest.hcl:2,1"},
		{"assert without message", "run \"a\" {\n  assert {\n    condition = true\n  }\n}\n", "Missing required argument", "t.pondtest.hcl:2,10"},
		{"expect_failures not a list", "run \"a\" {\n  expect_failures = var.x\n}\n", "Invalid expression", "t.pondtest.hcl:2,21"},
		{"expect_failures of an output", "run \"a\" {\n  expect_failures = [output.x]\n}\n", "Invalid expect_failures reference", "t.pondtest.hcl:2,22"},
		{"expect_failures of a check's assertion", "run \"a\" {\n  expect_failures = [check.x.y]\n}\n", "Invalid expect_failures reference", "t.pondtest.hcl:2,22"},
		{"expect_failures of a value", "run \"a\" {\n  expect_failures = [\"var.x\"]\n}\n", "Invalid expression", "t.pondtest.hcl:2,22"},
		{"variables nested block", "variables {\n  x {}\n}\n", "Unexpected \"x\" block", "t.pondtest.hcl:2,3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.pondtest.hcl")
			if err := os.WriteFile(path, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, diags := decodeTestFile(hclparse.NewParser(), path, "t.pondtest.hcl")
			if !diags.HasErrors() {
				t.Fatalf("no error for %q", tt.src)
			}
			d := diags[0]
			at := ""
			if d.Subject != nil {
				at = d.Subject.Filename + ":" + strconv.Itoa(d.Subject.Start.Line) + "," + strconv.Itoa(d.Subject.Start.Column)
			}
			if !strings.HasPrefix(d.Summary, tt.summary) || at != tt.at {
				t.Fatalf("error %q at %q, want %q at %q (%s)", d.Summary, at, tt.summary, tt.at, d.Detail)
			}
		})
	}
}

// TestDecodeTestFile checks a valid file's decoding: the runs in order,
// apply by default, their asserts and expected failures.
func TestDecodeTestFile(t *testing.T) {
	src := `variables {
  nodes = 2
}
run "first" {
  command = plan
  variables {
    nodes = 3
  }
  assert {
    condition     = pool.p.nodes == 3
    error_message = "three"
  }
  assert {
    condition     = true
    error_message = "always"
  }
}
run "second" {
  expect_failures = [var.nodes, var.other]
}
`
	path := filepath.Join(t.TempDir(), "t.pondtest.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	f, diags := decodeTestFile(hclparse.NewParser(), path, "t.pondtest.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(f.Variables) != 1 || f.Variables["nodes"] == nil || len(f.Runs) != 2 {
		t.Fatalf("file %+v", f)
	}
	a, b := f.Runs[0], f.Runs[1]
	if a.Name != "first" || a.Command != testPlan || len(a.Asserts) != 2 || len(a.Variables) != 1 || a.DeclRange.Start.Line != 4 {
		t.Errorf("first run %+v", a)
	}
	if b.Name != "second" || b.Command != testApply || len(b.ExpectFailures) != 2 || b.ExpectFailures[1].RootName() != "var" {
		t.Errorf("second run %+v", b)
	}
}

// FuzzDecodeTestFile checks that no test file makes the decoder panic,
// and that a refusal always says why.
func FuzzDecodeTestFile(f *testing.F) {
	for _, s := range []string{
		"run \"a\" {\n  command = plan\n  assert {\n    condition = true\n    error_message = \"x\"\n  }\n}\n",
		"variables {\n  a = 1\n}\nrun \"b\" {\n  expect_failures = [var.a]\n}\n",
		"run \"a\" {\n  expect_failures = [var.a.b, var[0]]\n}\n",
		"run {}\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, src string) {
		path := filepath.Join(dir, "f.pondtest.hcl")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		tf, diags := decodeTestFile(hclparse.NewParser(), path, "f.pondtest.hcl")
		for _, d := range diags {
			if d.Summary == "" {
				t.Fatalf("a diagnostic without a summary: %+v", d)
			}
		}
		if tf != nil {
			for _, r := range tf.Runs {
				if r.Command != testPlan && r.Command != testApply {
					t.Fatalf("run %q has command %q", r.Name, r.Command)
				}
			}
		}
	})
}

// planTestConfig is a pool whose runs only plan: nothing starts.
const planTestConfig = `variable "nodes" {
  type    = number
  default = 1
  validation {
    condition     = var.nodes > 0
    error_message = "nodes must be positive"
  }
}
pool "tp" {
  nodes = var.nodes
}
output "nodes" {
  value = pool.tp.nodes
}
`

// TestPondTestPlanRuns runs pondctl test on plan-only runs: one that
// passes, one whose assert fails, one whose expected validation failure
// happens, one whose does not; the exit code, the text, the JSON stream
// and the JUnit report say which.
func TestPondTestPlanRuns(t *testing.T) {
	dir := configDir(t, planTestConfig)
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := `variables {
  nodes = 2
}
run "planned" {
  command = plan
  assert {
    condition     = pool.tp.nodes == 2 && output.nodes == 2 && var.nodes == 2
    error_message = "two nodes"
  }
}
run "wrong" {
  command = plan
  variables {
    nodes = 3
  }
  assert {
    condition     = pool.tp.nodes == 4
    error_message = "pool.tp has ${pool.tp.nodes} nodes"
  }
}
run "refused" {
  command = plan
  variables {
    nodes = 0
  }
  expect_failures = [var.nodes]
}
run "not_refused" {
  command = plan
  expect_failures = [var.nodes]
}
`
	if err := os.WriteFile(filepath.Join(dir, "tests", "plan.pondtest.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := pondctl(t, dir, nil, "test", "-no-color", "-junit-xml=report.xml")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"tests/plan.pondtest.hcl... in progress",
		`run "planned"... pass`,
		`run "wrong"... fail`,
		`run "refused"... pass`,
		`run "not_refused"... fail`,
		"tests/plan.pondtest.hcl... fail",
		"Failure! 2 passed, 2 failed.",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{
		"Test assertion failed", "on tests/plan.pondtest.hcl line 17, in run \"wrong\"", "pool.tp has 3 nodes",
		"Missing expected failure", "on tests/plan.pondtest.hcl line 30, in run \"not_refused\"",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("errors lack %q:\n%s", want, stderr)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var rep junitSuites
	if err := xml.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("%v:\n%s", err, raw)
	}
	if len(rep.Suites) != 1 || rep.Suites[0].Tests != 4 || rep.Suites[0].Failures != 2 || rep.Suites[0].Errors != 0 {
		t.Fatalf("report %+v", rep)
	}
	for i, want := range []bool{false, true, false, true} {
		c := rep.Suites[0].Cases[i]
		if (c.Failure != nil) != want {
			t.Errorf("case %s: failure %+v, want %v", c.Name, c.Failure, want)
		}
	}
	if !strings.Contains(rep.Suites[0].Cases[1].Failure.Body, "pool.tp has 3 nodes") {
		t.Errorf("the failure does not say why:\n%s", rep.Suites[0].Cases[1].Failure.Body)
	}

	// The same as the machine-readable UI.
	code, stdout, stderr = pondctl(t, dir, nil, "test", "-json")
	if code != 1 || stderr != "" {
		t.Fatalf("test -json: exit code %d, stderr:\n%s", code, stderr)
	}
	status := map[string]string{}
	var summary map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m struct {
			Type    string `json:"type"`
			TestRun *struct {
				Run, Progress, Status string
			} `json:"test_run"`
			TestSummary map[string]any `json:"test_summary"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if m.TestRun != nil && m.TestRun.Progress == "complete" {
			status[m.TestRun.Run] = m.TestRun.Status
		}
		if m.Type == "test_summary" {
			summary = m.TestSummary
		}
	}
	if status["planned"] != "pass" || status["wrong"] != "fail" || status["refused"] != "pass" || status["not_refused"] != "fail" {
		t.Errorf("run statuses %v", status)
	}
	if summary["status"] != "fail" || summary["passed"] != 2.0 || summary["failed"] != 2.0 {
		t.Errorf("summary %v", summary)
	}
}

// TestPondTestVariableErrorAtTest checks that a test value a variable's
// validation refuses, unexpected, errors the run at the value's line in
// the test file, and skips the runs after it.
func TestPondTestVariableErrorAtTest(t *testing.T) {
	dir := configDir(t, planTestConfig)
	src := "run \"zero\" {\n  command = plan\n  variables {\n    nodes = 0\n  }\n}\nrun \"after\" {\n  command = plan\n}\nrun \"undeclared\" {\n  variables {\n    nope = 1\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "v.pondtest.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := pondctl(t, dir, nil, "test", "-no-color")
	if code != 1 {
		t.Fatalf("exit code %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{`run "zero"... error`, `run "after"... skip`, `run "undeclared"... skip`, "Failure! 0 passed, 1 failed, 2 skipped."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"Invalid value for variable", "on v.pondtest.hcl line 4, in run \"zero\"", "nodes must be positive", "(from the test file v.pondtest.hcl)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("error lacks %q:\n%s", want, stderr)
		}
	}
}

// TestPondTestExpectCheckFailures runs plan runs whose expect_failures
// names a check block: the run passes when the check fails (its warning
// not shown), fails when it passes or names no check block; a failing
// check a run does not expect is a warning, and the run passes.
func TestPondTestExpectCheckFailures(t *testing.T) {
	dir := configDir(t, planTestConfig+`check "small" {
  assert {
    condition     = var.nodes < 3
    error_message = "too many nodes: ${var.nodes}"
  }
}
`)
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := `run "expected" {
  command = plan
  variables {
    nodes = 5
  }
  expect_failures = [check.small]
}
run "not_failing" {
  command = plan
  expect_failures = [check.small]
}
run "undeclared" {
  command = plan
  variables {
    nodes = 6
  }
  expect_failures = [check.large]
}
run "unexpected" {
  command = plan
  variables {
    nodes = 4
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "tests", "check.pondtest.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := pondctl(t, dir, nil, "test", "-no-color")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		`run "expected"... pass`,
		`run "not_failing"... fail`,
		`run "undeclared"... fail`,
		`run "unexpected"... pass`,
		"Failure! 2 passed, 2 failed.",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{
		"Missing expected failure", "expected check.small to fail", `on tests/check.pondtest.hcl line 10, in run "not_failing"`,
		"Reference to undeclared check block", "check.large",
		"too many nodes: 4", "too many nodes: 6",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("errors lack %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout+stderr, "too many nodes: 5") {
		t.Errorf("the expected check failure was shown:\n%s%s", stdout, stderr)
	}
}
