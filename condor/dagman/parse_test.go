package dagman

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// diamond is the DAG of HTCondor's DAGMan manual's first example.
const diamond = `# File name: diamond.dag

JOB  A  A.condor
JOB  B  B.condor
JOB  C  C.condor
JOB  D  D.condor
PARENT A CHILD B C
PARENT B C CHILD D
`

// manual is a DAG using most of the commands as the manual shows them.
const manual = `JOB  A  A.sub DIR  dirA
Job  B  B.sub NOOP
job  C  C.sub DONE
JOB  D  D.sub
FINAL F final.sub
Parent A child B C
PARENT B C CHILD D
SCRIPT PRE  B  pre.sh $JOB .gz
SCRIPT DEFER 4 300 POST B  post.sh $JOB $RETURN $RETRY $MAX_RETRIES $JOBID
RETRY  C 3 UNLESS-EXIT 2
VARS   A state="Wisconsin" quote="a \"b\" \\ c" single="'x'"
VARS   A PREPEND late="1"
PRE_SKIP A 1
ABORT-DAG-ON D 10 RETURN 1
ABORT-DAG-ON A 2
PRIORITY D 100
CATEGORY A small
CATEGORY B small
MAXJOBS small 1
CONFIG dagman.config
DOT dag.dot UPDATE DONT-OVERWRITE INCLUDE head.dot
NODE_STATUS_FILE status.txt 30 ALWAYS-UPDATE
RETRY ALL_NODES 2
PRIORITY ALL_NODES 5
`

func TestParseDiamond(t *testing.T) {
	d, err := Parse("diamond.dag", []byte(diamond))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range d.Nodes {
		names = append(names, n.Name)
	}
	if got := strings.Join(names, ","); got != "A,B,C,D" {
		t.Fatalf("nodes %s", got)
	}
	for name, want := range map[string][2]string{"A": {"", "B,C"}, "B": {"A", "D"}, "C": {"A", "D"}, "D": {"B,C", ""}} {
		n := d.Node(name)
		if got := [2]string{strings.Join(n.Parents, ","), strings.Join(n.Children, ",")}; got != want {
			t.Errorf("%s: parents/children %q, want %q", name, got, want)
		}
		if n.SubmitFile != name+".condor" {
			t.Errorf("%s: submit file %s", name, n.SubmitFile)
		}
	}
}

func TestParseManual(t *testing.T) {
	d, err := Parse("m.dag", []byte(manual))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c, dd, f := d.Node("A"), d.Node("B"), d.Node("C"), d.Node("D"), d.Node("F")
	if a.Dir != "dirA" || !b.Noop || !c.Done || !f.Final || d.Final != f {
		t.Errorf("JOB options: A.Dir=%q B.Noop=%v C.Done=%v F.Final=%v", a.Dir, b.Noop, c.Done, f.Final)
	}
	if b.Pre == nil || b.Pre.Exe != "pre.sh" || strings.Join(b.Pre.Args, " ") != "$JOB .gz" {
		t.Errorf("PRE %+v", b.Pre)
	}
	if p := b.Post; p == nil || !p.Deferred || p.DeferStatus != 4 || p.DeferTime != 300*time.Second || len(p.Args) != 5 {
		t.Errorf("POST %+v", b.Post)
	}
	if c.Retry != 3 || c.RetryUnlessExit == nil || *c.RetryUnlessExit != 2 {
		t.Errorf("RETRY C: %d %v", c.Retry, c.RetryUnlessExit)
	}
	// ALL_NODES: a node's own RETRY wins, the others get 2; never the FINAL node.
	if a.Retry != 2 || dd.Retry != 2 || f.Retry != 0 {
		t.Errorf("RETRY ALL_NODES: A %d D %d F %d", a.Retry, dd.Retry, f.Retry)
	}
	if dd.Priority != 100 || a.Priority != 5 || f.Priority != 0 {
		t.Errorf("PRIORITY: D %d A %d F %d", dd.Priority, a.Priority, f.Priority)
	}
	want := []Var{{"state", "Wisconsin", false}, {"quote", `a "b" \ c`, false}, {"late", "1", true}}
	if len(a.Vars) != 4 || a.Vars[0] != want[0] || a.Vars[1] != want[1] || a.Vars[3] != want[2] {
		t.Errorf("VARS %+v", a.Vars)
	}
	if a.PreSkip == nil || *a.PreSkip != 1 {
		t.Errorf("PRE_SKIP %v", a.PreSkip)
	}
	if ab := dd.AbortOn; ab == nil || ab.Value != 10 || !ab.HasReturn || ab.Return != 1 {
		t.Errorf("ABORT-DAG-ON D %+v", dd.AbortOn)
	}
	if ab := a.AbortOn; ab == nil || ab.Value != 2 || ab.HasReturn {
		t.Errorf("ABORT-DAG-ON A %+v", a.AbortOn)
	}
	if a.Category != "small" || d.MaxJobs["small"] != 1 {
		t.Errorf("CATEGORY %q MAXJOBS %v", a.Category, d.MaxJobs)
	}
	if d.Config != "dagman.config" || d.Dot == nil || !d.Dot.Update || d.Dot.Overwrite || d.Dot.Include != "head.dot" {
		t.Errorf("CONFIG %q DOT %+v", d.Config, d.Dot)
	}
	if d.NodeStatusFile != "status.txt" || d.NodeStatusInterval != 30*time.Second || !d.NodeStatusAlways {
		t.Errorf("NODE_STATUS_FILE %q %v %v", d.NodeStatusFile, d.NodeStatusInterval, d.NodeStatusAlways)
	}
}

