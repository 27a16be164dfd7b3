package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// clientsProgram makes, with HTCondor's Python bindings and nothing but
// CONDOR_CONFIG, each call of the bindings pond answers, and prints what
// each returned, or the client's error, by the call's name.
const clientsProgram = `
import htcondor2 as h, json, sys, time
LOG = sys.argv[1]
OUT = {}
def call(name, f):
    try:
        OUT[name] = f()
    except Exception as e:
        OUT[name] = {'error': '%s: %s' % (type(e).__name__, e)}
c = h.Collector()
for t in ['Startd', 'Schedd', 'Negotiator', 'Collector', 'Any', 'StartDaemon']:
    call('Collector.query(AdType.%s)' % t, lambda: sorted(a.get('MyType', '') for a in c.query(getattr(h.AdType, t))))
call('Collector.query(constraint, projection)', lambda: [dict(a) for a in c.query(h.AdType.Startd, constraint='SlotID == 2', projection=['Name', 'Cpus'])])
call('Collector.locate(Collector)', lambda: c.locate(h.DaemonType.Collector)['MyAddress'])
call('Collector.locate(Schedd)', lambda: c.locate(h.DaemonType.Schedd)['MyAddress'])
call('Collector.locate(Negotiator, name)', lambda: c.locate(h.DaemonType.Negotiator, 'cedar-0')['MyAddress'])
call('Collector.locateAll(Schedd)', lambda: [a['Name'] for a in c.locateAll(h.DaemonType.Schedd)])
call('Collector.directQuery(Schedd)', lambda: dict(c.directQuery(h.DaemonType.Schedd, projection=['Name', 'MyType'])))
s = h.Schedd()
call('Schedd.submit', lambda: s.submit(h.Submit({'executable': '/bin/sleep', 'arguments': '300', 'hold': 'true', 'log': LOG})).cluster())
one = OUT['Schedd.submit']
call('Schedd.submit(count, itemdata)', lambda: s.submit(h.Submit({'executable': '/bin/true', 'arguments': '$(x)', 'hold': 'true', 'MY.Item': '"$(x)"'}), itemdata=iter([{'x': str(i)} for i in range(5)])).num_procs())
call('Schedd.query', lambda: sorted(a['Item'] for a in s.query(constraint='Item isnt undefined', projection=['Item'])))
call('Schedd.act(Release)', lambda: s.act(h.JobAction.Release, '%d.0' % one)['TotalSuccess'])
call('Schedd.act(Hold)', lambda: s.act(h.JobAction.Hold, 'ClusterId == %d' % one, reason=('held by the test', 0))['TotalSuccess'])
call('Schedd.edit', lambda: s.edit('%d.0' % one, 'Colour', '"blue"') and [dict(a) for a in s.query(constraint='ClusterId == %d' % one, projection=['Colour', 'JobStatus'])])
call('Schedd.act(Remove)', lambda: s.act(h.JobAction.Remove, ['%d.0' % one], reason=('removed by the test', 0))['TotalSuccess'])
call('Schedd.history', lambda: [a.get('RemoveReason', '') for a in s.history(constraint='ClusterId == %d' % one, projection=['RemoveReason'], match=5)])
call('JobEventLog', lambda: [h.JobEventType(e.type).name for e in h.JobEventLog(LOG).events(0)])
def submitters():
    # The schedd advertises its owners' jobs within a second or two: wait
    # for an ad that counts the five held jobs, not an earlier one.
    ads = []
    for _ in range(60):
        ads = [dict(a) for a in c.query(h.AdType.Submitter, projection=['Owner', 'HeldJobs'])]
        if any(a.get('HeldJobs') == 5 for a in ads):
            break
        time.sleep(0.5)
    return ads
call('Collector.query(AdType.Submitter)', submitters)
print(json.dumps(OUT, default=str))
`

