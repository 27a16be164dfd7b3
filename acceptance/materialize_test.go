package acceptance

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

const materializePool = `
pool "mat" {
  nodes  = 2
  slots  = 8
  config = { NEGOTIATOR_INTERVAL = "1", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.mat.central_manager
}
`

var matEventRE = regexp.MustCompile(`(?m)^(\d{3}) \((\d+)\.(\d+)\.\d+\)`)

// eventsByProc counts the events of each type of cluster's procs in the
// job log at path: type -> proc -> count.
func eventsByProc(t *testing.T, path string, cluster int) map[string]map[int]int {
	t.Helper()
	out := map[string]map[int]int{}
	for _, m := range matEventRE.FindAllStringSubmatch(readFile(t, path), -1) {
		if c, _ := strconv.Atoi(m[2]); c != cluster {
			continue
		}
		p, _ := strconv.Atoi(m[3])
		if out[m[1]] == nil {
			out[m[1]] = map[int]int{}
		}
		out[m[1]][p]++
	}
	return out
}

// clusterStates returns the ProcIds of cluster's jobs in the queue by
// JobStatus.
func clusterStates(w *workdir, cm string, cluster int) (map[int][]int, error) {
	r := w.run("condor", "q", "-pool", cm, "-constraint", fmt.Sprintf("ClusterId == %d", cluster), "-af", "ProcId", "JobStatus")
	if r.code != 0 {
		return nil, fmt.Errorf("condor q: %s", r)
	}
	out := map[int][]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		p, _ := strconv.Atoi(f[0])
		s, _ := strconv.Atoi(f[1])
		out[s] = append(out[s], p)
	}
	return out, nil
}

var totalsRE = regexp.MustCompile(`Total for query: (\d+) jobs; (\d+) completed, (\d+) removed, (\d+) idle, (\d+) running, (\d+) held`)

var unmaterializedRE = regexp.MustCompile(`and (\d+) jobs not yet materialized by (\d+) job factories`)

// queueTotals reads condor q -totals of cluster, counted by the schedd
// at one instant: the jobs in the queue and not done, the idle ones, and
// those its factory has yet to make (-1 when condor q shows no factory).
func queueTotals(w *workdir, cm string, cluster int) (live, idle, unmade int, err error) {
	r := w.run("condor", "q", "-pool", cm, "-totals", strconv.Itoa(cluster))
	if r.code != 0 {
		return 0, 0, 0, fmt.Errorf("condor q: %s", r)
	}
	m := totalsRE.FindStringSubmatch(r.stdout)
	if m == nil {
		return 0, 0, 0, fmt.Errorf("condor q -totals: no totals in %q", r.stdout)
	}
	n := make([]int, len(m))
	for i := 1; i < len(m); i++ {
		n[i], _ = strconv.Atoi(m[i])
	}
	unmade = -1
	if u := unmaterializedRE.FindStringSubmatch(r.stdout); u != nil {
		unmade, _ = strconv.Atoi(u[1])
	}
	return n[1] - n[2] - n[3], n[4], unmade, nil
}

