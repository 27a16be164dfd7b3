package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// limitsPool is a one-node pool of six slots with the knobs given.
func limitsPool(name, knobs string) string {
	return fmt.Sprintf(`
pool %[1]q {
  nodes  = 1
  slots  = 6
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "2", %[2]s }
}

output "cm" {
  value = pool.%[1]s.central_manager
}
`, name, knobs)
}

var eventRE = regexp.MustCompile(`(?m)^(001|005) \((\d+)\.(\d+)\.\d+\) (\S+ \S+)`)

// maxConcurrent reads job logs and returns how many jobs ran at once at
// most (from their execute and terminate events) and how many finished.
func maxConcurrent(t *testing.T, logs ...string) (int, int) {
	t.Helper()
	type span struct{ start, end time.Time }
	spans := map[string]*span{}
	for _, log := range logs {
		for _, m := range eventRE.FindAllStringSubmatch(readFile(t, log), -1) {
			at, err := time.ParseInLocation("2006-01-02 15:04:05", m[4], time.Local)
			if err != nil {
				t.Fatalf("%s: event time %q: %v", log, m[4], err)
			}
			id := log + m[2] + "." + m[3]
			if spans[id] == nil {
				spans[id] = &span{}
			}
			if m[1] == "001" {
				spans[id].start = at
			} else {
				spans[id].end = at
			}
		}
	}
	most, done := 0, 0
	for _, s := range spans {
		if !s.end.IsZero() {
			done++
		}
		n := 0
		for _, o := range spans {
			if !o.start.After(s.start) && (o.end.IsZero() || o.end.After(s.start)) {
				n++
			}
		}
		most = max(most, n)
	}
	return most, done
}

func waitEmpty(t *testing.T, w *workdir, cm string) {
	t.Helper()
	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "ProcId", "JobStatus")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "" {
			return fmt.Errorf("queue: %s", r)
		}
		return nil
	})
}

// TestMaxJobsRunning runs ten jobs under MAX_JOBS_RUNNING = 2 on six
// slots: never more than two run at once, and all ten finish.
func TestMaxJobsRunning(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(limitsPool("maxrun", `MAX_JOBS_RUNNING = "2"`))
	w.write("sleep.sub", "executable = /bin/sleep\narguments = 2\nlog = sleep.log\nqueue 10\n")
	w.expect(0, "condor", "submit", "-pool", cm, "sleep.sub")
	waitEmpty(t, w, cm)
	most, done := maxConcurrent(t, filepath.Join(w.dir, "sleep.log"))
	if done != 10 || most > 2 || most < 1 {
		t.Fatalf("%d jobs finished, at most %d at once; want 10, at most 2:\n%s", done, most, readFile(t, filepath.Join(w.dir, "sleep.log")))
	}
}

