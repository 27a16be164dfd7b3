package acceptance

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
	"github.com/pond-htc/pond/state/backend/local"
)

// glideinSite is a site the glidein acceptance tests run against, started
// for one test.
type glideinSite struct {
	// kind is the provider's name: slurm, ssh.
	kind string
	// provider is the provider block that names the site, such as
	// `provider "slurm" { partition = "debug" ... }`.
	provider string
	// running returns the IDs of the glideins that run on the site as the
	// site itself shows them (squeue, the processes on the hosts), an ID
	// as many times as it runs.
	running func(t testing.TB) []string
	// kill ends one glidein behind pond's back (scancel, kill).
	kill func(t testing.TB, id string)
	// describe tells what the site holds, for a failure message, or is
	// nil.
	describe func(t testing.TB) string
	// env is added to pondctl's environment (SLURM_CONF).
	env []string
	// logs returns the site's own logs for a failure message, or nil.
	logs func() string
	// statusGlob is the pattern of the path of a glidein's status file.
	statusGlob func(id string) string
	// workDir is the Slurm site's work_dir.
	workDir string
	// cluster and ssh are the site's harness, whichever it is.
	cluster *slurmtest.Cluster
	ssh     *sshtest.Servers
	// jobs, when set, returns the name of every job the site ever made
	// for a glidein, ended ones included, once per job: a name twice is
	// a glidein submitted twice.
	jobs func(t testing.TB) []string
	// submitted, when set, counts the submissions the site has taken so
	// far (a login node's sbatch that returned). TestGlideinKilledApply
	// then kills an apply only once one of its own went through, and
	// ends a glidein behind pond's back whenever the apply keeps it, so
	// that the apply submits its replacement.
	submitted func(t testing.TB) int
	// trials is how many applies TestGlideinKilledApply kills (10 when
	// 0).
	trials int
}

// glideinSites start the sites of the glidein tests, by name. The Slurm
// and SSH sites add theirs (a cluster of slurmctld and slurmd, an sshd,
// started from a configuration in the test's directory and stopped with
// it).
var glideinSites = map[string]func(t *testing.T) glideinSite{}

// TestGlideinKilledApply kills `pondctl apply` of a glidein resource with
// SIGKILL at a random point of its submissions, 10 times (8 on Slurm),
// with a count that changes from one trial to the next and now and then a
// glidein ended behind pond's back; after each, apply again, and the site must run
// exactly the count: no ID twice, none that the state does not list. The
// state lock the killed apply held is taken over by the next one, which
// says so, and released. On a site that remembers its jobs (Slurm), no
// glidein was ever submitted twice, ended jobs included. On a site
// reached through a login node (slurm-login: sbatch over SSH, as another
// user), the apply is killed after one of its sbatch went through.
// Destroy then leaves the site empty.
func TestGlideinKilledApply(t *testing.T) {
	t.Parallel()
	if len(glideinSites) == 0 {
		testenv.SkipOrFail(t, "no glidein site is built in yet (overlay/glidein/slurm, overlay/glidein/ssh)")
	}
	tests := map[string]func(t *testing.T){}
	for name, start := range glideinSites {
		tests[name] = func(t *testing.T) { glideinKilledApply(t, start(t)) }
	}
	runAtOnce(t, tests)
}

