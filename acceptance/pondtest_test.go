package acceptance

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testedPool = `
variable "nodes" {
  type    = number
  default = 1
}

pool "tested" {
  nodes = var.nodes
}

output "cm" {
  value = pool.tested.central_manager
}
`

// applyThenFail applies a pool of two nodes and checks it, then fails an
// assert on it, then plans once more: the pool runs between the runs and
// is destroyed after the failure.
const applyThenFail = `
variables {
  nodes = 2
}

run "up" {
  assert {
    condition     = length(pool.tested.node_details) == 2
    error_message = "the pool has ${length(pool.tested.node_details)} nodes"
  }
  assert {
    condition     = startswith(output.cm, "127.0.0.1:")
    error_message = "the central manager is at ${output.cm}"
  }
}

run "wrong" {
  command = plan
  assert {
    condition     = length(run.up.cm) == 0
    error_message = "the central manager of run up is ${run.up.cm}"
  }
}

run "still_up" {
  command = plan
  assert {
    condition     = pool.tested.nodes == 2
    error_message = "planned ${pool.tested.nodes} nodes"
  }
}
`

// TestPondTestAppliesAndCleansUp runs pondctl test against a real local
// pool: a run that applies and passes, one that fails, one that passes
// after it; the exit code is 1, the JUnit report has one failure, and no
// agent of the test's pool is left running.
func TestPondTestAppliesAndCleansUp(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", testedPool)
	if err := os.Mkdir(filepath.Join(w.dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("tests/pool.pondtest.hcl", applyThenFail)

	r := w.expect(1, "test", "-no-color", "-junit-xml", "report.xml")
	for _, want := range []string{
		`run "up"... pass`, `run "wrong"... fail`, `run "still_up"... pass`,
		"tests/pool.pondtest.hcl... tearing down", "tests/pool.pondtest.hcl... fail",
		"Failure! 2 passed, 1 failed.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("output lacks %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stderr, "the central manager of run up is 127.0.0.1:") || !strings.Contains(r.stderr, `on tests/pool.pondtest.hcl line 20, in run "wrong"`) {
		t.Fatalf("the failure does not say why, where:\n%s", r.stderr)
	}
	raw, err := os.ReadFile(filepath.Join(w.dir, "report.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Suites []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Errors   int    `xml:"errors,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Body    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, raw)
	}
	if len(rep.Suites) != 1 || rep.Suites[0].Name != "tests/pool.pondtest.hcl" || rep.Suites[0].Tests != 3 || rep.Suites[0].Failures != 1 || rep.Suites[0].Errors != 0 {
		t.Fatalf("report:\n%s", raw)
	}
	failed := 0
	for _, c := range rep.Suites[0].Cases {
		if c.Failure != nil {
			failed++
			if c.Name != "wrong" || !strings.Contains(c.Failure.Body, "the central manager of run up is") {
				t.Errorf("failure of %s: %+v", c.Name, c.Failure)
			}
		}
	}
	if failed != 1 {
		t.Fatalf("%d failed test cases, want 1:\n%s", failed, raw)
	}
	if pids := agentPIDs(w.dir); len(pids) != 0 {
		t.Fatalf("agents %v of the test's pool still run", pids)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "pond.state")); !os.IsNotExist(err) {
		t.Fatalf("the test wrote the working directory's state: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "errored_test.pond.state")); !os.IsNotExist(err) {
		t.Fatalf("a clean clean-up left errored_test.pond.state: %v", err)
	}

	// With the pool applied for real, the test may not take its name: the
	// clean-up would stop it.
	w.expect(0, "apply", "-auto-approve")
	before := agentPIDs(w.dir)
	r = w.expect(1, "test", "-no-color")
	if !strings.Contains(r.stderr, "Test would take a managed resource's name") || !strings.Contains(r.stdout, `run "up"... error`) {
		t.Fatalf("test over an applied pool:\n%s", r)
	}
	if after := agentPIDs(w.dir); len(after) != len(before) || len(after) != 1 {
		t.Fatalf("agents %v after the refused test, were %v", after, before)
	}
	w.expect(0, "destroy", "-auto-approve")
}
