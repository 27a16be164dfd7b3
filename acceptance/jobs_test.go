package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// jobsPool is a local pool of four agents, each with four slots; node 0
// (the central manager) also runs the schedd the test submits to.
const jobsPool = `
pool "jobs" {
  nodes  = 4
  slots  = 4
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.jobs.central_manager
}
`

// jobScript is the executable of the 1,000 jobs. By process number, a job
// only echoes, sleeps up to 0.9 s, or turns its transferred input into an
// output file that is transferred back.
const jobScript = `#!/bin/sh
p=$1
echo "job $p"
case $((p % 4)) in
1) sleep 0.$((p % 10)) ;;
2 | 3) { cat in.txt; echo "out $p"; } > "out-$p.txt" ;;
esac
`

const jobsSubmit = `
executable            = job.sh
arguments             = $(Process)
transfer_input_files  = in.txt
should_transfer_files = YES
when_to_transfer_output = ON_EXIT
output                = out/stdout.$(Process)
error                 = out/stderr.$(Process)
log                   = jobs.log
request_memory        = 64
queue 1000
`

// hogSubmit asks for 16 MB and grows past 100 MB (a command substitution,
// which the submit language's $(...) macros would expand, in backquotes).
const hogSubmit = "executable     = /bin/sh\n" +
	"arguments      = \"-c 'x=`yes | head -c 120000000`; sleep 30'\"\n" +
	"request_memory = 16\n" +
	"log            = hog.log\n" +
	"queue\n"

const nJobs = 1000

// TestThousandJobs runs 1,000 jobs from one submit file on a local pool of
// four agents, kills the agent running the schedd with SIGKILL mid-run,
// brings it back with pondctl apply, and checks that every job completed
// once with the right output, that a job over its memory request is held,
// and that HTCondor's own reader parses the job log.
func TestThousandJobs(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", jobsPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
	})

	if err := os.Mkdir(filepath.Join(w.dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("in.txt", "payload\n")
	w.write("jobs.sub", jobsSubmit)
	w.write("hog.sub", hogSubmit)
	if err := os.WriteFile(filepath.Join(w.dir, "job.sh"), []byte(jobScript), 0o755); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	r := w.expect(0, "condor", "submit", "-pool", cm, "jobs.sub")
	if !strings.Contains(r.stdout, fmt.Sprintf("%d job(s) submitted to cluster 1.", nJobs)) {
		t.Fatalf("submit output:\n%s", r.stdout)
	}
	r = w.expect(0, "condor", "submit", "-pool", cm, "hog.sub")
	if !strings.Contains(r.stdout, "1 job(s) submitted to cluster 2.") {
		t.Fatalf("submit output:\n%s", r.stdout)
	}

	// Mid-run, the agent running the schedd dies without warning.
	eventually(t, 60*time.Second, func() error {
		if n := doneOutputs(w); n < nJobs/4 {
			return fmt.Errorf("%d of %d jobs done", n, nJobs)
		}
		return nil
	})
	doneBefore := doneOutputs(w)
	killNode(t, w, "jobs-0")
	t.Logf("killed the schedd's agent after %s with %d jobs done", time.Since(start).Round(time.Millisecond), doneBefore)

	// The user brings it back: apply repairs the drift, restarting the node
	// on its data directory and at its address.
	repair := time.Now()
	r = w.expect(0, "apply", "-auto-approve")
	t.Logf("pondctl apply brought the node back in %s", time.Since(repair).Round(time.Millisecond))
	if got := w.output("cm"); got != cm {
		t.Fatalf("central manager moved from %s to %s\n%s\n%s", cm, got, r, readFile(t, filepath.Join(w.dir, ".pond", "local", "nodes", "jobs-0", "agent.log")))
	}

	eventually(t, 80*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-constraint", "ClusterId == 1", "-af", "ProcId", "JobStatus")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if left := strings.Count(r.stdout, "\n"); left > 0 {
			return fmt.Errorf("%d jobs of cluster 1 still queued (%d outputs)", left, doneOutputs(w))
		}
		return nil
	})
	elapsed := time.Since(start)
	t.Logf("%d jobs done in %s (%.1f jobs/s), a kill -9 and repair included", nJobs, elapsed.Round(time.Millisecond),
		float64(nJobs)/elapsed.Seconds())

	// Every job is in the history once, completed with exit code 0.
	r = w.expect(0, "condor", "history", "-pool", cm, "-constraint", "ClusterId == 1", "-af", "ProcId", "JobStatus", "ExitCode")
	seen := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("history line %q", line)
		}
		p, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("history line %q: %v", line, err)
		}
		if seen[p] {
			t.Errorf("job 1.%d is in the history twice", p)
		}
		seen[p] = true
		if f[1] != "4" || f[2] != "0" {
			t.Errorf("job 1.%d: JobStatus %s ExitCode %s, want 4 and 0", p, f[1], f[2])
		}
	}
	if len(seen) != nJobs {
		t.Fatalf("history has %d jobs of cluster 1, want %d", len(seen), nJobs)
	}

	// Every output is right.
	bad := 0
	for p := range nJobs {
		got, err := os.ReadFile(filepath.Join(w.dir, "out", fmt.Sprintf("stdout.%d", p)))
		if err != nil || string(got) != fmt.Sprintf("job %d\n", p) {
			t.Errorf("stdout of job 1.%d = %q, %v", p, got, err)
			bad++
		}
		name := filepath.Join(w.dir, fmt.Sprintf("out-%d.txt", p))
		out, err := os.ReadFile(name)
		switch {
		case p%4 >= 2 && (err != nil || string(out) != fmt.Sprintf("payload\nout %d\n", p)):
			t.Errorf("output file of job 1.%d = %q, %v", p, out, err)
			bad++
		case p%4 < 2 && err == nil:
			t.Errorf("job 1.%d transferred back an output file it did not write", p)
			bad++
		}
		if bad > 10 {
			t.Fatal("too many wrong outputs")
		}
	}

	// The job over its memory request is held, with the reason.
	eventually(t, 20*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-json", "2.0")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		var ads []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &ads); err != nil {
			return fmt.Errorf("condor q -json: %v\n%s", err, r.stdout)
		}
		if len(ads) != 1 {
			return fmt.Errorf("condor q -json 2.0: %d ads", len(ads))
		}
		if st := fmt.Sprint(ads[0]["JobStatus"]); st != "5" {
			return fmt.Errorf("job 2.0 has JobStatus %s, want 5 (held)", st)
		}
		if reason, _ := ads[0]["HoldReason"].(string); !strings.Contains(reason, "memory") {
			return fmt.Errorf("job 2.0 is held with reason %q, want one about memory", reason)
		}
		return nil
	})

	checkJobLog(t, filepath.Join(w.dir, "jobs.log"))
	w.expect(0, "destroy", "-auto-approve")
}

