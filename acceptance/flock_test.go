package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deniedPool adds to examples/flock a third pool, closer to nothing but
// with four idle slots, and a second flock from busy to any pool of the
// sea that denies it: the pool is announced, never willing, and never
// gets a job.
const deniedPool = `
pool "denied" {
  provider = provider.local
  nodes    = 1
  slots    = 4
}

flock "any" {
  from = [pool.busy.central_manager]
  deny = "PoolName == \"denied\""
}
`

// flockJob is one line of "condor history -af ClusterId ProcId RemoteHost
// PondFlockedTo".
type flockJob struct{ id, host, pool string }

// flockHistory reads the history of busy's schedd.
func flockHistory(t *testing.T, w *workdir, busy string) map[string]flockJob {
	t.Helper()
	r := w.expect(0, "condor", "history", "-pool", busy, "-af", "ClusterId", "ProcId", "RemoteHost", "PondFlockedTo")
	out := map[string]flockJob{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		j := flockJob{id: f[0] + "." + f[1], host: f[2], pool: f[3]}
		out[j.id] = j
	}
	return out
}

// TestFlock applies examples/flock (plus a denied pool) and submits to
// busy, whose one slot cannot take the jobs soon: they run in spare too
// (RemoteHost slotN@spare-M, PondFlockedTo spare), each once (one execute
// and one termination event in the job log), never in the denied pool.
// Destroying the flocks while flocked jobs run lets them finish there, and
// the jobs submitted afterwards all run in busy.
func TestFlock(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "flock")
	w.write("denied.pond.hcl", deniedPool)
	w.expect(0, "init")
	w.expect(0, "apply", "-auto-approve")
	busy, spare := w.output("busy"), w.output("spare")
	if busy == "" || spare == "" || busy == spare {
		t.Fatalf("outputs busy %q spare %q", busy, spare)
	}

	// refresh (and plan) reads the willing list the flocks observe: spare,
	// not denied; the changes it sees are none to make.
	eventually(t, 60*time.Second, func() error {
		w.expect(0, "refresh")
		for _, f := range []string{"flock.overflow", "flock.any"} {
			r := w.expect(0, "state", "show", f)
			if !regexp.MustCompile(`pool\s+= "spare"`).MatchString(r.stdout) {
				return fmt.Errorf("%s: %s", f, r.stdout)
			}
			if regexp.MustCompile(`pool\s+= "denied"`).MatchString(r.stdout) {
				t.Fatalf("the denied pool is willing: %s", r.stdout)
			}
		}
		return nil
	})
	w.expect(0, "plan", "-detailed-exitcode")

	jobs := filepath.Join(w.dir, "jobs")
	if err := os.MkdirAll(jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	sub := func(name string, n, secs int) {
		w.write(filepath.Join("jobs", name+".sub"), fmt.Sprintf(
			"executable = /bin/sleep\narguments = %d\nlog = %s.log\nrequest_cpus = 1\nrequest_memory = 16\nqueue %d\n", secs, name, n))
		w.expect(0, "condor", "submit", "-pool", busy, filepath.Join(w.dir, "jobs", name+".sub"))
	}
	waitDone := func(cluster string, n int) map[string]flockJob {
		t.Helper()
		var hist map[string]flockJob
		eventually(t, 3*time.Minute, func() error {
			hist = flockHistory(t, w, busy)
			done := 0
			for id := range hist {
				if strings.HasPrefix(id, cluster+".") {
					done++
				}
			}
			if done < n {
				return fmt.Errorf("%d of cluster %s's %d jobs done", done, cluster, n)
			}
			return nil
		})
		return hist
	}
	onceEach := func(name string, n int) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(w.dir, name+".log")) // the submit directory is pondctl's
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range []string{"001", "005"} {
			seen := map[string]int{}
			for _, m := range regexp.MustCompile(`(?m)^`+ev+` \((\d+\.\d+)\.\d+\)`).FindAllStringSubmatch(string(data), -1) {
				seen[m[1]]++
			}
			for id, c := range seen {
				if c != 1 {
					t.Errorf("%s.log: job %s has %d %s events", name, id, c, ev)
				}
			}
			if len(seen) != n {
				t.Errorf("%s.log: %d jobs with a %s event, want %d:\n%s", name, len(seen), ev, n, data)
			}
		}
		if m := regexp.MustCompile(`(?m)^0(04|09|22|24) `).FindString(string(data)); m != "" {
			t.Errorf("%s.log: a job was evicted, aborted or lost (%s):\n%s", name, m, data)
		}
	}
	spareHost := regexp.MustCompile(`^slot\d+(_\d+)?@spare-\d+$`)

	// Eight jobs of five seconds: busy's one slot would take 40 s.
	sub("first", 8, 5)
	hist := waitDone("1", 8)
	flocked := 0
	for id, j := range hist {
		switch {
		case spareHost.MatchString(j.host):
			flocked++
			if j.pool != "spare" {
				t.Errorf("job %s ran on %s with PondFlockedTo %s", id, j.host, j.pool)
			}
		case strings.Contains(j.host, "@denied-"):
			t.Errorf("job %s ran in the denied pool: %s", id, j.host)
		case !strings.HasSuffix(j.host, "@busy-0"):
			t.Errorf("job %s ran on %s", id, j.host)
		}
	}
	if flocked == 0 {
		t.Fatalf("no job flocked to spare: %v", hist)
	}
	t.Logf("%d of 8 jobs ran in spare", flocked)
	onceEach("first", 8)

	// Long jobs; once some run in spare, the flocks are destroyed: those
	// finish there, once.
	sub("second", 6, 15)
	submitted := time.Now()
	eventually(t, 2*time.Minute, func() error {
		r := w.expect(0, "condor", "q", "-pool", busy, "-af", "ClusterId", "JobStatus", "RemoteHost")
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "2" && f[1] == "2" && spareHost.MatchString(f[2]) {
				return nil
			}
		}
		return fmt.Errorf("no job of cluster 2 running in spare:\n%s", r.stdout)
	})
	t.Logf("submit to the first job running in spare: %v (FLOCK_IDLE_TIME 5 s)", time.Since(submitted).Round(100*time.Millisecond))
	w.expect(0, "destroy", "-auto-approve", "-target", "flock.overflow", "-target", "flock.any")
	if r := w.expect(0, "state", "list"); strings.Contains(r.stdout, "flock.") {
		t.Fatalf("flocks left in the state:\n%s", r.stdout)
	}
	hist = waitDone("2", 6)
	onceEach("second", 6)
	for id, j := range hist {
		if strings.HasPrefix(id, "2.") && strings.Contains(j.host, "@denied-") {
			t.Errorf("job %s ran in the denied pool", id)
		}
	}

	// No flock now: four jobs of four seconds wait for busy's slot (the
	// last for 12 s, past FLOCK_IDLE_TIME) and all run there.
	sub("third", 4, 4)
	hist = waitDone("3", 4)
	for id, j := range hist {
		if strings.HasPrefix(id, "3.") && j.host != "slot1@busy-0" {
			t.Errorf("job %s ran on %s after the flocks were destroyed", id, j.host)
		}
	}
	onceEach("third", 4)

	// A flock to a pool nobody runs: apply fails at the argument, and
	// nothing of it is kept.
	w.write("ghost.pond.hcl", "flock \"ghost\" {\n  from = [pool.busy.central_manager]\n  to   = [\"127.0.0.1:1\"]\n}\n")
	r := w.expect(1, "apply", "-auto-approve", "-no-color")
	for _, want := range []string{"ghost.pond.hcl line 3", "to: element 0, 127.0.0.1:1: not a reachable pool's central manager"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply of a flock to nowhere: stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r := w.expect(0, "state", "list"); strings.Contains(r.stdout, "flock.ghost") {
		t.Errorf("the failed flock is in the state:\n%s", r.stdout)
	}
	if err := os.Remove(filepath.Join(w.dir, "ghost.pond.hcl")); err != nil {
		t.Fatal(err)
	}
}

