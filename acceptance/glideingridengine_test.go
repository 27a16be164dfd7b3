package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/gridengine/sgetest"
)

// TestGlideinGridEngine runs a glidein pool on Grid Engine, its commands
// run on this machine (the provider's env names the cell) or on a login
// node over SSH as another user: the glidein's job runs as that user and
// its slot joins the pool; growing the resource submits one more job,
// each named by its glidein's ID, none twice; destroy leaves no job and
// no directory.
func TestGlideinGridEngine(t *testing.T) {
	t.Parallel()
	tests := map[string]func(t *testing.T){}
	for _, transport := range []string{"local", "login"} {
		tests[transport] = func(t *testing.T) {
			c := sgetest.Start(t, sgetest.Options{Slots: 4})
			work, user := filepath.Join(t.TempDir(), "work"), "root"
			var block string
			if transport == "local" {
				var env []string
				for _, kv := range c.Env() {
					k, v, _ := strings.Cut(kv, "=")
					env = append(env, fmt.Sprintf("%s = %q", k, v))
				}
				block = "env = { " + strings.Join(env, ", ") + " }"
			} else {
				ln := sgetest.StartLogin(t, c)
				work, user = ln.WorkDir, ln.User
				block = fmt.Sprintf(`login {
    host             = %q
    port             = %d
    user             = %q
    private_key_file = %q
    known_hosts_file = %q
  }`, ln.Host, ln.Port, ln.User, ln.SSH.KeyFile, ln.SSH.KnownHosts)
			}
			w := newWorkdir(t, "")
			w.write("main.pond.hcl", fmt.Sprintf(`
pond {
  backend "local" { path = "pond.state" }
}

variable "n" {
  type    = number
  default = 1
}

provider "local" {}

provider "gridengine" {
  queue        = %q
  work_dir     = %q
  walltime     = "2h"
  bind_address = "127.0.0.1"
  %s
}

pool "campus" {
  provider = provider.local
  nodes    = 1
}

glidein "g" {
  provider   = provider.gridengine
  pool       = pool.campus.central_manager
  nodes      = var.n
  lifetime   = "30m"
  attributes = { Site = "sge" }
}

output "cm" {
  value = pool.campus.central_manager
}
`, sgetest.Queue, work, block))
			defer func() {
				if t.Failed() {
					t.Logf("qstat:\n%s\nthe cell's logs:\n%s", c.Run(t, "qstat", "-u", "*", "-r"), c.Logs())
				}
			}()
			// jobs are the glideins' jobs qstat shows: "NAME OWNER" each.
			jobs := func() []string {
				var js []string
				for _, j := range c.Jobs(t, "pond-*") {
					out := c.Run(t, "qstat", "-j", j)
					var name, owner string
					for _, line := range strings.Split(out, "\n") {
						f := strings.Fields(line)
						if len(f) == 2 && f[0] == "job_name:" {
							name = f[1]
						}
						if len(f) == 2 && f[0] == "owner:" {
							owner = f[1]
						}
					}
					js = append(js, name+" "+owner)
				}
				slices.Sort(js)
				return js
			}
			want := func(ids []string) []string {
				var js []string
				for _, id := range ids {
					js = append(js, id+" "+user)
				}
				slices.Sort(js)
				return js
			}

			w.expect(0, "plan")
			w.expect(0, "apply", "-auto-approve")
			ids := w.glideinIDs("glidein.g")
			if len(ids) != 1 {
				t.Fatalf("after apply: glideins %v, want 1", ids)
			}
			if got := jobs(); !slices.Equal(got, want(ids)) {
				t.Fatalf("qstat shows %v, want %v", got, want(ids))
			}
			cm := w.output("cm")
			eventually(t, 90*time.Second, func() error {
				r := w.run("condor", "status", "-pool", cm, "-af", "Name", "IsGlidein", "GlideinID", "Site")
				if !strings.Contains(r.stdout, "@"+ids[0]+" true "+ids[0]+" sge") {
					return fmt.Errorf("no slot of %s in the pool:\n%s", ids[0], r)
				}
				return nil
			})

			w.expect(0, "apply", "-auto-approve", "-var=n=2")
			ids = w.glideinIDs("glidein.g")
			if len(ids) != 2 {
				t.Fatalf("after growing: glideins %v, want 2", ids)
			}
			if got := jobs(); !slices.Equal(got, want(ids)) {
				t.Fatalf("qstat shows %v, the state lists %v", got, want(ids))
			}

			w.expect(0, "destroy", "-auto-approve")
			if got := jobs(); len(got) != 0 {
				t.Fatalf("after destroy qstat shows %v", got)
			}
			if left, _ := filepath.Glob(filepath.Join(work, "pond-*")); len(left) != 0 {
				var files []string
				filepath.WalkDir(left[0], func(p string, d os.DirEntry, err error) error {
					if info, err := os.Lstat(p); err == nil {
						files = append(files, fmt.Sprintf("%s %v %v", p, info.Mode(), info.ModTime().Format(time.StampMilli)))
					}
					return nil
				})
				t.Fatalf("after destroy (at %s) the work directory keeps %v:\n%s", time.Now().Format(time.StampMilli), left, strings.Join(files, "\n"))
			}
			if _, err := os.Stat(filepath.Join(work, "bin")); err != nil {
				t.Errorf("the binary's directory: %v", err)
			}
		}
	}
	runAtOnce(t, tests)
}