func jobsIn(m map[int][]int) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// TestLateMaterialization submits queue 2000 with max_materialize = 50
// of short jobs: at no poll are more than 50 of the cluster's jobs in
// the queue; the agent running the schedd is killed (kill -9) mid-way
// and brought back; every ProcId 0..1999 runs and terminates exactly
// once, with the argument its $(Process) gives.
func TestLateMaterialization(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", materializePool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	const total, limit = 2000, 50
	w.write("mat.sub", fmt.Sprintf("executable = /bin/echo\narguments = proc $(Process) of $(Cluster)\nlog = mat.log\n"+
		"max_materialize = %d\nrequest_memory = 16\nqueue %d\n", limit, total))
	r := w.expect(0, "condor", "submit", "-pool", cm, "mat.sub")
	if !strings.Contains(r.stdout, fmt.Sprintf("%d job(s) submitted to cluster 1.", total)) {
		t.Fatalf("submit output:\n%s", r.stdout)
	}
	if strings.Contains(r.stderr, "max_materialize") {
		t.Fatalf("max_materialize drew a warning:\n%s", r.stderr)
	}
	r = w.expect(0, "condor", "q", "-pool", cm, "-constraint", "ClusterId == 1 && ProcId == 0", "-af",
		"JobMaterializeLimit", "TotalSubmitProcs", "Args")
	if got := strings.TrimSpace(r.stdout); got != fmt.Sprintf("%d %d proc 0 of 1", limit, total) {
		t.Fatalf("proc 0's JobMaterializeLimit, TotalSubmitProcs and Args: %q", got)
	}
	logPath := filepath.Join(w.dir, "mat.log")
	terminated := func() int { return len(eventsByProc(t, logPath, 1)["005"]) }
	most, killed := 0, false
	eventually(t, 600*time.Second, func() error {
		// max_materialize bounds the procs materialized and not done
		// (a completed or removed one may linger in the queue a moment).
		live, _, unmade, err := queueTotals(w, cm, 1)
		if err != nil {
			return err
		}
		most = max(most, live)
		if live > limit {
			t.Fatalf("%d jobs of the cluster in the queue and not done, max_materialize %d", live, limit)
		}
		done := terminated()
		if done < total-limit && unmade <= 0 {
			t.Fatalf("%d of %d done and condor q shows %d jobs not yet materialized", done, total, unmade)
		}
		if !killed && done >= total/3 {
			killed = true
			killNode(t, w, "mat-0")
			time.Sleep(time.Second)
			w.expect(0, "apply", "-auto-approve")
			t.Logf("killed and restarted the schedd's agent with %d jobs done", done)
			return fmt.Errorf("restarted")
		}
		if done < total || live > 0 {
			return fmt.Errorf("%d of %d terminated, %d in the queue", done, total, live)
		}
		return nil
	})
	if !killed {
		t.Fatal("the schedd's agent was never killed")
	}
	evs := eventsByProc(t, logPath, 1)
	for p := range total {
		if evs["005"][p] != 1 {
			t.Errorf("proc %d: %d terminate events, want 1", p, evs["005"][p])
		}
	}
	for p, n := range evs["005"] {
		if p < 0 || p >= total {
			t.Errorf("proc %d (%d terminate events): not a ProcId of the cluster", p, n)
		}
	}
	if most < limit/2 {
		t.Errorf("at most %d jobs at once in the queue: the factory kept far below max_materialize %d", most, limit)
	}
	r = w.expect(0, "condor", "history", "-pool", cm, "-constraint", "ClusterId == 1", "-af", "ProcId", "Args")
	seen := map[int]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.SplitN(l, " ", 2)
		p, _ := strconv.Atoi(f[0])
		seen[p]++
		if want := fmt.Sprintf("proc %d of 1", p); len(f) != 2 || f[1] != want {
			t.Errorf("history of proc %d: Args %q, want %q", p, l, want)
		}
	}
	if len(seen) != total {
		t.Errorf("history holds %d distinct procs, want %d", len(seen), total)
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("proc %d in the history %d times", p, n)
		}
	}
}