// flockFailover is examples/flock's two pools, busy with two members of
// one slot each and spare with three members whose manager keeps two
// replicas, and a flock from busy to spare.
const flockFailover = `
pool "busy" {
  nodes  = 2
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "2", FLOCK_IDLE_TIME = "2" }
}

pool "spare" {
  nodes    = 3
  slots    = 2
  replicas = 2
  config   = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "2" }
}

flock "overflow" {
  from = [pool.busy.central_manager]
  to   = [pool.spare.central_manager]
}

output "busy_nodes" {
  value = pool.busy.node_details
}

output "spare" {
  value = pool.spare.central_manager
}
`

// TestFlockFailover flocks busy's jobs, submitted to busy's member that is
// not its manager, to spare, and kills -9 spare's manager while flocked
// jobs run there and more are submitted: a replica of spare takes over,
// busy's schedd flocks to it (jobs submitted after the kill run in spare
// on the members left), refresh shows spare willing at the replica's
// address, and every job completes exactly once. plan works meanwhile;
// apply restarts spare's manager, which takes the pool back with the
// flock, and busy's jobs flock to it.
func TestFlockFailover(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", flockFailover)
	w.expect(0, "apply", "-auto-approve")
	submit := ""
	for _, d := range w.outputs()["busy_nodes"].([]any) {
		if m := d.(map[string]any); m["name"] == "busy-1" {
			submit = m["api"].(string)
		}
	}
	if submit == "" {
		t.Fatalf("no busy-1 in %v", w.outputs()["busy_nodes"])
	}
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, submit)
		}
		w.run("destroy", "-auto-approve")
	})
	spareActing := func() (string, int64, error) {
		r := w.run("sea", "members", "-json", "-sea", submit, "-status", "alive")
		var ms []seaMember
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ms) != nil {
			return "", 0, fmt.Errorf("sea members: %s", r)
		}
		name, epoch := "", int64(0)
		for _, m := range ms {
			if e, _ := strconv.ParseInt(m.Tags["epoch"], 10, 64); m.Tags["pool"] == "spare" && e > epoch {
				name, epoch = m.Name, e
			}
		}
		return name, epoch, nil
	}
	eventually(t, 30*time.Second, func() error {
		if n, e, err := spareActing(); err != nil || n != "spare-0" || e != 1 {
			return fmt.Errorf("spare's manager %s at epoch %d (%v)", n, e, err)
		}
		return nil
	})

	runningIn := func(cluster string) (map[string]string, error) {
		r := w.run("condor", "q", "-pool", submit, "-constraint", "JobStatus == 2", "-af", "ClusterId", "ProcId", "RemoteHost")
		if r.code != 0 {
			return nil, fmt.Errorf("condor q: %s", r)
		}
		out := map[string]string{}
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) == 3 && (cluster == "" || f[0] == cluster) {
				out[f[0]+"."+f[1]] = f[2]
			}
		}
		return out, nil
	}
	// Eight jobs of eight seconds for busy's two slots: some flock.
	w.write("a.sub", failoverSubmit(0, 8))
	w.expect(0, "condor", "submit", "-pool", submit, "a.sub")
	eventually(t, 45*time.Second, func() error {
		run, err := runningIn("")
		if err != nil {
			return err
		}
		for _, host := range run {
			if strings.Contains(host, "@spare-") {
				return nil
			}
		}
		return fmt.Errorf("no job running in spare: %v", run)
	})

	killNode(t, w, "spare-0")
	w.write("b.sub", failoverSubmit(1, 6))
	w.expect(0, "condor", "submit", "-pool", submit, "b.sub")
	eventually(t, 30*time.Second, func() error {
		if n, e, err := spareActing(); err != nil || n == "spare-0" || n == "" || e < 2 {
			return fmt.Errorf("spare's manager %s at epoch %d (%v)", n, e, err)
		}
		return nil
	})
	// Flocking goes on to the replica: a job submitted after the kill
	// runs in spare, on a member left.
	eventually(t, 60*time.Second, func() error {
		hist := flockHistory(t, w, submit)
		for id, j := range hist {
			if strings.HasPrefix(id, "2.") && regexp.MustCompile(`@spare-[12]$`).MatchString(j.host) && j.pool == "spare" {
				return nil
			}
		}
		run, err := runningIn("2")
		if err != nil {
			return err
		}
		for _, host := range run {
			if regexp.MustCompile(`@spare-[12]$`).MatchString(host) {
				return nil
			}
		}
		return fmt.Errorf("no job of cluster 2 in spare since the kill: running %v", run)
	})
	// refresh follows spare's central manager to the replica, and the
	// flock's willing list names it there.
	acting, _, err := spareActing()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		w.expect(0, "refresh")
		r := w.expect(0, "state", "show", "flock.overflow")
		if !regexp.MustCompile(`pool\s+= "spare"`).MatchString(r.stdout) {
			return fmt.Errorf("flock.overflow: %s", r.stdout)
		}
		cm := w.output("spare")
		if cm == "" || !strings.Contains(r.stdout, cm) {
			return fmt.Errorf("spare's central_manager %q (%s acts) not in flock.overflow's willing list:\n%s", cm, acting, r.stdout)
		}
		return nil
	})

	eventually(t, 90*time.Second, func() error {
		r := w.run("condor", "q", "-pool", submit, "-af", "ClusterId", "ProcId", "JobStatus", "RemoteHost")
		if left := strings.Count(r.stdout, "\n"); r.code != 0 || left > 0 {
			return fmt.Errorf("%d jobs still queued (%s)", left, r)
		}
		return nil
	})
	completedOnce(t, w, map[int]int{0: 8, 1: 6})

	// plan works while the replica acts; apply restarts spare's manager,
	// which takes the pool back with the flock: the willing list names it
	// again, and busy's jobs flock to it.
	if r := w.run("plan", "-detailed-exitcode"); r.code != 0 && r.code != 2 {
		t.Fatalf("plan while a replica acts: %s", r)
	}
	w.expect(0, "apply", "-auto-approve")
	eventually(t, 45*time.Second, func() error {
		n, e, err := spareActing()
		if err != nil || n != "spare-0" || e < 3 {
			return fmt.Errorf("spare's manager %s at epoch %d (%v)", n, e, err)
		}
		w.expect(0, "refresh")
		r := w.expect(0, "state", "show", "flock.overflow")
		if cm := w.output("spare"); cm == "" || !strings.Contains(r.stdout, cm) {
			return fmt.Errorf("spare's central_manager %q not in flock.overflow's willing list:\n%s", cm, r.stdout)
		}
		return nil
	})
	w.write("c.sub", failoverSubmit(2, 6))
	w.expect(0, "condor", "submit", "-pool", submit, "c.sub")
	waitQueueEmpty(t, w, submit)
	completedOnce(t, w, map[int]int{0: 8, 1: 6, 2: 6})
	flocked := 0
	for id, j := range flockHistory(t, w, submit) {
		if strings.HasPrefix(id, "3.") && strings.Contains(j.host, "@spare-") {
			flocked++
		}
	}
	if flocked == 0 {
		t.Errorf("no job submitted after the hand-back ran in spare")
	}
}