// TestConcurrencyLimitAcrossUsers runs the jobs of two users, nobody and
// daemon, each submitting with a token of its own from a directory it
// owns, that use the concurrency limit xsw, bounded to 3 by XSW_LIMIT, on
// six slots: every job runs, not as root, its outputs are its owner's,
// never more than three run at once, and the negotiator's ad shows the
// limit.
func TestConcurrencyLimitAcrossUsers(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "jobs of two users need an agent that runs as root")
	w := newWorkdir(t, "")
	cm := w.applyPool(limitsPool("conclim", `XSW_LIMIT = "3"`))
	// The test's own directory is root's alone: each user submits from a
	// directory it owns, under one anyone may pass through.
	base, err := os.MkdirTemp("", "pond-limits")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	mustAll(t, os.Chmod(base, 0o755))
	users := []string{"nobody", "daemon"}
	uids := map[string]uint32{}
	var logs []string
	for _, name := range users {
		acct, err := user.Lookup(name)
		if err != nil {
			testenv.SkipOrFailf(t, "user %s: %v", name, err)
		}
		uid, _ := strconv.Atoi(acct.Uid)
		gid, _ := strconv.Atoi(acct.Gid)
		uids[name] = uint32(uid)
		home := filepath.Join(base, name)
		mustAll(t, os.Mkdir(home, 0o755), os.Chown(home, uid, gid))
		log := filepath.Join(home, "job.log")
		logs = append(logs, log)
		w.write(name+".sub", fmt.Sprintf("initialdir = %s\nexecutable = /bin/sh\narguments = \"-c 'id -u; sleep 2'\"\noutput = out.$(Process)\nlog = %s\nconcurrency_limits = XSW\nqueue 5\n", home, log))
		tok := w.expect(0, "token", "create", "-subject", name, "-scope", "WRITE", "-lifetime", "1h")
		env := w.env
		w.env = append(append([]string(nil), env...), "POND_TOKEN="+strings.TrimSpace(tok.stdout))
		w.expect(0, "condor", "submit", "-pool", cm, filepath.Join(w.dir, name+".sub"))
		w.env = env
	}
	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "ProcId", "Owner", "JobStatus", "HoldReason")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "" {
			return fmt.Errorf("queue: %s", r)
		}
		return nil
	})
	most, done := maxConcurrent(t, logs...)
	if done != 10 || most > 3 || most < 2 {
		t.Fatalf("%d jobs finished, at most %d at once; want 10, at most 3:\n%s\n%s", done, most, readFile(t, logs[0]), readFile(t, logs[1]))
	}
	for _, name := range users {
		for p := range 5 {
			out := filepath.Join(base, name, fmt.Sprintf("out.%d", p))
			if got := strings.TrimSpace(readFile(t, out)); got == "" || got == "0" {
				t.Errorf("%s's job %d ran as uid %q", name, p, got)
			}
			if fi, err := os.Stat(out); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uids[name] {
				t.Errorf("%s's job %d's output is not %s's: %v", name, p, name, err)
			}
		}
	}
	if r := w.run("condor", "status", "-pool", cm, "-negotiator", "-l"); !strings.Contains(r.stdout, "PondConcurrencyLimitMax_xsw = 3.0") || !strings.Contains(r.stdout, "ConcurrencyLimit_xsw = ") {
		t.Errorf("the negotiator's ad does not show the xsw limit of 3:\n%s", r)
	}
}

// TestMaxJobsSubmitted refuses a submit that would take the queue over
// MAX_JOBS_SUBMITTED, with HTCondor's message, and queues none of it.
func TestMaxJobsSubmitted(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(limitsPool("maxsub", `MAX_JOBS_SUBMITTED = "3", START = "False"`))
	w.write("two.sub", "executable = /bin/true\nqueue 2\n")
	w.expect(0, "condor", "submit", "-pool", cm, "two.sub")
	r := w.expect(1, "condor", "submit", "-pool", cm, "two.sub")
	if !strings.Contains(r.stdout+r.stderr, "Number of submitted jobs would exceed MAX_JOBS_SUBMITTED") {
		t.Errorf("refused submit said: %s", r)
	}
	q := w.expect(0, "condor", "q", "-pool", cm, "-af", "ClusterId", "ProcId")
	ids := strings.Fields(q.stdout)
	sort.Strings(ids)
	if strings.Join(ids, " ") != "0 1 1 1" {
		t.Errorf("queue after the refused submit: %q; want cluster 1's two jobs only", q.stdout)
	}
}

