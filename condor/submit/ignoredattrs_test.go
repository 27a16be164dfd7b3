package submit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noAttrCommands are the ignored commands of IgnoredCommands with no
// entry in IgnoredAttrs: HTCondor's clients make no attribute of them.
var noAttrCommands = setOf("copy_to_spool", "job_batch_id", "skip_filechecks", "want_remote_io")

// TestIgnoredAttrsCoverCommands: every ignored command has its attribute
// in IgnoredAttrs or is known to make none pond ignores, and
// docs/compatibility.md names every attribute.
func TestIgnoredAttrsCoverCommands(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	byCommand := map[string]bool{}
	for _, a := range IgnoredAttrs {
		byCommand[a.Command] = true
		if !strings.Contains(string(doc), "`"+a.Attr+"`") {
			t.Errorf("docs/compatibility.md does not name the ignored attribute `%s`", a.Attr)
		}
	}
	for _, c := range IgnoredCommands {
		if _, none := noAttrCommands[c]; !byCommand[c] && !none {
			t.Errorf("ignored command %s has no attribute in IgnoredAttrs", c)
		}
	}
}

// TestIgnored: which values of a job's ad ask for what pond does not do.
func TestIgnored(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		ad   map[string]string
		want string
	}{
		{"none", map[string]string{"cmd": `"/bin/true"`, "jobprio": "5"}, ""},
		{"values", map[string]string{"buffersize": "524288", "coresize": "0", "dockerimage": `"debian"`}, "BufferSize (buffer_size), CoreSize (coresize), DockerImage (docker_image)"},
		{"false asks for nothing", map[string]string{"runasowner": "false", "loadprofile": " FALSE ", "periodicvacate": "false"}, ""},
		{"true asks", map[string]string{"runasowner": "true", "periodicvacate": "JobStatus == 2"}, "PeriodicVacate (periodic_vacate), RunAsOwner (run_as_owner)"},
		{"undefined", map[string]string{"coresize": "undefined"}, ""},
		{"transfer of /dev/null", map[string]string{"transferin": "false", "in": `"/dev/null"`, "transferout": "false", "transfererr": "false", "err": `""`}, ""},
		{"transfer of a file", map[string]string{"transferin": "false", "in": `"data"`, "transferout": "true", "out": `"out"`}, "TransferIn (transfer_input)"},
	} {
		got := IgnoredText(Ignored(func(k string) (string, bool) { v, ok := c.ad[k]; return v, ok }))
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if !IsIgnoredAttr("BUFFERSIZE") || IsIgnoredAttr("JobLeaseDuration") {
		t.Errorf("IsIgnoredAttr: BufferSize is, JobLeaseDuration is not")
	}
}
