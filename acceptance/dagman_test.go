package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
)

// dagPool is a one-node pool of four slots that negotiates every second.
const dagPool = `
pool "dag" {
  nodes  = 1
  slots  = 4
  config = { NEGOTIATOR_INTERVAL = "1", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.dag.central_manager
}
`

// dagNodeScript is every node's job: it prints its node name and fails
// (exit 3) when its second argument is "fail" or "retry0" (the node's
// first try, from VARS mode="retry$(RETRY)").
const dagNodeScript = `#!/bin/sh
echo "$1"
case "$2" in fail | retry0) exit 3 ;; esac
exit 0
`

const dagNodeSubmit = `executable = node.sh
arguments  = "$(node) $(mode)"
output = $(node).out
error  = $(node).err
queue
`

func dagWorkdir(t *testing.T) (*workdir, string) {
	t.Helper()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", dagPool)
	w.expect(0, "apply", "-auto-approve")
	if err := os.WriteFile(filepath.Join(w.dir, "node.sh"), []byte(dagNodeScript), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("node.sub", dagNodeSubmit)
	return w, w.output("cm")
}

// runsOf counts the nodes' jobs in the schedd's history by DAGNodeName.
func runsOf(t *testing.T, w *workdir, cm string) map[string]int {
	t.Helper()
	r := w.expect(0, "condor", "history", "-pool", cm, "-af", "DAGNodeName")
	n := map[string]int{}
	for _, l := range strings.Fields(r.stdout) {
		n[l]++
	}
	return n
}

// TestDAGDiamondRetry runs a diamond DAG (A -> B,C -> D) whose node B
// fails once and is retried, with PRE and POST scripts, and checks that
// every node ran once (B twice), in order, and that the nodes' jobs
// carry the DAG node attributes.
func TestDAGDiamondRetry(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("post.sh", "#!/bin/sh\necho \"$1 $2 $3 $4\" >> \"$(dirname \"$0\")/post.txt\"\nexit $2\n")
	if err := os.Chmod(filepath.Join(w.dir, "post.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("diamond.dag", `# diamond
JOB A node.sub
JOB B node.sub
job C node.sub
JOB D node.sub
VARS ALL_NODES node="$(JOB)"
VARS B mode="retry$(RETRY)"
PARENT A CHILD B C
Parent B C Child D
RETRY B 2
SCRIPT POST B post.sh $JOB $RETURN $RETRY $MAX_RETRIES
CATEGORY B pair
CATEGORY C pair
MAXJOBS pair 1
FINAL F node.sub
VARS F node="F"
`)
	r := w.expect(0, "condor", "dagman", "run", "-pool", cm, "diamond.dag")
	if !strings.Contains(r.stdout, "Retrying node B (retry 1 of 2)") {
		t.Errorf("no retry of B:\n%s", r.stdout)
	}
	if got := runsOf(t, w, cm); got["A"] != 1 || got["B"] != 2 || got["C"] != 1 || got["D"] != 1 || got["F"] != 1 {
		t.Errorf("runs %v, want A 1, B 2, C 1, D 1, F 1", got)
	}
	if post := readFile(t, filepath.Join(w.dir, "post.txt")); post != "B 3 0 2\nB 0 1 2\n" {
		t.Errorf("POST script arguments:\n%s", post)
	}
	if a, f := readFile(t, filepath.Join(w.dir, "A.out")), readFile(t, filepath.Join(w.dir, "F.out")); a != "A\n" || f != "F\n" {
		t.Errorf("A's output %q, F's %q", a, f)
	}
	out := readFile(t, filepath.Join(w.dir, "diamond.dag.dagman.out"))
	if !strings.Contains(out, "exiting with status 0") {
		t.Errorf("dagman.out:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "diamond.dag.rescue001")); err == nil {
		t.Error("a successful DAG left a rescue DAG")
	}
	r = w.expect(0, "condor", "history", "-pool", cm, "-af", "DAGNodeName", "DAGParentNodeNames", "DAGManJobId")
	for _, want := range []string{"D B,C 0", "A  0"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("history has no job with %q:\n%s", want, r.stdout)
		}
	}
}

// TestDAGRescue runs a DAG whose node C fails, checks the rescue DAG it
// leaves, fixes the cause and runs the DAG again: only the nodes not done
// run, and it completes.
func TestDAGRescue(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("c.sub", strings.Replace(dagNodeSubmit, "$(mode)", "fail", 1))
	w.write("r.dag", `JOB A node.sub
JOB B node.sub
JOB C c.sub
JOB D node.sub
VARS ALL_NODES node="$(JOB)"
PARENT A CHILD B C
PARENT B C CHILD D
`)
	r := w.expect(1, "condor", "dagman", "run", "-pool", cm, "r.dag")
	if got := runsOf(t, w, cm); got["A"] != 1 || got["B"] != 1 || got["C"] != 1 || got["D"] != 0 {
		t.Errorf("runs %v, want A, B, C once and D not", got)
	}
	rescue := readFile(t, filepath.Join(w.dir, "r.dag.rescue001"))
	var done []string
	for _, l := range strings.Split(rescue, "\n") {
		if strings.HasPrefix(l, "DONE ") {
			done = append(done, strings.TrimPrefix(l, "DONE "))
		}
	}
	if strings.Join(done, ",") != "A,B" {
		t.Errorf("rescue DAG marks %v done, want A,B:\n%s\n%s", done, rescue, r.stdout)
	}

	// The cause fixed, the DAG runs again from its rescue DAG.
	w.write("c.sub", dagNodeSubmit)
	r = w.expect(0, "condor", "dagman", "run", "-pool", cm, "r.dag")
	if !strings.Contains(r.stdout, "Using rescue DAG "+filepath.Join(w.dir, "r.dag.rescue001")) {
		t.Errorf("the rescue DAG was not used:\n%s", r.stdout)
	}
	if got := runsOf(t, w, cm); got["A"] != 1 || got["B"] != 1 || got["C"] != 2 || got["D"] != 1 {
		t.Errorf("runs %v, want A, B, D once and C twice", got)
	}
}

// TestDAGRecovery kills the DAG manager (SIGKILL) while node A's job
// runs, runs the DAG again, and checks that it recovers from the nodes'
// log: A's job is not submitted again, B runs once after it.
func TestDAGRecovery(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("slow.sub", "executable = /bin/sleep\narguments = 4\nqueue\n")
	w.write("k.dag", "JOB A slow.sub\nJOB B node.sub\nVARS B node=\"B\"\nPARENT A CHILD B\n")
	cmd := exec.Command(pondBin, "condor", "dagman", "run", "-pool", cm, "k.dag")
	cmd.Dir, cmd.Env = w.dir, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(w.dir, "k.dag.dagman.out")
	eventually(t, 30*time.Second, func() error {
		if b, _ := os.ReadFile(out); !strings.Contains(string(b), "Submitted node A") {
			return fmt.Errorf("node A not submitted yet:\n%s", b)
		}
		return nil
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	r := w.expect(0, "condor", "dagman", "run", "-pool", cm, "k.dag")
	if !strings.Contains(r.stdout, "recovering from the nodes' log") || !strings.Contains(r.stdout, "Recovered node A: job cluster 1") {
		t.Errorf("no recovery:\n%s", r.stdout)
	}
	if got := runsOf(t, w, cm); got["A"] != 1 || got["B"] != 1 {
		t.Errorf("runs %v, want A and B once", got)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "k.dag.lock")); !os.IsNotExist(err) {
		t.Errorf("lock file left after a finished DAG: %v", err)
	}
}

// TestDAGAbortAndPreSkip checks PRE_SKIP (a PRE script's exit code that
// marks its node done without running its job) and ABORT-DAG-ON (a node's
// exit value that aborts the DAG with the RETURN code, its children never
// run, the FINAL node run to its end all the same, and a rescue DAG
// left).
func TestDAGAbortAndPreSkip(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("pre.sh", "#!/bin/sh\nexit 5\n")
	if err := os.Chmod(filepath.Join(w.dir, "pre.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("a.dag", `JOB A node.sub
JOB B node.sub
JOB C node.sub
VARS ALL_NODES node="$(JOB)"
VARS B mode="fail"
SCRIPT PRE A pre.sh
PRE_SKIP A 5
PARENT A CHILD B
PARENT B CHILD C
RETRY B 3
ABORT-DAG-ON B 3 RETURN 7
FINAL F node.sub
`)
	r := w.expect(7, "condor", "dagman", "run", "-pool", cm, "a.dag")
	if got := runsOf(t, w, cm); got["A"] != 0 || got["B"] != 1 || got["C"] != 0 || got["F"] != 1 {
		t.Errorf("runs %v, want B once (no retry after the abort), F once, A and C never\n%s", got, r.stdout)
	}
	if h := w.expect(0, "condor", "history", "-pool", cm, "-af", "JobStatus", "-constraint", `DAGNodeName == "F"`); strings.TrimSpace(h.stdout) != "4" {
		t.Errorf("the FINAL node's job after the abort: status %q, want completed (4)\n%s", h.stdout, r.stdout)
	}
	if rescue := readFile(t, filepath.Join(w.dir, "a.dag.rescue001")); !strings.Contains(rescue, "\nDONE A\n") || strings.Contains(rescue, "DONE B") {
		t.Errorf("rescue DAG:\n%s", rescue)
	}
}

// submitDag runs "condor submit_dag" of dag and returns the DAG job's
// cluster, from HTCondor's "1 job(s) submitted to cluster N." line.
func submitDag(t *testing.T, w *workdir, cm, dag string, args ...string) int {
	t.Helper()
	r := w.expect(0, append(append([]string{"condor", "submit_dag", "-pool", cm}, args...), dag)...)
	m := regexp.MustCompile(`(?m)^1 job\(s\) submitted to cluster (\d+)\.$`).FindStringSubmatch(r.stdout)
	if m == nil || !strings.Contains(r.stdout, "File for submitting this DAG to HTCondor") {
		t.Fatalf("submit_dag output:\n%s", r.stdout)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// waitDAG waits until the DAG manager of dag has exited and returns its
// dagman.out.
func waitDAG(t *testing.T, w *workdir, dag string, within time.Duration) string {
	t.Helper()
	var out string
	eventually(t, within, func() error {
		b, _ := os.ReadFile(filepath.Join(w.dir, dag+".dagman.out"))
		if out = string(b); !strings.Contains(out, "DAG manager exiting with status") {
			return fmt.Errorf("the DAG has not ended:\n%s", out)
		}
		return nil
	})
	return out
}

// nodeEvents counts the events of each type of each node in the DAG's
// nodes' log ("A" -> joblog.Execute -> 1), naming clusters by their
// submit events' "DAG Node:" note.
func nodeEvents(t *testing.T, path string) map[string]map[joblog.EventType]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := joblog.ReadAll(f, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	nodeOf := map[int]string{}
	out := map[string]map[joblog.EventType]int{}
	for _, ev := range evs {
		if ev.Type == joblog.Submit {
			for _, l := range append([]string{ev.Notes}, ev.Body...) {
				if n, ok := strings.CutPrefix(strings.TrimSpace(l), "DAG Node:"); ok {
					nodeOf[ev.Cluster] = strings.TrimSpace(n)
				}
			}
		}
		n := nodeOf[ev.Cluster]
		if out[n] == nil {
			out[n] = map[joblog.EventType]int{}
		}
		out[n][ev.Type]++
	}
	return out
}

const diamondDAG = "JOB A node.sub\nJOB B node.sub\nJOB C node.sub\nJOB D node.sub\nVARS ALL_NODES node=\"$(JOB)\"\nPARENT A CHILD B C\nPARENT B C CHILD D\n"

// TestSubmitDagDiamond submits a diamond DAG with submit_dag, which
// returns at once: the schedd runs the DAG manager as a scheduler-universe
// job, the DAG completes, its nodes carry the DAG job's cluster as
// DAGManJobId, and each node's own log is written besides the nodes' log.
func TestSubmitDagDiamond(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("node.sub", strings.Replace(dagNodeSubmit, "queue", "log = $(node).log\nqueue", 1))
	w.write("diamond.dag", diamondDAG)
	dagJob := submitDag(t, w, cm, "diamond.dag")
	if sub := readFile(t, filepath.Join(w.dir, "diamond.dag.condor.sub")); !strings.Contains(sub, "universe = scheduler") {
		t.Errorf("diamond.dag.condor.sub:\n%s", sub)
	}
	if out := waitDAG(t, w, "diamond.dag", 90*time.Second); !strings.Contains(out, "exiting with status 0") {
		t.Fatalf("dagman.out:\n%s", out)
	}
	if got := runsOf(t, w, cm); got["A"] != 1 || got["B"] != 1 || got["C"] != 1 || got["D"] != 1 {
		t.Errorf("runs %v, want each node once", got)
	}
	r := w.expect(0, "condor", "history", "-pool", cm, "-af", "DAGNodeName", "DAGManJobId")
	for _, n := range []string{"A", "B", "C", "D"} {
		if want := fmt.Sprintf("%s %d\n", n, dagJob); !strings.Contains(r.stdout, want) {
			t.Errorf("history has no %q:\n%s", want, r.stdout)
		}
		if l := readFile(t, filepath.Join(w.dir, n+".log")); !strings.Contains(l, "Job executing on host") || !strings.Contains(l, "Job terminated") {
			t.Errorf("node %s's own log:\n%s", n, l)
		}
	}
	eventually(t, 20*time.Second, func() error {
		r := w.expect(0, "condor", "history", "-pool", cm, strconv.Itoa(dagJob), "-af", "JobStatus", "ExitCode")
		if strings.TrimSpace(r.stdout) != "4 0" {
			return fmt.Errorf("the DAG job's status and exit code: %q", r.stdout)
		}
		return nil
	})
}

// TestSubmitDagSurvivesScheddKill kills the agent that runs the schedd
// (kill -9) while a DAG runs, then starts it again: the schedd adopts the
// DAG manager, whose process still runs, and the DAG completes with each
// node's job run once.
func TestSubmitDagSurvivesScheddKill(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("pre.sh", "#!/bin/sh\nsleep 4\n")
	if err := os.Chmod(filepath.Join(w.dir, "pre.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("k.dag", diamondDAG+"SCRIPT PRE B pre.sh\nSCRIPT PRE C pre.sh\n")
	submitDag(t, w, cm, "k.dag")
	eventually(t, 60*time.Second, func() error {
		if b, _ := os.ReadFile(filepath.Join(w.dir, "k.dag.dagman.out")); !strings.Contains(string(b), "Running PRE script of node B") {
			return fmt.Errorf("B's PRE script has not started:\n%s", b)
		}
		return nil
	})
	killNode(t, w, "dag-0")
	time.Sleep(2 * time.Second)
	w.expect(0, "apply", "-auto-approve")
	if out := waitDAG(t, w, "k.dag", 120*time.Second); !strings.Contains(out, "exiting with status 0") {
		t.Fatalf("dagman.out:\n%s", out)
	}
	evs := nodeEvents(t, filepath.Join(w.dir, "k.dag.nodes.log"))
	for _, n := range []string{"A", "B", "C", "D"} {
		if e := evs[n]; e[joblog.Submit] != 1 || e[joblog.Execute] != 1 || e[joblog.Terminated] != 1 {
			t.Errorf("node %s: %d submitted, %d executed, %d terminated; want 1 each", n, e[joblog.Submit], e[joblog.Execute], e[joblog.Terminated])
		}
	}
	if out := readFile(t, filepath.Join(w.dir, "k.dag.dagman.out")); strings.Count(out, "pond DAG manager starting up") != 1 {
		t.Errorf("the DAG manager was started again rather than adopted:\n%s", out)
	}
}

// TestSubmitDagRemove removes a running DAG's job with condor rm: its
// node job that runs is removed too, and a rescue DAG is written.
func TestSubmitDagRemove(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("slow.sub", "executable = /bin/sleep\narguments = 300\nqueue\n")
	w.write("r.dag", "JOB A slow.sub\nJOB B node.sub\nVARS B node=\"B\"\nPARENT A CHILD B\n")
	dagJob := submitDag(t, w, cm, "r.dag")
	eventually(t, 60*time.Second, func() error {
		r := w.expect(0, "condor", "q", "-pool", cm, "-af", "DAGNodeName", "JobStatus")
		if !strings.Contains(r.stdout, "A 2\n") {
			return fmt.Errorf("node A not running: %q", r.stdout)
		}
		return nil
	})
	w.expect(0, "condor", "rm", "-pool", cm, strconv.Itoa(dagJob))
	out := waitDAG(t, w, "r.dag", 60*time.Second)
	if !strings.Contains(out, "removing the nodes' jobs") {
		t.Errorf("dagman.out:\n%s", out)
	}
	eventually(t, 30*time.Second, func() error {
		if r := w.expect(0, "condor", "q", "-pool", cm, "-af", "ClusterId"); strings.TrimSpace(r.stdout) != "" {
			return fmt.Errorf("jobs left in the queue: %q", r.stdout)
		}
		return nil
	})
	if rescue := readFile(t, filepath.Join(w.dir, "r.dag.rescue001")); !strings.Contains(rescue, "Nodes premarked DONE: 0") {
		t.Errorf("rescue DAG:\n%s", rescue)
	}
	if evs := nodeEvents(t, filepath.Join(w.dir, "r.dag.nodes.log")); evs["A"][joblog.Aborted] != 1 || evs["B"][joblog.Submit] != 0 {
		t.Errorf("nodes' events %v: want A aborted and B never submitted", evs)
	}
}

// maxRunning is the most node jobs of the nodes' log at path that ran at
// once, from their execute and terminate events in the log's order.
func maxRunning(t *testing.T, path string) (most, ran int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := joblog.ReadAll(f, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	now := 0
	for _, ev := range evs {
		switch ev.Type {
		case joblog.Execute:
			now++
			ran++
		case joblog.Terminated, joblog.Aborted, joblog.Evicted:
			now--
		}
		most = max(most, now)
	}
	return most, ran
}

// TestDAGThrottles runs DAGs of eight one-second nodes on a pool of four
// slots: -maxjobs 2, MAXJOBS of a category, and a CONFIG file's
// DAGMAN_MAX_JOBS_SUBMITTED each bound the node jobs that run at once,
// as the nodes' log's execute and terminate events show; the CONFIG
// file's knob pond does not act on is named in a warning.
func TestDAGThrottles(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("sleep.sub", "executable = /bin/sleep\narguments = 1\nqueue\n")
	nodes := ""
	for i := range 8 {
		nodes += fmt.Sprintf("JOB N%d sleep.sub\n", i)
	}
	cat := ""
	for i := range 8 {
		cat += fmt.Sprintf("CATEGORY N%d c\n", i)
	}
	w.write("dag.config", "# DAGMan knobs\nDAGMAN_MAX_JOBS_SUBMITTED = 1\nDAGMAN_MAX_SUBMITS_PER_INTERVAL = 5\nDAGMAN_NOT_A_KNOB = 3\n")
	for _, tc := range []struct {
		name, dag string
		args      []string
		bound     int
	}{
		{"maxjobs", nodes, []string{"-maxjobs", "2"}, 2},
		{"category", nodes + cat + "MAXJOBS c 1\n", nil, 1},
		{"config", nodes + "CONFIG dag.config\n", nil, 1},
	} {
		file := tc.name + ".dag"
		w.write(file, tc.dag)
		r := w.expect(0, append(append([]string{"condor", "dagman", "run", "-pool", cm}, tc.args...), file)...)
		most, ran := maxRunning(t, filepath.Join(w.dir, file+".nodes.log"))
		if ran != 8 || most > tc.bound || most < 1 {
			t.Errorf("%s: %d node jobs ran, at most %d at once; want 8, at most %d", tc.name, ran, most, tc.bound)
		}
		if tc.name == "config" && !regexp.MustCompile(`WARNING: \S*dag.config:4: DAGMAN_NOT_A_KNOB is not a knob`).MatchString(r.stdout) {
			t.Errorf("no warning of the unknown knob:\n%s", r.stdout)
		}
	}
	w.write("bad.config", "DAGMAN_MAX_JOBS_IDLE = many\n")
	w.write("bad.dag", "JOB A node.sub\nCONFIG bad.config\n")
	if r := w.expect(1, "condor", "dagman", "run", "-pool", cm, "bad.dag"); !strings.Contains(r.stderr, "bad.config:1: DAGMAN_MAX_JOBS_IDLE") {
		t.Errorf("a bad CONFIG value: %s", r.stderr)
	}
}

// TestDAGThousandNodes runs a DAG of 1,000 /bin/true nodes, ten layers of
// 100, each layer the parent of the next: it completes, each node's job
// submitted, run and terminated once.
func TestDAGThousandNodes(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", strings.Replace(dagPool, "slots  = 4", "slots  = 16", 1))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	w.write("true.sub", "executable = /bin/true\nqueue\n")
	var b strings.Builder
	for l := range 10 {
		for i := range 100 {
			fmt.Fprintf(&b, "JOB L%dN%d true.sub\n", l, i)
		}
	}
	for l := range 9 {
		fmt.Fprintf(&b, "PARENT")
		for i := range 100 {
			fmt.Fprintf(&b, " L%dN%d", l, i)
		}
		fmt.Fprintf(&b, " CHILD")
		for i := range 100 {
			fmt.Fprintf(&b, " L%dN%d", l+1, i)
		}
		b.WriteString("\n")
	}
	w.write("big.dag", b.String())
	submitDag(t, w, cm, "big.dag")
	if out := waitDAG(t, w, "big.dag", 15*time.Minute); !strings.Contains(out, "exiting with status 0") {
		t.Fatalf("the DAG failed: %s", out[max(0, len(out)-3000):])
	}
	evs := nodeEvents(t, filepath.Join(w.dir, "big.dag.nodes.log"))
	if len(evs) != 1000 {
		t.Errorf("%d nodes in the nodes' log, want 1000", len(evs))
	}
	for n, e := range evs {
		if e[joblog.Submit] != 1 || e[joblog.Execute] != 1 || e[joblog.Terminated] != 1 {
			t.Errorf("node %s: %d submitted, %d executed, %d terminated; want 1 each", n, e[joblog.Submit], e[joblog.Execute], e[joblog.Terminated])
		}
	}
}

// TestSubmitDagSubDAG submits a DAG with a SUBDAG EXTERNAL node whose DAG
// holds a node that sleeps: while it runs, condor q -dag shows the nested
// DAG job under the top DAG job and the node under it, and the default
// view one batch for them all; the DAG completes with each node once.
func TestSubmitDagSubDAG(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("slow.sub", "executable = /bin/sleep\narguments = 6\nqueue\n")
	w.write("inner.dag", "JOB X slow.sub\nJOB Y node.sub\nVARS Y node=\"Y\"\nPARENT X CHILD Y\n")
	w.write("top.dag", "JOB A node.sub\nVARS A node=\"A\"\nSUBDAG EXTERNAL S inner.dag\nJOB Z node.sub\nVARS Z node=\"Z\"\nPARENT A CHILD S\nPARENT S CHILD Z\n")
	top := submitDag(t, w, cm, "top.dag")
	var qdag string
	eventually(t, 90*time.Second, func() error {
		qdag = w.expect(0, "condor", "q", "-pool", cm, "-dag").stdout
		if !strings.Contains(qdag, "|-X") {
			return fmt.Errorf("node X not in the queue:\n%s", qdag)
		}
		return nil
	})
	lines := strings.Split(qdag, "\n")
	idx := func(re string) int {
		for i, l := range lines {
			if regexp.MustCompile(re).MatchString(l) {
				return i
			}
		}
		return -1
	}
	iTop, iS, iX := idx(fmt.Sprintf(`^\s*%d\.0 `, top)), idx(`^\s*\d+\.0 +\|-S `), idx(`^\s*\d+\.0 +\|-X `)
	if iTop < 0 || iS != iTop+1 || iX != iS+1 || !strings.Contains(lines[iX], "  |-X") {
		t.Errorf("condor q -dag does not nest X under S under the DAG job %d:\n%s", top, qdag)
	}
	batch := w.expect(0, "condor", "q", "-pool", cm).stdout
	if n := strings.Count(batch, fmt.Sprintf("top.dag+%d", top)); n != 1 || strings.Contains(batch, "inner.dag+") {
		t.Errorf("the default view does not show one batch for the DAG:\n%s", batch)
	}
	if out := waitDAG(t, w, "top.dag", 120*time.Second); !strings.Contains(out, "exiting with status 0") {
		t.Fatalf("dagman.out:\n%s", out)
	}
	if got := runsOf(t, w, cm); got["A"] != 1 || got["S"] != 1 || got["X"] != 1 || got["Y"] != 1 || got["Z"] != 1 {
		t.Errorf("runs %v, want A, S, X, Y and Z once", got)
	}
}

// TestDAGStatusAndDot runs a DAG with a NODE_STATUS_FILE, which HTCondor's
// classad2 module parses as DagStatus, NodeStatus and StatusEnd ClassAds,
// and a DOT file, a digraph of the DAG's nodes and edges with the
// INCLUDE file's lines.
func TestDAGStatusAndDot(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("head.dot", "label=\"my DAG\";\n")
	w.write("s.dag", diamondDAG+"NODE_STATUS_FILE s.status 0\nDOT s.dot UPDATE INCLUDE head.dot\n")
	w.expect(0, "condor", "dagman", "run", "-pool", cm, "s.dag")
	dot := readFile(t, filepath.Join(w.dir, "s.dot"))
	want := []string{`label="my DAG";`, `"A" [shape=ellipse label="A (DONE)"];`, `"A" -> "B";`, `"A" -> "C";`, `"B" -> "D";`, `"C" -> "D";`}
	if !strings.HasPrefix(dot, "digraph DAG {\n") || !strings.HasSuffix(dot, "}\n") || strings.Count(dot, "{") != 1 || strings.Count(dot, "->") != 4 {
		t.Errorf("s.dot is not a digraph of the DAG:\n%s", dot)
	}
	for _, s := range want {
		if !strings.Contains(dot, s) {
			t.Errorf("s.dot has no %q:\n%s", s, dot)
		}
	}
	if exec.Command("python3", "-c", "import classad2").Run() != nil {
		t.Skip("HTCondor's Python bindings (classad2) are not installed (pip install htcondor)")
	}
	script := `
import sys, classad2
for ad in classad2.parseAds(open(sys.argv[1]).read()):
    t = ad["Type"]
    if t == "DagStatus":
        print(t, ad["DagStatus"], ad["NodesTotal"], ad["NodesDone"])
    elif t == "NodeStatus":
        print(t, ad["Node"], ad["NodeStatus"])
    else:
        print(t)
`
	out, err := exec.Command("python3", "-c", script, filepath.Join(w.dir, "s.status")).CombinedOutput()
	if err != nil {
		t.Fatalf("classad2 cannot parse the node status file: %v\n%s", err, out)
	}
	if got, want := string(out), "DagStatus 5 4 4\nNodeStatus A 5\nNodeStatus B 5\nNodeStatus C 5\nNodeStatus D 5\nStatusEnd\n"; got != want {
		t.Errorf("the node status file as classad2 reads it:\n%s\nwant\n%s", got, want)
	}
}

// TestSubmitDagRemoveWithoutManager stops the DAG manager (SIGSTOP) while
// its node runs and removes the DAG job: the schedd removes the node's
// job itself, by the DAG job's OtherJobRemoveRequirements.
func TestSubmitDagRemoveWithoutManager(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("slow.sub", "executable = /bin/sleep\narguments = 300\nqueue\n")
	w.write("o.dag", "JOB A slow.sub\n")
	dagJob := submitDag(t, w, cm, "o.dag")
	eventually(t, 60*time.Second, func() error {
		r := w.expect(0, "condor", "q", "-pool", cm, "-af", "DAGNodeName", "JobStatus")
		if !strings.Contains(r.stdout, "A 2\n") {
			return fmt.Errorf("node A not running: %q", r.stdout)
		}
		return nil
	})
	var pid int
	if _, err := fmt.Sscanf(readFile(t, filepath.Join(w.dir, "o.dag.lock")), "%d", &pid); err != nil || pid <= 1 {
		t.Fatalf("no DAG manager pid in o.dag.lock: %v", err)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Signal(syscall.SIGKILL) })
	w.expect(0, "condor", "rm", "-pool", cm, strconv.Itoa(dagJob))
	eventually(t, 20*time.Second, func() error {
		if r := w.expect(0, "condor", "q", "-pool", cm, "-af", "DAGNodeName"); strings.Contains(r.stdout, "A") {
			return fmt.Errorf("node A is still in the queue: %q", r.stdout)
		}
		return nil
	})
	r := w.expect(0, "condor", "history", "-pool", cm, "-af", "DAGNodeName", "RemoveReason")
	if !strings.Contains(r.stdout, fmt.Sprintf("A removed because OtherJobRemoveRequirements = DAGManJobId =?= %d fired when job %d.0 was removed", dagJob, dagJob)) {
		t.Errorf("node A's RemoveReason:\n%s", r.stdout)
	}
}

// TestSubmitDagRescue submits a DAG whose node C fails, fixes C and
// submits the DAG again, as condor_submit_dag: it runs from the rescue
// DAG (A and B are not run again) though the DAG's submit file is there;
// then -f renames the rescue DAG and runs the whole DAG again.
func TestSubmitDagRescue(t *testing.T) {
	t.Parallel()
	w, cm := dagWorkdir(t)
	w.write("c.sub", strings.Replace(dagNodeSubmit, "$(mode)", "fail", 1))
	w.write("s.dag", "JOB A node.sub\nJOB B node.sub\nJOB C c.sub\nVARS ALL_NODES node=\"$(JOB)\"\nPARENT A CHILD B\nPARENT B CHILD C\n")
	ended := func(n int) {
		t.Helper()
		eventually(t, 90*time.Second, func() error {
			b, _ := os.ReadFile(filepath.Join(w.dir, "s.dag.dagman.out"))
			if got := strings.Count(string(b), "DAG manager exiting with status"); got < n {
				return fmt.Errorf("%d of %d runs of the DAG ended:\n%s", got, n, b)
			}
			return nil
		})
	}
	submitDag(t, w, cm, "s.dag")
	ended(1)
	if _, err := os.Stat(filepath.Join(w.dir, "s.dag.rescue001")); err != nil {
		t.Fatalf("no rescue DAG after C failed: %v", err)
	}
	w.write("c.sub", dagNodeSubmit)
	r := w.expect(0, "condor", "submit_dag", "-pool", cm, "s.dag")
	if !strings.Contains(r.stdout, "Running rescue DAG 1") {
		t.Errorf("submit_dag with a rescue DAG there:\n%s", r.stdout)
	}
	ended(2)
	if got := runsOf(t, w, cm); got["A"] != 1 || got["B"] != 1 || got["C"] != 2 {
		t.Errorf("runs %v, want A and B once (done in the rescue DAG), C twice", got)
	}
	r = w.expect(0, "condor", "submit_dag", "-pool", cm, "-f", "s.dag")
	if !strings.Contains(r.stdout, "Renamed 1 rescue DAG(s)") {
		t.Errorf("submit_dag -f:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "s.dag.rescue001.old")); err != nil {
		t.Errorf("the rescue DAG was not renamed: %v", err)
	}
	ended(3)
	if got := runsOf(t, w, cm); got["A"] != 2 || got["B"] != 2 || got["C"] != 3 {
		t.Errorf("runs %v after -f, want the whole DAG run again", got)
	}
}