func TestParseSplice(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("s/inner.dag", "JOB X x.sub\nJOB Y y.sub\nPARENT X CHILD Y\n")
	write("top.dag", "JOB A a.sub\nJOB Z z.sub\nSPLICE S inner.dag DIR s\nSUBDAG EXTERNAL E sub.dag\nPARENT A CHILD S\nPARENT S CHILD Z E\n")
	d, err := ParseFile(filepath.Join(dir, "top.dag"))
	if err != nil {
		t.Fatal(err)
	}
	x, y := d.Node("S+X"), d.Node("S+Y")
	if x == nil || y == nil {
		t.Fatalf("splice nodes missing: %v", d.byName)
	}
	if strings.Join(x.Parents, ",") != "A" || strings.Join(y.Children, ",") != "Z,E" || x.Dir != filepath.Join(dir, "s") {
		t.Errorf("S+X parents %v dir %s, S+Y children %v", x.Parents, x.Dir, y.Children)
	}
	if !d.Node("E").SubDAG {
		t.Error("E is not a SUBDAG")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unknown command", "JOB A a.sub\nFOO A\n", "x.dag:2:1: unknown command \"FOO\""},
		{"unknown parent", "JOB A a.sub\nPARENT B CHILD A\n", "x.dag:2:8: unknown node B"},
		{"no child", "JOB A a.sub\nPARENT A\n", "x.dag:2:1: PARENT without CHILD"},
		{"duplicate", "JOB A a.sub\n  JOB A b.sub\n", "x.dag:2:7: node A is already defined at x.dag:1"},
		{"retry count", "JOB A a.sub\nRETRY A x\n", "x.dag:2:9: retry count \"x\""},
		{"vars unquoted", "JOB A a.sub\nVARS A k=v\n", "x.dag:2:10: the value of VARS macro k must be in double quotes"},
		{"vars unterminated", "JOB A a.sub\nVARS A k=\"v\n", "x.dag:2:10: unterminated quoted value"},
		{"vars queue", "JOB A a.sub\nVARS A queue_x=\"1\"\n", "may not begin with \"queue\""},
		{"script kind", "JOB A a.sub\nSCRIPT MIDDLE A x.sh\n", "x.dag:2:8: expected PRE or POST"},
		{"two finals", "FINAL F f.sub\nFINAL G g.sub\n", "x.dag:2:1: a second FINAL node G"},
		{"final parent", "FINAL F f.sub\nJOB A a.sub\nPARENT A CHILD F\n", "the FINAL node F cannot have parents"},
		{"reserved", "JOB PARENT a.sub\n", "x.dag:1:5: \"PARENT\" is a reserved word"},
		{"plus", "JOB a+b a.sub\n", "x.dag:1:6: node name \"a+b\" contains '+'"},
		{"cycle", "JOB A a.sub\nJOB B b.sub\nJOB C c.sub\nPARENT A CHILD B\nPARENT B CHILD C\nPARENT C CHILD A\n",
			"x.dag:1: cycle among the nodes: A -> B -> C -> A"},
		{"self cycle", "JOB A a.sub\nPARENT A CHILD A\n", "cycle among the nodes: A -> A"},
		{"abort return", "JOB A a.sub\nABORT-DAG-ON A 1 RETURN 300\n", "x.dag:2:25: RETURN code \"300\""},
		{"missing splice", "SPLICE S /nonexistent/s.dag\n", "x.dag:1:10: reading splice S"},
		{"subdag", "SUBDAG A a.dag\n", "SUBDAG must be followed by EXTERNAL"},
		{"job option", "JOB A a.sub FOO\n", "x.dag:1:13: unexpected \"FOO\""},
		{"unsupported", "JOBSTATE_LOG x\n", "x.dag:1:1: JOBSTATE_LOG is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.dag", []byte(tc.text))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
