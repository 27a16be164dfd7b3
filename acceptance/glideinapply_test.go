package acceptance

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
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
}

// glideinSites start the sites of the glidein tests, by name. The Slurm
// and SSH sites add theirs (a cluster of slurmctld and slurmd, an sshd,
// started from a configuration in the test's directory and stopped with
// it).
var glideinSites = map[string]func(t *testing.T) glideinSite{}

// TestGlideinKilledApply kills `pondctl apply` of a glidein resource with
// SIGKILL at a random point of its submissions, 20 times, with a count
// that changes from one trial to the next and now and then a glidein
// ended behind pond's back; after each, apply again, and the site must run
// exactly the count: no ID twice, none that the state does not list.
// Destroy then leaves the site empty.
func TestGlideinKilledApply(t *testing.T) {
	t.Parallel()
	if len(glideinSites) == 0 {
		testenv.SkipOrFail(t, "no glidein site is built in yet (overlay/glidein/slurm, overlay/glidein/ssh)")
	}
	for name, start := range glideinSites {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := start(t)
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
			for trial := range 20 {
				n := 1 + rng.IntN(3)
				killed := ""
				if trial%4 == 3 {
					if ids := w.glideinIDs("glidein.g"); len(ids) > 0 {
						killed = ids[rng.IntN(len(ids))]
						s.kill(t, killed)
					}
				}
				cmd := execPond(w, "apply", "-auto-approve", fmt.Sprintf("-var=n=%d", n))
				out := &lineWaiter{want: "glidein.g: ", seen: make(chan struct{})}
				cmd.Stdout = out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				delay := time.Duration(rng.IntN(1500)) * time.Millisecond
				select {
				case <-out.seen:
					// Its apply of glidein.g began: kill it in there.
					time.Sleep(delay)
					_ = cmd.Process.Kill()
					<-exited
				case <-exited:
					// Nothing to change (the same n, no drift).
				case <-time.After(2 * time.Minute):
					_ = cmd.Process.Kill()
					<-exited
					t.Fatalf("trial %d: apply never reached glidein.g:\n%s", trial, out.buf.String())
				}
				again := w.expect(0, "apply", "-auto-approve", fmt.Sprintf("-var=n=%d", n))
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
			w.expect(0, "destroy", "-auto-approve")
			if got := s.running(t); len(got) != 0 {
				t.Fatalf("after destroy the site runs %v", got)
			}
		})
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
