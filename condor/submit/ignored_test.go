package submit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIgnoredCommandsWarn: a command pond takes but does not act on draws
// a warning naming it, where it is written; one pond acts on does not.
func TestIgnoredCommandsWarn(t *testing.T) {
	t.Parallel()
	f, err := Parse("job.sub", []byte("executable = /bin/true\nbuffer_size = 5\npriority = 5\noutput = out\n  CoreSize = 0\nkill_sig = SIGINT\nqueue\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range f.Warnings() {
		got = append(got, w.String())
	}
	want := []string{
		"job.sub:2:1: WARNING: submit command buffer_size is not supported by pond and is ignored",
		"job.sub:5:3: WARNING: submit command coresize is not supported by pond and is ignored",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIgnoredCommandsListed: every ignored command is one condor_submit
// knows, and docs/compatibility.md names it.
func TestIgnoredCommandsListed(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range IgnoredCommands {
		if _, ok := knownCommands[c]; !ok {
			t.Errorf("ignored command %s is not a known command", c)
		}
		if !strings.Contains(string(doc), "`"+c+"`") {
			t.Errorf("docs/compatibility.md does not list the ignored submit command `%s`", c)
		}
	}
}

// TestActedOnCommandsDoNotWarn: dagman_log and job_lease_duration, which
// the schedd acts on, draw no warning and set DAGManNodesLog (in the
// job's Iwd) and JobLeaseDuration, as condor_submit does;
// job_machine_attrs_history_length, which condor_submit knows, is
// ignored, not a typo.
func TestActedOnCommandsDoNotWarn(t *testing.T) {
	t.Parallel()
	src := "executable = /bin/true\ndagman_log = nodes.log\njob_lease_duration = 60\njob_machine_attrs_history_length = 3\nqueue\n"
	f, err := Parse("job.sub", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range f.Warnings() {
		got = append(got, w.String())
	}
	if want := "job.sub:4:1: WARNING: submit command job_machine_attrs_history_length is not supported by pond and is ignored"; strings.Join(got, "\n") != want {
		t.Errorf("warnings %q, want only %q", got, want)
	}
	j := jobsT(t, src)[0]
	if j["DAGManNodesLog"] != `"/sub/nodes.log"` || j["JobLeaseDuration"] != "60" {
		t.Errorf("DAGManNodesLog %s, JobLeaseDuration %s: want \"/sub/nodes.log\", 60", j["DAGManNodesLog"], j["JobLeaseDuration"])
	}
}
