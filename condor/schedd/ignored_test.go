package schedd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pond-htc/pond/condor/testenv"
)

// lockedBuffer is a bytes.Buffer the schedd's log handler and the test
// share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// wheel runs a Python program with HTCondor's htcondor2 wheel against the
// schedd served at addr (SCHEDD); the program fills OUT, printed as JSON.
func wheel(t *testing.T, addr, program string) map[string]any {
	t.Helper()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	src := "import htcondor2, classad2, json, os, warnings\n" +
		"htcondor2.param['SEC_CLIENT_AUTHENTICATION_METHODS'] = 'FS'\n" +
		"SCHEDD = htcondor2.Schedd(classad2.ClassAd({'MyAddress': '<' + os.environ['ADDR'] + '>', 'Name': 'schedd@submit', 'MyType': 'Scheduler', 'CondorVersion': '$CondorVersion: 25.0.0 2025-01-01 BuildID: pond $'}))\n" +
		"OUT = {}\n" + program + "\nprint(json.dumps(OUT, default=str))\n"
	cmd := exec.Command("python3", "-c", src)
	cmd.Env = append(os.Environ(), "ADDR="+addr, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	got := map[string]any{}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return got
}

// TestIgnoredAttrsWarnHTCondorClient submits through HTCondor's Python
// client jobs that ask for what pond does not act on (buffer_size,
// coresize, transfer_output = false of an output file; in a cluster of
// three procs, and in a job factory with max_materialize) and jobs that
// ask for nothing of the kind (transfer_output = false without an output
// file among them). The first get the warning from the commit, which the
// client shows as a UserWarning, one generic event (008) in their log,
// read by htcondor2.JobEventLog, naming each attribute and its command,
// and a line in the schedd's log; the others get none. No job is refused.
func TestIgnoredAttrsWarnHTCondorClient(t *testing.T) {
	t.Parallel()
	log := &lockedBuffer{}
	n := &node{t: t, data: t.TempDir(), jobs: t.TempDir(), logTo: log}
	n.open()
	t.Cleanup(n.stop)
	addr := serveCEDAR(t, n.s)
	logPath := filepath.Join(n.jobs, "job.log")
	got := wheel(t, addr, fmt.Sprintf(`
def submit(extra, **kw):
    d = {'executable': '/bin/true', 'hold': 'true', 'log': %q}
    d.update(extra)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        r = SCHEDD.submit(htcondor2.Submit(d), **kw)
    return {'cluster': r.cluster(), 'procs': r.num_procs(), 'warnings': [str(x.message) for x in w]}
OUT['ignored'] = submit({'buffer_size': '524288', 'coresize': '0', 'output': 'out.txt', 'transfer_output': 'false'}, count=3)
OUT['plain'] = submit({'priority': '5', 'transfer_output': 'false', 'run_as_owner': 'false'}, count=2)
OUT['factory'] = submit({'load_profile': 'true', 'max_materialize': '2', 'arguments': '$(Process)'}, count=4)
evs = []
for e in htcondor2.JobEventLog(%q).events(0):
    evs.append({'type': e.type.name, 'cluster': e.cluster, 'proc': e.proc, 'info': e.get('Info', '')})
OUT['events'] = evs
`, logPath, logPath))
	type result struct {
		Cluster  int
		Procs    int
		Warnings []string
	}
	res := map[string]result{}
	for _, k := range []string{"ignored", "plain", "factory"} {
		b, _ := json.Marshal(got[k])
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", k, got[k])
		}
		res[k] = r
	}
	want := map[string][]string{
		"ignored": {"BufferSize (buffer_size)", "CoreSize (coresize)", "TransferOut (transfer_output)"},
		"plain":   nil,
		"factory": {"LoadProfile (load_profile)"},
	}
	procs := map[string]int{"ignored": 3, "plain": 2, "factory": 4}
	for k, attrs := range want {
		r := res[k]
		if r.Procs != procs[k] {
			t.Errorf("%s: %d procs submitted, want %d", k, r.Procs, procs[k])
		}
		if attrs == nil {
			if len(r.Warnings) > 0 {
				t.Errorf("%s: the client warned %q, want nothing", k, r.Warnings)
			}
			continue
		}
		wantText := "pond does not act on these job attributes (submit commands), the job runs as if they were not set: " + strings.Join(attrs, ", ")
		if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "Submit succeeded with warning") || !strings.Contains(r.Warnings[0], wantText) {
			t.Errorf("%s: the client warned %q, want one warning %q", k, r.Warnings, wantText)
		}
		if !strings.Contains(log.String(), fmt.Sprintf("level=WARN msg=\"submitted jobs ask for what pond does not act on\" daemon=schedd user=root cluster=%d attributes=\"%s\"", r.Cluster, strings.Join(attrs, ", "))) {
			t.Errorf("%s: the schedd's log does not warn of cluster %d:\n%s", k, r.Cluster, log.String())
		}
	}

	// The job log: a generic event after the first job's submit event,
	// once per cluster that asked for what pond does not act on.
	evs, _ := got["events"].([]any)
	generic := map[int][]string{}
	submitted := map[int]int{}
	for _, e := range evs {
		m := e.(map[string]any)
		c := int(m["cluster"].(float64))
		switch m["type"] {
		case "SUBMIT":
			submitted[c]++
		case "GENERIC":
			if m["proc"].(float64) != 0 || submitted[c] == 0 {
				t.Errorf("generic event of %v.%v before the first job's submit event", c, m["proc"])
			}
			generic[c] = append(generic[c], m["info"].(string))
		}
	}
	for k, attrs := range want {
		c := res[k].Cluster
		if attrs == nil {
			if len(generic[c]) > 0 {
				t.Errorf("%s: generic events %q in the job log, want none", k, generic[c])
			}
			continue
		}
		wantText := "pond does not act on these job attributes (submit commands), the job runs as if they were not set: " + strings.Join(attrs, ", ")
		if len(generic[c]) != 1 || generic[c][0] != wantText {
			t.Errorf("%s: generic events %q in the job log, want one %q", k, generic[c], wantText)
		}
	}
	if submitted[res["ignored"].Cluster] != 3 || submitted[res["plain"].Cluster] != 2 || submitted[res["factory"].Cluster] != 2 {
		t.Errorf("submit events by cluster %v: the jobs were not all queued", submitted)
	}
}

