package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// htcondorAs is htcondor run as the local user uid (FS proves it), with
// the schedd found through the collector at ADDR as SCHEDD.
func htcondorAs(t *testing.T, addr string, uid uint32, program string) (map[string]any, error) {
	t.Helper()
	src := "import htcondor2, classad2, json, os, sys\n" +
		"htcondor2.param['SEC_CLIENT_AUTHENTICATION_METHODS'] = 'FS'\n" +
		"ADDR = os.environ['ADDR']\n" +
		"SCHEDD = htcondor2.Schedd(htcondor2.Collector(ADDR).locate(htcondor2.DaemonType.Schedd))\n" +
		"OUT = {}\n" + program + "\nprint(json.dumps(OUT, default=str))\n"
	cmd := exec.Command("python3", "-c", src)
	home := t.TempDir()
	if uid != 0 {
		home = "/tmp"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	cmd.Env = append(os.Environ(), "ADDR="+addr, "HOME="+home)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	got := map[string]any{}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	return got, nil
}

// TestCEDARScheddProtocol drives a pond schedd with HTCondor's own Python
// client, found through the collector: submit of one job and of 1,000
// procs with itemdata through the queue-management protocol, queries with
// constraint and projection, hold with a reason, release, edit, remove,
// history, and the job event log read by htcondor2.JobEventLog. A submit
// whose connection drops before its commit leaves nothing; a user may not
// act on another's jobs nor submit as another; a malformed attribute
// fails its whole submit.
func TestCEDARScheddProtocol(t *testing.T) {
	t.Parallel()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", cedarPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	logDir := t.TempDir()
	if err := os.Chmod(logDir, 0o777); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(logDir, "job.log")

	// One job, held from the start so that it stays in the queue.
	eventually(t, 60*time.Second, func() error {
		_, err := htcondorAs(t, cm, 0, `OUT['n'] = len(SCHEDD.query())`)
		return err
	})
	got, err := htcondorAs(t, cm, 0, `
r = SCHEDD.submit(htcondor2.Submit({'executable': '/bin/sleep', 'arguments': '300', 'hold': 'true', 'log': '`+logPath+`'}))
OUT['cluster'] = r.cluster()
OUT['procs'] = r.num_procs()
`)
	if err != nil {
		t.Fatal(err)
	}
	one := int(got["cluster"].(float64))
	if got["procs"].(float64) != 1 {
		t.Fatalf("submit of one job: %v", got)
	}

	// 1,000 procs with itemdata in one transaction.
	got, err = htcondorAs(t, cm, 0, `
sub = htcondor2.Submit({'executable': '/bin/true', 'arguments': '$(x)', 'hold': 'true', 'MY.Item': '"$(x)"'})
r = SCHEDD.submit(sub, itemdata=iter([{'x': str(i)} for i in range(1000)]))
OUT['cluster'] = r.cluster()
OUT['procs'] = r.num_procs()
`)
	if err != nil {
		t.Fatal(err)
	}
	big := int(got["cluster"].(float64))
	if got["procs"].(float64) != 1000 {
		t.Fatalf("submit of 1000 procs: %v", got)
	}

	// Query with constraint, projection and limit.
	got, err = htcondorAs(t, cm, 0, fmt.Sprintf(`
ads = SCHEDD.query(constraint='ClusterId == %d && ProcId == 7', projection=['ProcId', 'Item', 'Owner'])
OUT['ads'] = [dict(a) for a in ads]
OUT['count'] = len(SCHEDD.query(constraint='ClusterId == %d', projection=['ProcId']))
OUT['limited'] = len(SCHEDD.query(constraint='ClusterId == %d', limit=5))
`, big, big, big))
	if err != nil {
		t.Fatal(err)
	}
	ads := got["ads"].([]any)
	if len(ads) != 1 || ads[0].(map[string]any)["Item"] != "7" || ads[0].(map[string]any)["Owner"] != "root" || len(ads[0].(map[string]any)) != 3 {
		t.Errorf("query with constraint and projection: %v", ads)
	}
	if got["count"].(float64) != 1000 || got["limited"].(float64) != 5 {
		t.Errorf("query counts: %v", got)
	}

	// Another user may neither act on root's jobs nor submit as root
	// (where that user can run the Python client at all).
	if othersRun := exec.Command("runuser", "-u", "nobody", "--", "python3", "-c", "import htcondor2").Run() == nil; !othersRun {
		t.Log("user nobody cannot run the htcondor Python client here: the other-user checks are skipped")
	} else if got, err = htcondorAs(t, cm, 65534, fmt.Sprintf(`
r = SCHEDD.act(htcondor2.JobAction.Remove, '%d.0')
OUT['denied'] = r['TotalPermissionDenied']
OUT['success'] = r['TotalSuccess']
try:
    SCHEDD.submit(htcondor2.Submit({'executable': '/bin/true', 'MY.Owner': '"root"'}))
    OUT['submitted_as_root'] = True
except Exception as e:
    OUT['submit_error'] = str(e)
`, one)); err != nil {
		t.Fatal(err)
	} else if got["denied"].(float64) != 1 || got["success"].(float64) != 0 || got["submitted_as_root"] != nil {
		t.Errorf("another user acting on root's jobs: %v", got)
	}

	// Release with a reason, hold again with one, edit, query.
	got, err = htcondorAs(t, cm, 0, fmt.Sprintf(`
r = SCHEDD.act(htcondor2.JobAction.Release, '%[1]d.0', reason=('released by the test', 0))
OUT['released'] = r['TotalSuccess']
r = SCHEDD.act(htcondor2.JobAction.Hold, 'ClusterId == %[1]d', reason=('held by the test', 0))
OUT['held'] = r['TotalSuccess']
OUT['edited'] = SCHEDD.edit('%[1]d.0', 'Colour', '"blue"')
ad = SCHEDD.query(constraint='ClusterId == %[1]d', projection=['JobStatus', 'HoldReason', 'Colour'])[0]
OUT['ad'] = dict(ad)
`, one))
	if err != nil {
		t.Fatal(err)
	}
	ad := got["ad"].(map[string]any)
	if got["released"].(float64) != 1 || got["held"].(float64) != 1 || ad["JobStatus"].(float64) != 5 ||
		!strings.Contains(fmt.Sprint(ad["HoldReason"]), "held by the test") || ad["Colour"] != "blue" {
		t.Errorf("release, hold, edit: %v", got)
	}

	// A malformed attribute fails its whole submit: nothing is queued.
	got, err = htcondorAs(t, cm, 0, `
try:
    SCHEDD.submit(htcondor2.Submit({'executable': '/bin/true', 'MY.Bad': '(((('}), count=3)
    OUT['submitted'] = True
except Exception as e:
    OUT['error'] = str(e)
OUT['jobs'] = len(SCHEDD.query(projection=['ProcId']))
`)
	if err != nil {
		t.Fatal(err)
	}
	if got["submitted"] != nil || got["jobs"].(float64) != 1001 {
		t.Errorf("malformed submit: %v", got)
	}

	// Remove with a reason; the job moves to the history.
	got, err = htcondorAs(t, cm, 0, fmt.Sprintf(`
r = SCHEDD.act(htcondor2.JobAction.Remove, [ '%[1]d.0' ], reason=('removed by the test', 0))
OUT['removed'] = r['TotalSuccess']
h = SCHEDD.history(constraint='ClusterId == %[1]d', projection=['ClusterId', 'JobStatus', 'RemoveReason'], match=10)
OUT['history'] = [dict(a) for a in h]
OUT['queued'] = len(SCHEDD.query(constraint='ClusterId == %[1]d'))
`, one))
	if err != nil {
		t.Fatal(err)
	}
	hist := got["history"].([]any)
	if got["removed"].(float64) != 1 || got["queued"].(float64) != 0 || len(hist) != 1 ||
		!strings.Contains(fmt.Sprint(hist[0].(map[string]any)["RemoveReason"]), "removed by the test") {
		t.Errorf("remove and history: %v", got)
	}

	// The job's event log, as htcondor2.JobEventLog reads it.
	got, err = htcondorAs(t, cm, 0, `
OUT['events'] = [htcondor2.JobEventType(e.type).name for e in htcondor2.JobEventLog('`+logPath+`').events(0)]
`)
	if err != nil {
		t.Fatal(err)
	}
	events := fmt.Sprint(got["events"])
	for _, want := range []string{"SUBMIT", "JOB_RELEASED", "JOB_HELD", "JOB_ABORTED"} {
		if !strings.Contains(events, want) {
			t.Errorf("job log events %s lack %s", events, want)
		}
	}
	_ = big
}
