package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// factoryJobs are jobs only a glidein of examples/slurm-factory runs.
const factoryJobs = `executable          = /bin/sleep
arguments           = 8
transfer_executable = false
requirements        = IsGlidein =?= true && Site == "hpc"
request_memory      = 16
log                 = jobs.log
queue %d
`

// TestGlideinFactory runs examples/slurm-factory with the real pondctl on
// a real Slurm cluster: apply installs the glidein's factory entry in the
// pool's central manager, and no glidein is submitted while no job waits;
// the entry removed behind pond's back is drift that plan shows and apply
// repairs;
// jobs that only a glidein runs make the factory submit glideins, never
// more than max_queued waiting nor max_running in all; the jobs run on
// them and the queue drains; the glideins leave by their idle timeout
// (they end by themselves, and the factory counts them done);
// `pondctl show` and `show -json` report the entry's funnel after a
// refresh; and destroy, with glideins of a new job queued or running,
// removes the entry and leaves squeue empty.
func TestGlideinFactory(t *testing.T) {
	t.Parallel()
	const maxQueued, maxRunning, jobs = 2, 2, 4
	s := slurmSite(t, slurmtest.Options{Nodes: 2, CPUs: 2, MemoryMB: 4000})
	w := newWorkdir(t, "slurm-factory")
	w.env = append(w.env, s.env...)
	vars := []string{"-var=partition=" + s.cluster.Partitions[0], "-var=work_dir=" + s.workDir, "-var=idle_timeout=15s",
		fmt.Sprintf("-var=max_running=%d", maxRunning)}
	cmd := func(args ...string) []string { return append(args, vars...) }
	defer func() {
		if t.Failed() {
			t.Logf("squeue:\n%s\nslurm:\n%s", s.describe(t), s.logs())
		}
	}()
	began := time.Now()
	w.expect(0, cmd("apply", "-auto-approve")...)
	cm := w.output("central_manager")
	r := w.expect(0, "sea", "factory", "-sea", cm, "-json")
	if !strings.Contains(r.stdout, `"name": "hpc"`) && !strings.Contains(r.stdout, `"name":"hpc"`) {
		t.Fatalf("the central manager's factory has no entry hpc:\n%s", r.stdout)
	}
	time.Sleep(4 * time.Second) // two cycles of the factory
	if got := s.running(t); len(got) != 0 {
		t.Fatalf("with no job waiting, squeue shows %v", got)
	}
	// The entry removed behind pond's back: plan shows the drift, apply
	// repairs it.
	w.expect(0, "sea", "factory", "-sea", cm, "-remove", "hpc")
	r = w.expect(2, cmd("plan", "-detailed-exitcode")...)
	if out := r.stdout + r.stderr; !strings.Contains(out, "removed behind pond's back") || !strings.Contains(out, "glidein.hpc") {
		t.Fatalf("plan after the entry was removed does not say so:\n%s", r)
	}
	w.expect(0, cmd("apply", "-auto-approve")...)
	if r := w.expect(0, "sea", "factory", "-sea", cm, "-json"); !strings.Contains(r.stdout, `"hpc"`) {
		t.Fatalf("apply did not install the entry again:\n%s", r.stdout)
	}
	w.expect(0, cmd("plan", "-detailed-exitcode")...)

	// Sample squeue while the factory works: within its limits.
	var mu sync.Mutex
	most, mostQueued := 0, 0
	seen := map[string]bool{}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			out, err := s.cluster.Command(t.Context(), "squeue", "-h", "-o", "%j %t").Output()
			if err != nil {
				continue
			}
			n, q := 0, 0
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Fields(line)
				if len(f) != 2 || !strings.HasPrefix(f[0], "pond-") {
					continue
				}
				n++
				if f[1] == "PD" {
					q++
				}
				mu.Lock()
				seen[f[0]] = true
				mu.Unlock()
			}
			mu.Lock()
			most, mostQueued = max(most, n), max(mostQueued, q)
			mu.Unlock()
		}
	}()
	w.write("jobs.sub", fmt.Sprintf(factoryJobs, jobs))
	submitted := time.Now()
	w.expect(0, "condor", "submit", "-pool", cm, "jobs.sub")
	eventually(t, 60*time.Second, func() error {
		if n := strings.Count(readFile(t, filepath.Join(w.dir, "jobs.log")), "\n005 ("); n != jobs {
			return fmt.Errorf("%d of %d jobs done", n, jobs)
		}
		return nil
	})
	t.Logf("jobs submitted to all %d done: %s", jobs, time.Since(submitted).Round(time.Millisecond))
	eventually(t, 10*time.Second, func() error {
		if r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId"); strings.TrimSpace(r.stdout) != "" {
			return fmt.Errorf("the queue has not drained: %s", r.stdout)
		}
		return nil
	})
	// Idle, each glidein leaves by itself.
	eventually(t, 45*time.Second, func() error {
		if got := s.running(t); len(got) != 0 {
			return fmt.Errorf("still running: %v", got)
		}
		return nil
	})
	close(stop)
	<-sampled
	mu.Lock()
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	t.Logf("glideins %v, at most %d at once, %d queued", ids, most, mostQueued)
	if most > maxRunning || mostQueued > maxQueued || len(ids) == 0 {
		t.Errorf("squeue showed at most %d glideins (%d queued) of %d in all: want 1 to max_running %d (max_queued %d)",
			most, mostQueued, len(ids), maxRunning, maxQueued)
	}
	mu.Unlock()
	// Each ran itself down (exit 0: Slurm says COMPLETED, not CANCELLED),
	// which the factory counted done. (The factory removed their
	// directories, status files included, once they ended.)
	states := s.cluster.Run(t, "squeue", "-h", "-t", "all", "-o", "%j %T")
	for _, id := range ids {
		if !strings.Contains(states, id+" COMPLETED") {
			t.Errorf("%s did not end by itself:\n%s", id, states)
		}
	}
	r = w.expect(0, "sea", "factory", "-sea", cm, "-json")
	for _, id := range ids {
		if !strings.Contains(r.stdout, id) {
			t.Errorf("the factory's events do not name %s:\n%s", id, r.stdout)
		}
	}

	// The funnel, recorded by refresh, in show and show -json, once the
	// factory's cycle saw the last glidein end.
	var funnel map[string]any
	eventually(t, 20*time.Second, func() error {
		w.expect(0, cmd("refresh")...)
		var doc struct {
			Values struct {
				RootModule struct {
					Resources []struct {
						Address string `json:"address"`
						Values  struct {
							Entry  string         `json:"entry"`
							Funnel map[string]any `json:"funnel"`
						} `json:"values"`
					} `json:"resources"`
				} `json:"root_module"`
			} `json:"values"`
		}
		r := w.expect(0, "show", "-json")
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("show -json: %v\n%s", err, r.stdout)
		}
		funnel = nil
		for _, res := range doc.Values.RootModule.Resources {
			if res.Address == "glidein.hpc" {
				funnel = res.Values.Funnel
				if res.Values.Entry != "hpc" {
					t.Errorf("glidein.hpc's entry is %q, want hpc", res.Values.Entry)
				}
			}
		}
		num := func(k string) int { f, _ := funnel[k].(float64); return int(f) }
		if num("requested") != len(ids) || num("validated") != len(ids) || num("done") != len(ids) || num("failed") != 0 ||
			num("queued")+num("running")+num("joined")+num("claimed") != 0 || funnel["breaker_open"] != false {
			return fmt.Errorf("the funnel after the jobs, with %d glideins seen: %v", len(ids), funnel)
		}
		return nil
	})
	r = w.expect(0, "show")
	for _, want := range []string{"funnel", "requested", fmt.Sprintf("= %d", len(ids)), "breaker_open"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("funnel %v", funnel)

	// Destroy with glideins on their way: none is left.
	w.write("more.sub", strings.Replace(fmt.Sprintf(factoryJobs, 1), "jobs.log", "more.log", 1))
	w.expect(0, "condor", "submit", "-pool", cm, "more.sub")
	eventually(t, 20*time.Second, func() error {
		if got := s.running(t); len(got) == 0 {
			return fmt.Errorf("no glidein submitted for the new job")
		}
		return nil
	})
	// The factory's credentials, and those of the glideins on their way
	// (their lifetime and a margin), with their expiry.
	eventually(t, 10*time.Second, func() error {
		r := w.expect(0, "sea", "factory", "-sea", cm)
		for _, want := range []string{"Credentials: key ", "CA expires ", "Credentials expire", "(in 1h1"} {
			if !strings.Contains(r.stdout, want) {
				return fmt.Errorf("sea factory lacks %q:\n%s", want, r.stdout)
			}
		}
		return nil
	})
	if r := w.expect(0, "sea", "factory", "-sea", cm, "-json"); !strings.Contains(r.stdout, `"credentials_expire"`) || !strings.Contains(r.stdout, `"ca_expires"`) {
		t.Errorf("sea factory -json lacks the credentials' expiry:\n%s", r.stdout)
	}

	// The state lost: import adopts the pool, then the glidein's entry and
	// the glideins its factory has, and plan shows no change.
	queuedNow := s.running(t)
	stateFile, lost := filepath.Join(w.dir, "pond.state"), filepath.Join(w.dir, "lost.state")
	if err := os.Rename(stateFile, lost); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Failed before the import: the state back, for the clean-up.
		if _, err := os.Stat(stateFile); err != nil {
			os.Rename(lost, stateFile)
		}
	})
	imp := func(code int, addr, id string) result {
		return w.expect(code, append(append([]string{"import"}, vars...), addr, id)...)
	}
	imp(0, "pool.campus", "campus")
	const prefix = "pond-campus-hpc-"
	r = imp(0, "glidein.hpc", "slurm:"+prefix)
	if !strings.Contains(r.stdout, "Import successful") {
		t.Fatalf("import of glidein.hpc:\n%s", r)
	}
	// The outputs, which the state lost too, are all the plan shows.
	noChange := func() {
		t.Helper()
		r := w.run(cmd("plan", "-detailed-exitcode")...)
		if r.code == 1 || strings.Contains(r.stdout, "will perform the following actions") {
			t.Fatalf("plan after the import: want no change to a resource:\n%s", r)
		}
	}
	noChange()
	imported := w.glideinIDs("glidein.hpc")
	for _, id := range imported {
		if !strings.HasPrefix(id, prefix) {
			t.Errorf("imported glidein %s is not under %s", id, prefix)
		}
	}
	t.Logf("squeue before the import %v, imported %v", queuedNow, imported)
	if len(imported) == 0 && len(s.running(t)) > 0 {
		t.Errorf("the import adopted no glidein, but squeue shows %v", s.running(t))
	}
	// A wrong prefix, or the glidein before its pool, is refused naming why.
	w.expect(0, "state", "rm", "glidein.hpc")
	r = imp(1, "glidein.hpc", "slurm:pond-campus-other-")
	if !strings.Contains(r.stderr, "import it as slurm:"+prefix) {
		t.Errorf("import with another entry's prefix:\n%s", r)
	}
	imp(0, "glidein.hpc", "slurm:"+prefix)
	noChange()

	w.expect(0, cmd("destroy", "-auto-approve")...)
	if got := s.running(t); len(got) != 0 {
		t.Fatalf("after destroy squeue shows %v", got)
	}
	if r := w.run("sea", "factory", "-sea", cm, "-json"); r.code == 0 && strings.Contains(r.stdout, `"hpc"`) {
		t.Errorf("after destroy the factory still has the entry:\n%s", r.stdout)
	}
	t.Logf("the whole story: %s", time.Since(began).Round(time.Millisecond))
}