// TestIgnoredAttrsOfEachCommand submits through HTCondor's Python client
// one job per command pond takes but does not act on, and checks that
// the commit's warning names the attribute the client made of it (the
// table of submit.IgnoredAttrs is HTCondor's); the commands that make no
// attribute, those whose attribute the schedd acts on, and false where
// false asks for nothing draw none.
func TestIgnoredAttrsOfEachCommand(t *testing.T) {
	t.Parallel()
	n := start(t)
	addr := serveCEDAR(t, n.s)
	cases := []struct {
		extra map[string]string
		want  string // the attribute named; "" for no warning
	}{
		{map[string]string{"buffer_block_size": "32768"}, "BufferBlockSize (buffer_block_size)"},
		{map[string]string{"buffer_size": "524288"}, "BufferSize (buffer_size)"},
		{map[string]string{"container_image": "img.sif"}, "ContainerImage (container_image)"},
		{map[string]string{"coresize": "100"}, "CoreSize (coresize)"},
		{map[string]string{"docker_image": "debian"}, "DockerImage (docker_image)"},
		{map[string]string{"encrypt_execute_directory": "true"}, "EncryptExecuteDirectory (encrypt_execute_directory)"},
		{map[string]string{"job_machine_attrs": "Machine"}, "JobMachineAttrs (job_machine_attrs)"},
		{map[string]string{"job_machine_attrs_history_length": "3"}, "JobMachineAttrsHistoryLength (job_machine_attrs_history_length)"},
		{map[string]string{"load_profile": "true"}, "LoadProfile (load_profile)"},
		{map[string]string{"log_xml": "true"}, "UserLogUseXML (log_xml)"},
		{map[string]string{"next_job_start_delay": "5"}, "NextJobStartDelay (next_job_start_delay)"},
		{map[string]string{"output_destination": "file:///tmp/out"}, "OutputDestination (output_destination)"},
		{map[string]string{"periodic_vacate": "JobStatus == 42"}, "PeriodicVacate (periodic_vacate)"},
		{map[string]string{"preserve_relative_paths": "true"}, "PreserveRelativePaths (preserve_relative_paths)"},
		{map[string]string{"request_memory_fraction": "0.5"}, "Requestmemory_fraction (request_memory_fraction)"},
		{map[string]string{"run_as_owner": "true"}, "RunAsOwner (run_as_owner)"},
		{map[string]string{"error": "err.txt", "transfer_error": "false"}, "TransferErr (transfer_error)"},
		{map[string]string{"input": "/etc/hostname", "transfer_input": "false"}, "TransferIn (transfer_input)"},
		{map[string]string{"output": "out.txt", "transfer_output": "false"}, "TransferOut (transfer_output)"},
		{map[string]string{"want_graceful_removal": "true"}, "WantGracefulRemoval (want_graceful_removal)"},
		// No attribute, or one the schedd acts on, or false.
		{map[string]string{"copy_to_spool": "true"}, ""},
		{map[string]string{"job_batch_id": "b1"}, ""},
		{map[string]string{"skip_filechecks": "true"}, ""},
		{map[string]string{"want_remote_io": "true"}, ""},
		{map[string]string{"dagman_log": filepath.Join(n.jobs, "nodes.log")}, ""},
		{map[string]string{"job_lease_duration": "600"}, ""},
		{map[string]string{"run_as_owner": "false", "load_profile": "false", "want_remote_io": "false"}, ""},
		{map[string]string{"output": "out.txt", "transfer_output": "true"}, ""},
		{map[string]string{"transfer_input": "false"}, ""},
	}
	var subs []map[string]string
	for _, c := range cases {
		d := map[string]string{"executable": "/bin/true", "hold": "true"}
		for k, v := range c.extra {
			d[k] = v
		}
		subs = append(subs, d)
	}
	b, _ := json.Marshal(subs)
	got := wheel(t, addr, fmt.Sprintf(`
OUT['warnings'] = []
for d in json.loads(%q):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        SCHEDD.submit(htcondor2.Submit(d))
    OUT['warnings'].append([str(x.message) for x in w])
`, b))
	ws, _ := got["warnings"].([]any)
	if len(ws) != len(cases) {
		t.Fatalf("%d submits answered, want %d: %v", len(ws), len(cases), got)
	}
	for i, c := range cases {
		var msgs []string
		for _, m := range ws[i].([]any) {
			msgs = append(msgs, m.(string))
		}
		switch {
		case c.want == "" && len(msgs) > 0:
			t.Errorf("%v: the client warned %q, want nothing", c.extra, msgs)
		case c.want != "" && (len(msgs) != 1 || !strings.HasSuffix(strings.TrimSpace(msgs[0]), "set: "+c.want)):
			t.Errorf("%v: the client warned %q, want one warning naming only %s", c.extra, msgs, c.want)
		}
	}
}