// TestHTCondorClientCalls counts the calls of HTCondor's Python bindings
// and `htcondor` tool that work against a pond pool with only
// CONDOR_CONFIG set, to what `pondctl condor client-config` wrote: each
// call is asserted on what it answered, not only that it did not fail
// (the htcondor tool exits 0 after printing an error).
func TestHTCondorClientCalls(t *testing.T) {
	t.Parallel()
	if exec.Command("python3", "-c", "import htcondor2, htcondor_cli").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", cedarPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	dir := t.TempDir()
	w.expect(0, "condor", "client-config", "-pool", cm, "-dir", filepath.Join(dir, "client"))
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"CONDOR_CONFIG=" + filepath.Join(dir, "client", "condor_config"), "PATH=/usr/bin:/bin", "HOME=" + home}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(py, args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	htcondor := func(args ...string) string {
		t.Helper()
		return run(append([]string{"-c", "import sys; from htcondor_cli.cli import main; sys.argv[0] = 'htcondor'; main()"}, args...)...)
	}
	// The pool is up once the tool sees both slots and the schedd.
	eventually(t, 60*time.Second, func() error {
		if out := htcondor("ep", "status", "cedar-0"); !strings.Contains(out, "Total slots: 2") {
			return fmt.Errorf("ep status: %s", out)
		}
		return nil
	})

	var calls []string
	check := func(name string, ok bool, got any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %v", name, got)
			return
		}
		calls = append(calls, name)
	}

	logPath := filepath.Join(dir, "bindings.log")
	raw := run("-c", clientsProgram, logPath)
	lines := strings.Split(strings.TrimSpace(raw), "\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	str := func(k string) string { return fmt.Sprint(got[k]) }
	sinful := "<" + cm + ">"
	check("Collector.query(AdType.Startd)", str("Collector.query(AdType.Startd)") == "[Machine Machine]", got["Collector.query(AdType.Startd)"])
	check("Collector.query(AdType.Schedd)", str("Collector.query(AdType.Schedd)") == "[Scheduler]", got["Collector.query(AdType.Schedd)"])
	check("Collector.query(AdType.Negotiator)", str("Collector.query(AdType.Negotiator)") == "[Negotiator]", got["Collector.query(AdType.Negotiator)"])
	check("Collector.query(AdType.Collector)", str("Collector.query(AdType.Collector)") == "[Collector]", got["Collector.query(AdType.Collector)"])
	check("Collector.query(AdType.Submitter)", str("Collector.query(AdType.Submitter)") == "[map[HeldJobs:5 Owner:root]]", got["Collector.query(AdType.Submitter)"])
	check("Collector.query(AdType.Any)", strings.Contains(str("Collector.query(AdType.Any)"), "Machine Machine Negotiator Scheduler"), got["Collector.query(AdType.Any)"])
	check("Collector.query(AdType.StartDaemon)", str("Collector.query(AdType.StartDaemon)") == "[StartD]", got["Collector.query(AdType.StartDaemon)"])
	check("Collector.query(constraint, projection)", str("Collector.query(constraint, projection)") == "[map[Cpus:1 Name:slot2@cedar-0]]", got["Collector.query(constraint, projection)"])
	check("Collector.locate(Collector)", str("Collector.locate(Collector)") == sinful, got["Collector.locate(Collector)"])
	check("Collector.locate(Schedd)", str("Collector.locate(Schedd)") == sinful, got["Collector.locate(Schedd)"])
	check("Collector.locate(Negotiator, name)", str("Collector.locate(Negotiator, name)") == sinful, got["Collector.locate(Negotiator, name)"])
	check("Collector.locateAll(Schedd)", str("Collector.locateAll(Schedd)") == "[cedar-0]", got["Collector.locateAll(Schedd)"])
	check("Collector.directQuery(Schedd)", str("Collector.directQuery(Schedd)") == "map[MyType:Scheduler Name:cedar-0]", got["Collector.directQuery(Schedd)"])
	_, isCluster := got["Schedd.submit"].(float64)
	check("Schedd.submit", isCluster, got["Schedd.submit"])
	check("Schedd.submit(count, itemdata)", str("Schedd.submit(count, itemdata)") == "5", got["Schedd.submit(count, itemdata)"])
	check("Schedd.query", str("Schedd.query") == "[0 1 2 3 4]", got["Schedd.query"])
	check("Schedd.act(Release)", str("Schedd.act(Release)") == "1", got["Schedd.act(Release)"])
	check("Schedd.act(Hold)", str("Schedd.act(Hold)") == "1", got["Schedd.act(Hold)"])
	check("Schedd.edit", str("Schedd.edit") == "[map[Colour:blue JobStatus:5]]", got["Schedd.edit"])
	check("Schedd.act(Remove)", str("Schedd.act(Remove)") == "1", got["Schedd.act(Remove)"])
	check("Schedd.history", strings.Contains(str("Schedd.history"), "removed by the test"), got["Schedd.history"])
	ev := str("JobEventLog")
	check("JobEventLog", strings.Contains(ev, "SUBMIT") && strings.Contains(ev, "JOB_HELD") && strings.Contains(ev, "JOB_ABORTED"), ev)

	// The htcondor tool.
	jobLog := filepath.Join(dir, "job.log")
	sub := filepath.Join(dir, "job.sub")
	// Long enough to be seen running by a poll of a loaded machine (the
	// job has a /tmp of its own: it cannot wait for a file of the test's).
	if err := os.WriteFile(sub, []byte("executable = /bin/sh\narguments = \"-c 'echo hello; sleep 15'\"\noutput = "+
		filepath.Join(dir, "job.out")+"\nlog = "+jobLog+"\nqueue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := htcondor("job", "submit", sub)
	var cluster int
	_, err = fmt.Sscanf(strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), "Job %d was submitted.", &cluster)
	check("htcondor job submit", err == nil, out)
	id := fmt.Sprintf("%d.0", cluster)
	// While it runs, the slot it uses.
	eventually(t, 60*time.Second, func() error {
		if out := htcondor("job", "resources", id); !strings.Contains(out, "Job is using resource slot") {
			return fmt.Errorf("job resources: %s", out)
		}
		return nil
	})
	calls = append(calls, "htcondor job resources")
	eventually(t, 60*time.Second, func() error {
		if out := htcondor("job", "status", id); !strings.Contains(out, "Job "+id+" has completed") {
			return fmt.Errorf("job status: %s", out)
		}
		return nil
	})
	calls = append(calls, "htcondor job status")
	out = htcondor("job", "out", id)
	// (after a line saying it looks in the history, the job being done)
	check("htcondor job out", strings.HasSuffix(strings.TrimSpace(out), "\nhello"), out)
	out = htcondor("job", "log", id)
	check("htcondor job log", strings.Contains(out, "000 ("+fmt.Sprintf("%03d", cluster)) && strings.Contains(out, "005 ("), out)
	out = htcondor("eventlog", "read", jobLog)
	check("htcondor eventlog read", strings.Contains(out, id) && strings.Contains(out, "slot"), out)
	out = htcondor("ap", "status")
	check("htcondor ap status", strings.Contains(out, "DutyCycle") && strings.Contains(out, "cedar-0") && !strings.Contains(out, "Error"), out)
	out = htcondor("ep", "status", "cedar-0")
	check("htcondor ep status", strings.Contains(out, "slot1@cedar-0") && strings.Contains(out, "Total slots: 2"), out)
	out = htcondor("cm", "status")
	check("htcondor cm status", strings.Contains(out, "cedar-0") && strings.Contains(out, "Good") && !strings.Contains(out, "Error"), out)
	out = htcondor("jobset", "list")
	check("htcondor jobset list", strings.Contains(out, "No active job sets found") && !strings.Contains(out, "Error"), out)

	t.Logf("%d distinct calls work with only CONDOR_CONFIG set: %s", len(calls), strings.Join(calls, ", "))
	if len(calls) < 25 {
		t.Errorf("%d distinct calls work, want at least 25", len(calls))
	}
}