// TestBetterAnalyze asks condor q -better-analyze why idle jobs do not
// run, on a pool of six slots with MAX_JOBS_RUNNING = 2 and a concurrency
// limit xsw of 1: a job whose Requirements no slot meets is told the
// condition that rejects them, a job waiting for xsw is told the limit,
// its use and bound, and once two jobs run, a job is told
// MAX_JOBS_RUNNING; -json says the same.
func TestBetterAnalyze(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(limitsPool("analyze", `MAX_JOBS_RUNNING = "2", XSW_LIMIT = "1"`))
	submit := func(name, extra string) string {
		w.write(name+".sub", "executable = /bin/sleep\narguments = 300\n"+extra+"queue\n")
		r := w.expect(0, "condor", "submit", "-pool", cm, name+".sub")
		m := regexp.MustCompile(`submitted to cluster (\d+)`).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("submit %s: %s", name, r)
		}
		return m[1] + ".0"
	}
	analyze := func(job string, want ...string) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			r := w.run("condor", "q", "-pool", cm, "-better-analyze", job)
			if r.code != 0 {
				return fmt.Errorf("better-analyze %s: %s", job, r)
			}
			for _, s := range want {
				if !strings.Contains(r.stdout, s) {
					return fmt.Errorf("better-analyze %s does not say %q:\n%s", job, s, r.stdout)
				}
			}
			return nil
		})
	}
	running := func(job string) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			if r := w.run("condor", "q", "-pool", cm, job, "-af", "JobStatus"); strings.TrimSpace(r.stdout) != "2" {
				return fmt.Errorf("job %s: %s", job, r)
			}
			return nil
		})
	}
	first := submit("first", "concurrency_limits = XSW\n")
	running(first)
	big := submit("big", "requirements = Memory > 10000000\n")
	analyze(big, "[0]           0  Memory > 10000000", "6 are rejected by your job's requirements",
		"Condition [0] Memory > 10000000 rejects 6 of the 6 slots")
	second := submit("second", "concurrency_limits = XSW\n")
	analyze(second, "Concurrency limit xsw is full: 1 of 1 in use, the job needs 1")
	r := w.expect(0, "condor", "q", "-pool", cm, "-better-analyze", "-json", second)
	var out []struct {
		JobId    string
		Blockers []struct{ Kind, Name string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 1 || len(out[0].Blockers) == 0 ||
		out[0].Blockers[0].Kind != "concurrency-limit" || out[0].Blockers[0].Name != "xsw" {
		t.Errorf("better-analyze -json: %v: %s", err, r)
	}
	plain := submit("plain", "")
	running(plain)
	third := submit("third", "")
	analyze(third, "The schedd runs 2 jobs, MAX_JOBS_RUNNING = 2")
	if r := w.run("condor", "q", "-pool", cm, third, "-af", "JobStatus"); strings.TrimSpace(r.stdout) != "1" {
		t.Errorf("the job MAX_JOBS_RUNNING holds back is not idle: %s", r)
	}
}

// TestQueueLimitsHTCondorClient submits with HTCondor's own Python client
// over each queue limit: the schedd refuses the submit's commit with the
// reason pondctl condor submit gives ("Number of submitted jobs would
// exceed ..."), so Schedd.submit raises with it, and the queue keeps the
// jobs it had and gains none.
func TestQueueLimitsHTCondorClient(t *testing.T) {
	t.Parallel()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	tests := map[string]func(t *testing.T){}
	for _, tc := range []struct {
		knob  string
		value string
		first int // jobs submitted first, within the limit
		then  int // jobs of the refused submit
	}{
		{"MAX_JOBS_SUBMITTED", "3", 2, 2},
		{"MAX_JOBS_PER_OWNER", "3", 3, 1},
		{"MAX_JOBS_PER_SUBMISSION", "4", 2, 5},
	} {
		tests[tc.knob] = func(t *testing.T) {
			name := strings.ToLower(strings.ReplaceAll(tc.knob, "_", ""))
			w := newWorkdir(t, "")
			cm := w.applyPool(limitsPool(name, fmt.Sprintf(`%s = "%s", START = "False"`, tc.knob, tc.value)))
			eventually(t, 60*time.Second, func() error {
				_, err := htcondorAs(t, cm, 0, `OUT['n'] = len(SCHEDD.query())`)
				return err
			})
			got, err := htcondorAs(t, cm, 0, fmt.Sprintf(`
sub = {'executable': '/bin/true', 'hold': 'true'}
OUT['first'] = SCHEDD.submit(htcondor2.Submit(sub), count=%d).num_procs()
try:
    SCHEDD.submit(htcondor2.Submit(sub), count=%d)
    OUT['err'] = ''
except Exception as e:
    OUT['err'] = str(e)
OUT['ids'] = sorted('%%d.%%d' %% (a['ClusterId'], a['ProcId']) for a in SCHEDD.query(projection=['ClusterId', 'ProcId']))
`, tc.first, tc.then))
			if err != nil {
				t.Fatal(err)
			}
			if got["first"].(float64) != float64(tc.first) {
				t.Fatalf("the submit within %s: %v", tc.knob, got)
			}
			if want := "Number of submitted jobs would exceed " + tc.knob; !strings.Contains(fmt.Sprint(got["err"]), want) {
				t.Errorf("the submit over %s raised %q; want %q", tc.knob, got["err"], want)
			}
			var ids []string
			for _, id := range got["ids"].([]any) {
				ids = append(ids, id.(string))
			}
			var want []string
			for p := 0; p < tc.first; p++ {
				want = append(want, fmt.Sprintf("1.%d", p))
			}
			if strings.Join(ids, " ") != strings.Join(want, " ") {
				t.Errorf("queue after the refused submit: %v; want %v", ids, want)
			}
		}
	}
	runAtOnce(t, tests)
}
