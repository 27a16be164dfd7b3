package daemon_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// TestJobLogReadByHTCondor has HTCondor's own Python bindings read the job
// event log a pool run wrote: submit, execute, image size, terminated with
// return values, held, released and aborted events.
func TestJobLogReadByHTCondor(t *testing.T) {
	t.Parallel()
	mod := ""
	for _, m := range []string{"htcondor2", "htcondor"} {
		if exec.Command("python3", "-c", "import "+m).Run() == nil {
			mod = m
			break
		}
	}
	if mod == "" {
		testenv.SkipOrFail(t, "HTCondor Python bindings not available: pip install htcondor")
	}
	cm, _ := pool(t, 1, nil)
	dir := t.TempDir()
	submitFile(t, cm, dir, "executable = /bin/sh\narguments = \"-c 'exit $(Process)'\"\nlog = job.log\nqueue 2\n")
	waitDone(t, cm, 30*time.Second)
	c := submitFile(t, cm, dir, "executable = /bin/sleep\narguments = 60\nlog = job.log\nhold = true\nqueue\n")
	act(t, cm, "release", c)
	act(t, cm, "remove", c)
	script := `
import sys
import ` + mod + ` as htcondor
for e in htcondor.JobEventLog(sys.argv[1]).events(stop_after=0):
    extra = ""
    if e.type == htcondor.JobEventType.JOB_TERMINATED:
        extra = " rv=%d" % e["ReturnValue"]
    print("%d.%d %s%s" % (e.cluster, e.proc, e.type.name, extra))
`
	out, err := exec.Command("python3", "-c", script, filepath.Join(dir, "job.log")).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"1.0 SUBMIT", "1.1 SUBMIT", "1.0 EXECUTE", "1.0 IMAGE_SIZE", "1.0 JOB_TERMINATED rv=0",
		"1.1 JOB_TERMINATED rv=1", "2.0 SUBMIT", "2.0 JOB_RELEASED", "2.0 JOB_ABORTED"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("HTCondor's reader did not see %q in:\n%s", want, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "job.log")); t.Failed() {
		t.Logf("log:\n%s", b)
	}
}