// describeJobs logs, for a failure, the queue, the held jobs and the end
// of every node's log.
func describeJobs(t *testing.T, w *workdir, cm string) {
	r := w.run("condor", "q", "-pool", cm)
	t.Logf("condor q:\n%s", r.stdout+r.stderr)
	r = w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus", "RemoteHost", "HoldReason")
	lines := strings.Split(r.stdout, "\n")
	if len(lines) > 30 {
		lines = lines[:30]
	}
	t.Logf("condor q -af ProcId JobStatus RemoteHost HoldReason:\n%s", strings.Join(lines, "\n"))
	r = w.run("condor", "status", "-pool", cm)
	t.Logf("condor status:\n%s", r.stdout+r.stderr)
	logs, _ := filepath.Glob(filepath.Join(w.dir, ".pond", "local", "nodes", "*", "agent.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		t.Logf("--- %s\n%s", l, data)
	}
}

// doneOutputs counts the jobs whose stdout has come back.
func doneOutputs(w *workdir) int {
	ents, _ := os.ReadDir(filepath.Join(w.dir, "out"))
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "stdout.") {
			n++
		}
	}
	return n
}

// checkJobLog has HTCondor's Python bindings read the job log and counts
// the events of each job: one submit, one termination, at least one
// execution (a job running when the schedd died may run again).
func checkJobLog(t *testing.T, path string) {
	t.Helper()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.LogOrFail(t, "HTCondor's Python bindings (htcondor2) are not installed: the job log is not checked with HTCondor's reader (pip install htcondor)")
		return
	}
	script := `
import sys
import htcondor2
counts = {}
for e in htcondor2.JobEventLog(sys.argv[1]).events(stop_after=0):
    k = (e.proc, e.type.name)
    counts[k] = counts.get(k, 0) + 1
for (proc, name), n in sorted(counts.items()):
    print(proc, name, n)
`
	out, err := exec.Command("python3", "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("HTCondor's reader failed on the job log: %v\n%s", err, out)
	}
	counts := map[string]map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("reader output line %q", line)
		}
		p, _ := strconv.Atoi(f[0])
		n, _ := strconv.Atoi(f[2])
		if counts[f[1]] == nil {
			counts[f[1]] = map[int]int{}
		}
		counts[f[1]][p] = n
	}
	bad := 0
	for p := range nJobs {
		sub, ex, term := counts["SUBMIT"][p], counts["EXECUTE"][p], counts["JOB_TERMINATED"][p]
		if sub != 1 || ex < 1 || term != 1 {
			t.Errorf("job 1.%d has %d submit, %d execute and %d terminated events in the log, want 1, at least 1 and 1", p, sub, ex, term)
			bad++
		}
		if bad > 10 {
			t.Fatal("too many wrong event counts")
		}
	}
	t.Logf("HTCondor's reader: %d submit, %d execute, %d terminated, %d evicted events", total(counts["SUBMIT"]),
		total(counts["EXECUTE"]), total(counts["JOB_TERMINATED"]), total(counts["JOB_EVICTED"]))
}

