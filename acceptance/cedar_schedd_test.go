package acceptance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/cedar/cedartest"
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
// history, and the job event log read by htcondor2.JobEventLog. A
// malformed attribute fails its whole submit.
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

	// Constraints on ClusterId, ProcId, Owner and JobStatus, which the
	// schedd narrows through its queue's indexes before it evaluates
	// them, select what the same constraints written so that they cannot
	// be narrowed (every job evaluated) select.
	got, err = htcondorAs(t, cm, 0, fmt.Sprintf(`
pairs = [
    ('ClusterId == %[1]d && ProcId == 7', '(ClusterId + 0) == %[1]d && (ProcId + 0) == 7'),
    ('Owner == "ROOT" && JobStatus == 5 && ProcId < 10', 'strcat(Owner) == "ROOT" && (JobStatus + 0) == 5 && (ProcId + 0) < 10'),
    ('ClusterId == %[2]d || MY.ClusterId == %[1]d && 995 <= ProcId', '(ClusterId + 0) == %[2]d || (ClusterId + 0) == %[1]d && (ProcId + 0) >= 995'),
    ('JobStatus == 2', '(JobStatus + 0) == 2'),
    ('Owner =?= "root" && (ClusterId == %[2]d || Item == "3")', 'strcat(Owner) =?= "root" && ((ClusterId + 0) == %[2]d || Item == "3")'),
]
def ids(c):
    return sorted('%%d.%%d' %% (a['ClusterId'], a['ProcId']) for a in SCHEDD.query(constraint=c, projection=['ClusterId', 'ProcId']))
OUT['pairs'] = [[len(ids(a)), ids(a) == ids(b)] for a, b in pairs]
`, big, one))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got["pairs"]) != "[[1 true] [11 true] [6 true] [0 true] [2 true]]" {
		t.Errorf("narrowed queries (jobs, same as unnarrowed): %v", got["pairs"])
	}

	// Another user's rights: TestCEDARAgentOtherUser, whose client runs
	// as nobody (the Python client here is not reachable by nobody).

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

// agentOtherUserEnv carries the agent's address to the test binary run
// as another user (TestCEDARAgentOtherUserClient).
const agentOtherUserEnv = "POND_CEDAR_AGENT_OTHER_USER"

// TestCEDARAgentOtherUser runs pond's CEDAR client as user nobody against
// a pool's agent (FS proves the uid of the process; the agent grants a
// user other than root its own jobs only): nobody may submit a job of its
// own, but may not remove root's job, edit it, act as root, nor submit a
// job whose Owner is root; root's job is left as it was.
func TestCEDARAgentOtherUser(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "running the client as user nobody")
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", cedarPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eventually(t, 60*time.Second, func() error {
		_, err := cedartest.QueryJobs(ctx, cm, "true")
		return err
	})
	cluster, rval, reason, err := cedartest.Submit{Procs: 1, Cluster: cedartest.BaseCluster}.Run(ctx, cm)
	if err != nil || rval != 0 {
		t.Fatalf("root's submit: %d %q %v", rval, reason, err)
	}
	rootJob := fmt.Sprintf("%d.0", cluster)

	// The test binary, where nobody can run it.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pond-cedar-client-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client.test")
	src, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestCEDARAgentOtherUserClient$", "-test.v")
	// POND_BIN keeps the harness from building pondctl, which the
	// client does not use.
	cmd.Env = []string{agentOtherUserEnv + "=" + cm, "ROOT_JOB=" + rootJob, "HOME=/", "TMPDIR=/tmp", "POND_BIN=" + pondBin}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the client as nobody: %v\n%s", err, out)
	}
	var got map[string]any
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(rest), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got == nil {
		t.Fatalf("the client as nobody printed no result:\n%s", out)
	}
	want := map[string]any{
		"user": "nobody@", "own_submit": 0.0, "own_owner": `"nobody"`,
		"remove_denied": 1.0, "remove_success": 0.0, "edit_errno": 13.0, "effective_owner": 13.0, "submit_as_root": -1.0,
	}
	for k, v := range want {
		if k == "user" {
			if !strings.HasPrefix(fmt.Sprint(got[k]), "nobody@") {
				t.Errorf("user = %v, want nobody@…", got[k])
			}
			continue
		}
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	ads, err := cedartest.QueryJobs(ctx, cm, "ClusterId == "+fmt.Sprint(cluster), "Owner", "JobStatus", "Colour")
	if err != nil || len(ads) != 1 {
		t.Fatalf("root's job after the other user's tries: %v %v", ads, err)
	}
	if o, _ := ads[0].EvalAttr("Owner").StringValue(); o != "root" {
		t.Errorf("root's job has Owner %q", o)
	}
	if _, ok := ads[0].Lookup("Colour"); ok {
		t.Errorf("root's job was edited: %v", ads[0])
	}
	if s, _ := ads[0].EvalAttr("JobStatus").IntValue(); s != 5 {
		t.Errorf("root's job has JobStatus %d", s)
	}
}

// TestCEDARAgentOtherUserClient is the client TestCEDARAgentOtherUser runs
// as another user; it does nothing otherwise.
func TestCEDARAgentOtherUserClient(t *testing.T) {
	addr := os.Getenv(agentOtherUserEnv)
	if addr == "" {
		return
	}
	rootJob := os.Getenv("ROOT_JOB")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]any{}

	st, sess, err := cedartest.Dial(ctx, addr, cedartest.CmdQueryJobAds)
	if err != nil {
		t.Fatal(err)
	}
	st.Conn().Close()
	out["user"] = sess.User

	own, rval, _, err := cedartest.Submit{Procs: 1, Cluster: cedartest.BaseCluster}.Run(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	out["own_submit"] = rval
	if ads, err := cedartest.QueryJobs(ctx, addr, fmt.Sprintf("ClusterId == %d", own), "Owner"); err == nil && len(ads) == 1 {
		if e, ok := ads[0].Lookup("Owner"); ok {
			out["own_owner"] = e.String()
		}
	}

	res, err := cedartest.Act(ctx, addr, cedartest.ActionRemove, rootJob, "not mine")
	if err != nil {
		t.Fatal(err)
	}
	out["remove_denied"], _ = res.EvalAttr("result_total_5").IntValue()
	out["remove_success"], _ = res.EvalAttr("result_total_1").IntValue()

	q, err := cedartest.DialQueue(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := strconv.Atoi(strings.Split(rootJob, ".")[0])
	if _, out["edit_errno"], err = q.Call(cedartest.QSetAttribute, rc, 0, `"red"`, "Colour"); err != nil {
		t.Fatal(err)
	}
	if _, out["effective_owner"], err = q.Call(cedartest.QSetOwner, "root"); err != nil {
		t.Fatal(err)
	}
	if rval, _, reason, err := q.Commit(); err != nil || rval != 0 {
		t.Fatalf("commit of nothing: %d %q %v", rval, reason, err)
	}
	q.Close()

	cl := append([]cedartest.Attr(nil), cedartest.BaseCluster...)
	cl = append(cl, cedartest.Attr{Name: "Owner", Value: `"root"`})
	_, rval, _, err = cedartest.Submit{Procs: 1, Cluster: cl}.Run(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	out["submit_as_root"] = rval

	b, _ := json.Marshal(out)
	fmt.Printf("RESULT %s\n", b)
}