// completedOnce checks jobs whose node may be killed under them
// as they start: the job log has one terminate event (005) per job, and a
// job executed more than once lost its node (022) or its starter as the
// claim was activated (a shadow exception, 007), and each job's output is
// its own, once.
func completedOnce(t *testing.T, w *workdir, jobs map[int]int) {
	t.Helper()
	events := map[string]map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(\d{3}) \((\d+)\.(\d+)\.\d+\)`).FindAllStringSubmatch(readFile(t, filepath.Join(w.dir, "fo.log")), -1) {
		id := m[2] + "." + m[3]
		if events[id] == nil {
			events[id] = map[string]int{}
		}
		events[id][m[1]]++
	}
	want := 0
	for c, n := range jobs {
		want += n
		for p := range n {
			path := filepath.Join(w.dir, fmt.Sprintf("out.%d.%d", c, p))
			if got := readFile(t, path); got != fmt.Sprintf("done %d\n", p) {
				t.Errorf("%s = %q", filepath.Base(path), got)
			}
		}
	}
	for id, ev := range events {
		if ev["005"] != 1 {
			t.Errorf("job %s has %d terminate events, want 1", id, ev["005"])
		}
		if ev["001"] > 1 && ev["022"] == 0 && ev["007"] == 0 {
			t.Errorf("job %s executed %d times without losing its node or starter", id, ev["001"])
		}
	}
	if len(events) != want {
		t.Errorf("the job log speaks of %d jobs, want %d", len(events), want)
	}
}