func total(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestPoolTokenIsolation checks that each working directory's pools trust
// its own authority: every node holds a token of its own (node.token,
// 0600) and the working directory's keys, a startd of another directory's
// pool refuses a's collector (another sea) before it sends its credential,
// the tools run elsewhere, without the sea's CA or without a token are
// refused, and given the CA and a token of a's authority they submit as
// the token's subject.
func TestPoolTokenIsolation(t *testing.T) {
	t.Parallel()
	a := newWorkdir(t, "")
	a.write("main.pond.hcl", `
pool "a" {
  nodes = 1
}
output "cm" {
  value = pool.a.central_manager
}
`)
	a.expect(0, "apply", "-auto-approve")
	cm := a.output("cm")
	tokenA := filepath.Join(a.dir, ".pond", "local", "nodes", "a-0", "node.token")
	fi, err := os.Stat(tokenA)
	if err != nil {
		t.Fatalf("no node token in a-0's directory: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("node token has mode %04o, want 0600", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(a.dir, ".pond", "pool_password")); err == nil {
		t.Error("the working directory still has a pool password")
	}
	if r := a.expect(0, "token", "list"); !strings.Contains(r.stdout, "node/a-0") {
		t.Errorf("token list does not show a-0's token:\n%s", r.stdout)
	}

	// Another directory's pool whose startd reports to a's collector.
	b := newWorkdir(t, "")
	b.write("main.pond.hcl", fmt.Sprintf(`
pool "b" {
  nodes  = 1
  config = { CONDOR_HOST = %q, DAEMON_LIST = "MASTER STARTD", UPDATE_INTERVAL = "2" }
}
`, cm))
	b.expect(0, "apply", "-auto-approve")
	bLog := filepath.Join(b.dir, ".pond", "local", "nodes", "b-0", "agent.log")
	eventually(t, 20*time.Second, func() error {
		if !strings.Contains(readFile(t, bLog), "did not prove it belongs to the sea") {
			return fmt.Errorf("b-0's startd did not refuse a's collector, of another sea; its log:\n%s", readFile(t, bLog))
		}
		return nil
	})
	eventually(t, 20*time.Second, func() error {
		r := a.run("condor", "status", "-pool", cm, "-af", "Machine")
		if r.code != 0 {
			return fmt.Errorf("condor status in a's directory: %s", r)
		}
		if got := strings.Fields(r.stdout); len(got) == 0 || got[0] != "a-0" || strings.Contains(r.stdout, "b-0") {
			return fmt.Errorf("a's collector holds slots of %v, want a-0's only", got)
		}
		return nil
	})

	// The tools: b's directory does not trust a's agents (another CA);
	// one without a CA is told a's agents speak TLS, and with a's CA but
	// no token is refused; b with a's CA and a token of a's authority is
	// accepted, and the token's subject owns the job.
	b.write("job.sub", "executable = /bin/true\nqueue\n")
	for _, args := range [][]string{{"q", "-pool", cm}, {"status", "-pool", cm}, {"submit", "-pool", cm, "job.sub"}} {
		r := b.expect(1, append([]string{"condor"}, args...)...)
		if !strings.Contains(r.stderr, "did not prove it belongs to the sea") {
			t.Fatalf("condor %s from another directory: %s", args[0], r)
		}
	}
	c := newWorkdir(t, "")
	if r := c.expect(1, "condor", "q", "-pool", cm); !strings.Contains(r.stderr, "speaks TLS") {
		t.Fatalf("condor q without the sea's CA: %s", r)
	}
	caA := "POND_TLS_CA=" + filepath.Join(a.dir, ".pond", "auth", "ca.pem")
	c.env = append(c.env, caA)
	if r := c.expect(1, "condor", "q", "-pool", cm); !strings.Contains(r.stderr, "not authorized") {
		t.Fatalf("condor q without a token: %s", r)
	}
	r := a.expect(0, "token", "create", "-subject", "carol", "-scope", "WRITE", "-lifetime", "1h")
	b.env = append(b.env, "POND_TOKEN="+strings.TrimSpace(r.stdout), caA)
	b.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	if r := a.expect(0, "condor", "history", "-pool", cm, "-af", "Owner"); !strings.Contains(r.stdout, "carol") {
		if r := a.expect(0, "condor", "q", "-pool", cm, "-af", "Owner"); !strings.Contains(r.stdout, "carol") {
			t.Errorf("carol's job is not hers: q says %q", r.stdout)
		}
	}
	b.expect(0, "destroy", "-auto-approve")
	a.expect(0, "destroy", "-auto-approve")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
