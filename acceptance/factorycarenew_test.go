package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/factorycred"
)

// renewJob runs on a glidein of examples/slurm-factory for %d seconds.
const renewJob = `executable          = /bin/sleep
arguments           = %d
transfer_executable = false
requirements        = IsGlidein =?= true && Site == "hpc"
request_memory      = 16
log                 = %s
queue
`

// TestFactoryCARenewal runs examples/slurm-factory on a real Slurm
// cluster with a pilot factory whose delegated CA expires in two
// minutes: a glidein certified under it runs a job; pondctl plan shows
// the pool's update and apply gives the factory a new CA; the glidein,
// its certificate renewed under the new CA by the factory, outlives the
// old CA: its job runs on to its end (one execution, no eviction), its
// credentials now expire after the old CA, a job submitted after the old
// CA expired runs too, and the factory counts no glidein lost or failed.
func TestFactoryCARenewal(t *testing.T) {
	t.Parallel()
	s := slurmSite(t, slurmtest.Options{Nodes: 1, CPUs: 2, MemoryMB: 4000})
	w := newWorkdir(t, "slurm-factory")
	w.env = append(w.env, s.env...)
	vars := []string{"-var=partition=" + s.cluster.Partitions[0], "-var=work_dir=" + s.workDir, "-var=idle_timeout=10m", "-var=max_running=2"}
	cmd := func(args ...string) []string { return append(args, vars...) }
	defer func() {
		if t.Failed() {
			t.Logf("squeue:\n%s", s.describe(t))
			r := w.run("sea", "factory", "-sea", w.output("central_manager"))
			t.Logf("factory:\n%s", r)
		}
	}()
	w.expect(0, cmd("apply", "-auto-approve")...)
	t.Cleanup(func() { w.run(cmd("destroy", "-auto-approve")...) })
	cm := w.output("central_manager")

	// The factory's delegated CA about to expire, as one made a month
	// ago would be: kept in the working directory and held by the
	// running factory.
	const pool = "campus"
	a, err := providers.OpenAuthority(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	short, err := a.DelegateCA(api.FactoryPrefix(pool), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	dir := factorycred.Dir(w.dir, pool)
	if err := os.WriteFile(filepath.Join(dir, factorycred.CAFile), short, 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, factorycred.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := auth.FindClientTLS(w.getenv, w.dir)
	if err != nil || cfg == nil {
		t.Fatalf("the sea speaks no TLS: %v", err)
	}
	client := api.NewClient(cm).WithTLS(cfg).WithToken(w.token())
	st, err := client.SetFactoryCredentials(t.Context(), api.FactoryCredentials{Key: string(key), CA: string(short)})
	if err != nil {
		t.Fatalf("giving the factory the short-lived CA: %v", err)
	}
	oldExpiry := st.Credentials.CAExpires
	if left := time.Until(oldExpiry); left > 2*time.Minute || left < time.Minute {
		t.Fatalf("the factory's CA expires in %v, want about 2m", left)
	}

	// A job only a glidein runs: the factory submits one, certified under
	// the old CA.
	w.write("long.sub", fmt.Sprintf(renewJob, 150, "long.log"))
	w.expect(0, "condor", "submit", "-pool", cm, "long.sub")
	var glideins []string
	eventually(t, 90*time.Second, func() error {
		if !strings.Contains(readFile(t, filepath.Join(w.dir, "long.log")), "\n001 (") && !strings.HasPrefix(readFile(t, filepath.Join(w.dir, "long.log")), "001 (") {
			return fmt.Errorf("the job does not run yet; squeue: %v", s.running(t))
		}
		glideins = s.running(t)
		return nil
	})
	if len(glideins) != 1 {
		t.Fatalf("glideins %v, want one", glideins)
	}

	// plan shows the pool's update; apply renews the factory's CA.
	r := w.expect(2, cmd("plan", "-detailed-exitcode")...)
	if !strings.Contains(r.stdout, "pool.campus") {
		t.Errorf("plan with the factory's CA due does not update the pool:\n%s", r)
	}
	r = w.expect(0, cmd("apply", "-auto-approve")...)
	if !strings.Contains(r.stdout+r.stderr, "given a new delegated CA") {
		t.Errorf("apply does not say it renewed the factory's CA:\n%s", r)
	}
	st, err = client.Factory(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Credentials.CAExpires.After(oldExpiry.Add(24 * time.Hour)) {
		t.Errorf("after apply the factory's CA expires at %s, the old one's time %s", st.Credentials.CAExpires, oldExpiry)
	}

	// Past the old CA's expiry: the glidein and its job go on.
	time.Sleep(time.Until(oldExpiry) + 20*time.Second)
	noneLost := func(when string) {
		t.Helper()
		if got := s.running(t); !slices.Contains(got, glideins[0]) {
			t.Errorf("%s, squeue shows %v: the glidein %s is gone", when, got, glideins[0])
		}
		st, err := client.Factory(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range st.Entries {
			if e.Funnel.Lost != 0 || e.Funnel.Failed != 0 {
				t.Errorf("%s, entry %s counts %d glideins lost and %d failed: %+v", when, e.Name, e.Funnel.Lost, e.Funnel.Failed, e.Events)
			}
			if !e.CredentialsExpire.After(oldExpiry) {
				t.Errorf("%s, entry %s's glideins' credentials expire at %s, with the old CA (%s)", when, e.Name, e.CredentialsExpire, oldExpiry)
			}
		}
	}
	noneLost("after the old CA expired")
	eventually(t, 120*time.Second, func() error {
		if long := readFile(t, filepath.Join(w.dir, "long.log")); !strings.Contains(long, "005 (") {
			return fmt.Errorf("the job that ran through the renewal is not done; squeue %v", s.running(t))
		}
		return nil
	})
	long := readFile(t, filepath.Join(w.dir, "long.log"))
	if n := strings.Count(long, "001 ("); n != 1 || strings.Contains(long, "004 (") || strings.Contains(long, "009 (") || strings.Contains(long, "012 (") {
		t.Errorf("the job that ran through the renewal: %d executions, evicted, aborted or held:\n%s", n, long)
	}
	w.write("after.sub", fmt.Sprintf(renewJob, 2, "after.log"))
	w.expect(0, "condor", "submit", "-pool", cm, "after.sub")
	eventually(t, 120*time.Second, func() error {
		if after := readFile(t, filepath.Join(w.dir, "after.log")); !strings.Contains(after, "005 (") {
			return fmt.Errorf("the job submitted after the old CA's expiry is not done; squeue %v", s.running(t))
		}
		return nil
	})
	noneLost("at the end")
}
