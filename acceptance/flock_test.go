package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