// glideinKilledApply is TestGlideinKilledApply on one site.
func glideinKilledApply(t *testing.T, s glideinSite) {
	w := newWorkdir(t, "")
	w.env = append(w.env, s.env...)
	w.write("main.pond.hcl", fmt.Sprintf(`
pond {
  backend "local" { path = "pond.state" }
}

variable "n" {
  type    = number
  default = 1
}

provider "local" {}

%s

pool "campus" {
  provider = provider.local
  nodes    = 1
}

glidein "g" {
  provider = provider.%s
  pool     = pool.campus.central_manager
  nodes    = var.n
  lifetime = "30m"
}
`, s.provider, s.kind))
	w.expect(0, "apply", "-auto-approve")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	lock := filepath.Join(w.dir, "pond.state"+local.LockSuffix)
	afterSubmit := 0 // trials killed after a submission of their own
	for trial := range cmp.Or(s.trials, 10) {
		n := 1 + rng.IntN(3)
		killed := ""
		if ids := w.glideinIDs("glidein.g"); len(ids) > 0 && (trial%4 == 3 || s.submitted != nil && n >= len(ids)) {
			killed = ids[rng.IntN(len(ids))]
			s.kill(t, killed)
		}
		before := 0
		if s.submitted != nil {
			before = s.submitted(t)
		}
		cmd := execPond(w, "apply", "-auto-approve", fmt.Sprintf("-var=n=%d", n))
		out := &lineWaiter{want: "glidein.g: ", seen: make(chan struct{})}
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		delay := time.Duration(rng.IntN(1500)) * time.Millisecond
		// began closes when the apply is where it is killed: in its
		// apply of glidein.g, or past a submission of its own.
		began := out.seen
		if s.submitted != nil {
			began = make(chan struct{})
			go func() {
				defer close(began)
				for s.submitted(t) == before {
					select {
					case <-exited:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
		}
		select {
		case <-began:
		case <-exited:
			// Nothing to change (the same n, no drift).
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("trial %d: apply never reached glidein.g:\n%s", trial, out.buf.String())
		}
		wasKilled := false
		select {
		case <-exited:
		default:
			// Kill it in there.
			time.Sleep(delay)
			_ = cmd.Process.Kill()
			<-exited
			wasKilled = true
		}
		_, err := os.Stat(lock)
		locked := err == nil
		if wasKilled && s.submitted != nil && s.submitted(t) > before {
			afterSubmit++
		}
		again := w.expect(0, "apply", "-auto-approve", fmt.Sprintf("-var=n=%d", n))
		reclaimed := strings.Contains(again.stderr, "reclaiming the state lock")
		if locked != reclaimed {
			t.Fatalf("trial %d: the killed apply left the state locked: %v; the next apply said it reclaimed the lock: %v\n%s", trial, locked, reclaimed, again.stdout+again.stderr)
		}
		if _, err := os.Stat(lock); err == nil {
			t.Fatalf("trial %d: the state is still locked after the next apply", trial)
		}
		if s.jobs != nil {
			count := map[string]int{}
			for _, name := range s.jobs(t) {
				if count[name]++; count[name] == 2 {
					t.Fatalf("trial %d (n = %d, apply killed after %s): %s was submitted twice\nthe killed apply:\n%s\nthe next apply:\n%s\nthe site:\n%s",
						trial, n, delay, name, out.buf.String(), again.stdout+again.stderr, s.describe(t))
				}
			}
		}
		want := w.glideinIDs("glidein.g")
		got := s.running(t)
		slices.Sort(want)
		slices.Sort(got)
		if len(got) != n || !slices.Equal(got, want) {
			site := ""
			if s.describe != nil {
				site = s.describe(t)
			}
			t.Fatalf("trial %d (n = %d, %s ended behind pond's back, apply killed after %s): the site runs %v, the state lists %v\n"+
				"the killed apply:\n%s\nthe next apply:\n%s\nthe site:\n%s",
				trial, n, killed, delay, got, want, out.buf.String(), again.stdout+again.stderr, site)
		}
	}
	if s.submitted != nil && afterSubmit == 0 {
		t.Errorf("no apply was killed after a submission of its own")
	}
	if s.submitted != nil {
		t.Logf("%d applies killed after a submission of their own", afterSubmit)
	}
	w.expect(0, "destroy", "-auto-approve")
	if got := s.running(t); len(got) != 0 {
		t.Fatalf("after destroy the site runs %v", got)
	}
}

// glideinIDs returns the ids of the glidein resource at addr, as `pondctl
// show -json` lists them.
func (w *workdir) glideinIDs(addr string) []string {
	w.t.Helper()
	var doc struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address string `json:"address"`
					Values  struct {
						IDs []string `json:"ids"`
					} `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	r := w.expect(0, "show", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		w.t.Fatalf("show -json: %v\n%s", err, r.stdout)
	}
	for _, res := range doc.Values.RootModule.Resources {
		if res.Address == addr {
			return res.Values.IDs
		}
	}
	return nil
}