// TestLateMaterializationIdleAndRemove submits with max_idle = 4 jobs
// that run long enough to fill the slots: never more than 4 of them are
// idle, the cluster's ad says its factory's limits, and condor rm of the
// cluster mid-way removes the factory: nothing materializes after it.
func TestLateMaterializationIdleAndRemove(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", materializePool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	const total, maxIdle = 500, 4
	w.write("idle.sub", fmt.Sprintf("executable = /bin/sleep\narguments = 2\nlog = idle.log\nmax_idle = %d\nrequest_memory = 16\nqueue %d\n", maxIdle, total))
	w.expect(0, "condor", "submit", "-pool", cm, "idle.sub")
	maxProc := 0
	eventually(t, 120*time.Second, func() error {
		_, idle, _, err := queueTotals(w, cm, 1)
		if err != nil {
			return err
		}
		if idle > maxIdle {
			t.Fatalf("%d idle jobs, max_idle %d", idle, maxIdle)
		}
		st, err := clusterStates(w, cm, 1)
		if err != nil {
			return err
		}
		for _, ps := range st {
			for _, p := range ps {
				maxProc = max(maxProc, p)
			}
		}
		if maxProc < 40 {
			return fmt.Errorf("procs up to %d materialized", maxProc)
		}
		return nil
	})
	r := w.expect(0, "condor", "q", "-pool", cm, "-constraint", "ClusterId == 1", "-af",
		"JobMaterializeMaxIdle", "TotalSubmitProcs", "JobMaterializePaused")
	if got := strings.Fields(r.stdout); len(got) < 3 || got[0] != strconv.Itoa(maxIdle) || got[1] != strconv.Itoa(total) || got[2] != "0" {
		t.Fatalf("cluster ad's JobMaterializeMaxIdle, TotalSubmitProcs, JobMaterializePaused: %q", r.stdout)
	}
	// condor q's batch view counts the jobs the factory has yet to make.
	r = w.expect(0, "condor", "q", "-pool", cm)
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^\S+\s+ID: 1 .*\s%d 1\.\d+-\d+$`, total)).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "jobs not yet materialized by 1 job factories") {
		t.Fatalf("condor q: want TOTAL %d for cluster 1 and the jobs not yet materialized:\n%s", total, r.stdout)
	}
	w.expect(0, "condor", "rm", "-pool", cm, "1")
	eventually(t, 60*time.Second, func() error {
		st, err := clusterStates(w, cm, 1)
		if err != nil {
			return err
		}
		if jobsIn(st) > 0 {
			return fmt.Errorf("%d jobs left after condor rm", jobsIn(st))
		}
		return nil
	})
	// Nothing is made after the removal.
	time.Sleep(4 * time.Second)
	if st, err := clusterStates(w, cm, 1); err != nil || jobsIn(st) > 0 {
		t.Fatalf("after condor rm of the cluster: %v, %v", st, err)
	}
	evs := eventsByProc(t, filepath.Join(w.dir, "idle.log"), 1)
	if n := len(evs["000"]); n >= total || n < 40 {
		t.Fatalf("%d procs submitted of %d: want those before condor rm only", n, total)
	}
	for p := range len(evs["000"]) {
		if evs["000"][p] != 1 {
			t.Errorf("proc %d: %d submit events, want 1 (procs made in order, once)", p, evs["000"][p])
		}
	}
}

// TestLateMaterializationHTCondorClient submits through HTCondor's
// Python client, whose max_materialize submit is a job factory sent with
// SetJobFactory (and SendMaterializeData for itemdata): 200 procs with
// max_materialize = 20 run once each with never more than 20 of them
// materialized at a poll, and the cluster's ad says the factory's limit
// to the client's query; 30 procs from itemdata (queue from a list) run
// with their items.
func TestLateMaterializationHTCondorClient(t *testing.T) {
	t.Parallel()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", materializePool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	eventually(t, 60*time.Second, func() error {
		_, err := htcondorAs(t, cm, 0, `OUT['n'] = len(SCHEDD.query())`)
		return err
	})
	const total, limit = 200, 20
	logPath := filepath.Join(w.dir, "wheel.log")
	got, err := htcondorAs(t, cm, 0, fmt.Sprintf(`
sub = htcondor2.Submit({'executable': '/bin/echo', 'arguments': 'proc $(Process)', 'log': '%s',
    'request_memory': '16', 'max_materialize': '%d'})
r = SCHEDD.submit(sub, count=%d)
OUT['cluster'] = r.cluster()
OUT['procs'] = r.num_procs()
`, logPath, limit, total))
	if err != nil {
		t.Fatal(err)
	}
	if got["procs"] != float64(total) {
		t.Fatalf("the client's submit with max_materialize: %v", got)
	}
	cluster := int(got["cluster"].(float64))
	// Proc 0, an echo, may have run and left the queue by then: its ad
	// is then in the history.
	got, err = htcondorAs(t, cm, 0, fmt.Sprintf(`
c = 'ClusterId == %d && ProcId == 0'
p = ['JobMaterializeLimit', 'TotalSubmitProcs', 'Args']
ads = SCHEDD.query(constraint=c, projection=p) or list(SCHEDD.history(constraint=c, projection=p, match=1))
OUT['ad'] = {k: str(v) for k, v in ads[0].items()} if ads else {}
`, cluster))
	if err != nil {
		t.Fatal(err)
	}
	if ad, _ := got["ad"].(map[string]any); ad["JobMaterializeLimit"] != strconv.Itoa(limit) || ad["TotalSubmitProcs"] != strconv.Itoa(total) ||
		ad["Args"] != "proc 0" {
		t.Fatalf("proc 0 as the client queries it: %v; want JobMaterializeLimit %d, TotalSubmitProcs %d, Args proc 0", got, limit, total)
	}
	terminated := func() int { return len(eventsByProc(t, logPath, cluster)["005"]) }
	most := 0
	eventually(t, 600*time.Second, func() error {
		live, _, _, err := queueTotals(w, cm, cluster)
		if err != nil {
			return err
		}
		most = max(most, live)
		if live > limit {
			t.Fatalf("%d jobs of the cluster in the queue and not done, max_materialize %d", live, limit)
		}
		if done := terminated(); done < total || live > 0 {
			return fmt.Errorf("%d of %d terminated, %d in the queue", done, total, live)
		}
		return nil
	})
	evs := eventsByProc(t, logPath, cluster)
	for p := range total {
		if evs["005"][p] != 1 || evs["000"][p] != 1 {
			t.Errorf("proc %d: %d submit and %d terminate events, want 1 each", p, evs["000"][p], evs["005"][p])
		}
	}
	if len(evs["005"]) != total {
		t.Errorf("%d procs terminated, want %d", len(evs["005"]), total)
	}
	if most < limit/2 {
		t.Errorf("at most %d jobs at once in the queue: the factory kept far below max_materialize %d", most, limit)
	}

	// Item data: queue from a list, sent with SendMaterializeData.
	const items = 30
	got, err = htcondorAs(t, cm, 0, fmt.Sprintf(`
sub = htcondor2.Submit({'executable': '/bin/echo', 'arguments': '$(word) $(n)', 'request_memory': '16',
    'max_materialize': '7', 'hold': 'true', 'MY.Word': '"$(word)"'})
r = SCHEDD.submit(sub, itemdata=iter([{'word': 'w%%d' %% i, 'n': str(i)} for i in range(%d)]))
OUT['cluster'] = r.cluster()
OUT['procs'] = r.num_procs()
`, items))
	if err != nil {
		t.Fatal(err)
	}
	if got["procs"] != float64(items) {
		t.Fatalf("the client's submit with itemdata and max_materialize: %v", got)
	}
	ic := int(got["cluster"].(float64))
	// The procs are held: 7 are materialized; removing them lets the
	// factory make the next ones, until all 30 were seen, each once.
	seen := map[int]string{}
	eventually(t, 300*time.Second, func() error {
		r := w.expect(0, "condor", "q", "-pool", cm, "-constraint", fmt.Sprintf("ClusterId == %d", ic), "-af", "ProcId", "Args", "Word")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) > 7 {
			t.Fatalf("%d procs of the itemdata cluster in the queue, max_materialize 7:\n%s", len(lines), r.stdout)
		}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 4 {
				continue
			}
			p, _ := strconv.Atoi(f[0])
			if want := fmt.Sprintf("w%d %d w%d", p, p, p); strings.Join(f[1:], " ") != want {
				t.Fatalf("proc %d: Args and Word %q, want %q", p, strings.Join(f[1:], " "), want)
			}
			seen[p] = l
			w.run("condor", "rm", "-pool", cm, fmt.Sprintf("%d.%d", ic, p))
		}
		if len(seen) < items {
			return fmt.Errorf("%d of %d item procs seen", len(seen), items)
		}
		return nil
	})

	r := w.expect(0, "condor", "q", "-pool", cm, "-constraint", fmt.Sprintf("ClusterId > %d", ic), "-af", "ClusterId")
	if strings.TrimSpace(r.stdout) != "" {
		t.Fatalf("jobs of other clusters in the queue: %q", r.stdout)
	}
}
