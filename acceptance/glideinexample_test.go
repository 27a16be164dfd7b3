package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// glideinJobFor runs only on a glidein of site, for a while.
const glideinJobFor = `executable          = /bin/sleep
arguments           = 20
transfer_executable = false
requirements        = IsGlidein =?= true && Site == "%s"
request_memory      = 16
log                 = job.log
queue
`

// TestGlideinExamples runs examples/slurm on a Slurm cluster and
// examples/ssh on SSH hosts with the real pondctl (see glideinStory);
// first a configuration the site refuses (an unknown partition, a key the
// hosts reject) fails at plan, saying why, and starts nothing.
func TestGlideinExamples(t *testing.T) {
	t.Parallel()
	runAtOnce(t, map[string]func(t *testing.T){
		"slurm": func(t *testing.T) {
			// Two nodes with room for one glidein each (2 slots, 2GB).
			s := slurmSite(t, slurmtest.Options{Nodes: 2, CPUs: 2, MemoryMB: 4000})
			w := newWorkdir(t, "slurm")
			w.env = append(w.env, s.env...)
			vars := []string{"-var=partition=" + s.cluster.Partitions[0], "-var=work_dir=" + s.workDir, "-var=idle_timeout=60s"}

			r := w.expect(1, "plan", "-var=partition=nosuch", "-var=work_dir="+s.workDir)
			if !strings.Contains(r.stderr, `"nosuch"`) || !strings.Contains(r.stderr, "partition") {
				t.Errorf("plan with an unknown partition: want an error naming it:\n%s", r.stderr)
			}
			if got := s.running(t); len(got) != 0 {
				t.Fatalf("after a refused plan, squeue shows %v", got)
			}
			glideinStory(t, w, s, "glidein.hpc", "hpc", vars)
		},
		"ssh": func(t *testing.T) {
			s := startSSHSite(t)
			srv := s.ssh
			w := newWorkdir(t, "ssh")
			// The hosts as the contract has them, "user@host:port", and no
			// gossip key: the working directory has its own.
			hosts := make([]string, 2)
			for i, h := range srv.Hosts[:2] {
				hosts[i] = strconv.Quote(srv.User + "@" + h)
			}
			vars := []string{"-var=hosts=[" + strings.Join(hosts, ",") + "]",
				"-var=private_key_file=" + srv.KeyFile, "-var=known_hosts_file=" + srv.KnownHosts,
				"-var=remote_dir=" + filepath.Join(srv.Dir, "glideins"), "-var=idle_timeout=60s"}

			other := filepath.Join(t.TempDir(), "id_other")
			sshtest.GenerateKey(t, other)
			r := w.expect(1, append([]string{"plan"}, append(slices.Clone(vars), "-var=private_key_file="+other)...)...)
			if !strings.Contains(r.stderr, srv.Hosts[0]) || !strings.Contains(r.stderr, "authenticat") {
				t.Errorf("plan with a key the hosts reject: want an error naming the host and authentication:\n%s", r.stderr)
			}
			if pids, _ := srv.Processes(); len(pids) != 0 {
				t.Fatalf("after a refused plan, processes run on the hosts: %v", pids)
			}
			glideinStory(t, w, s, "glidein.hosts", "ssh", vars)
			if pids, _ := srv.Processes(); len(pids) != 0 {
				t.Fatalf("after destroy, processes run on the hosts: %v", pids)
			}
		},
	})
}

// glideinStory is the life of an example's glideins: apply starts two
// (the site queues and runs them) → they validate and join the pool (their
// slots are in the collector, IsGlidein, with their IDs) → a job that only
// a glidein may run runs on one of them → the other, ended behind pond's
// back, is drift that plan reports by its ID and the next apply replaces →
// the state lost, import adopts the pool and the glideins, and plan shows
// no change (importStory) → once the job is done, every glidein leaves by itself when idle past its
// idle_timeout (its status says idle) → destroy leaves the site with no
// glidein.
func glideinStory(t *testing.T, w *workdir, s glideinSite, addr, site string, vars []string) {
	t.Helper()
	defer func() {
		if t.Failed() && s.logs != nil {
			t.Logf("the site's logs:\n%s", s.logs())
		}
	}()
	cmd := func(args ...string) []string { return append(args, vars...) }
	began := time.Now()
	w.expect(0, cmd("apply", "-auto-approve")...)
	ids := w.glideinIDs(addr)
	if len(ids) != 2 {
		t.Fatalf("after apply, %s has the glideins %v, want 2", addr, ids)
	}
	cm := w.output("central_manager")
	eventually(t, 90*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Name", "IsGlidein", "GlideinID", "Site")
		for _, id := range ids {
			if !strings.Contains(r.stdout, "@"+id+" true "+id+" "+site) {
				return fmt.Errorf("no slot of %s in the pool:\n%s", id, r)
			}
		}
		return nil
	})
	t.Logf("apply to both glideins in the pool: %s", time.Since(began).Round(time.Millisecond))

	w.write("job.sub", fmt.Sprintf(glideinJobFor, site))
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	eventually(t, 60*time.Second, func() error {
		if data := readFile(t, filepath.Join(w.dir, "job.log")); !strings.Contains(data, "001 (") {
			return fmt.Errorf("the job has not started:\n%s", data)
		}
		return nil
	})
	var busy string
	eventually(t, 10*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "RemoteHost")
		for _, id := range ids {
			if strings.Contains(r.stdout, "@"+id) {
				busy = id
				return nil
			}
		}
		return fmt.Errorf("the job runs on none of the glideins %v: %s", ids, r)
	})
	other := ids[0]
	if other == busy {
		other = ids[1]
	}

	// Behind pond's back.
	s.kill(t, other)
	eventually(t, 60*time.Second, func() error {
		if got := s.running(t); slices.Contains(got, other) {
			return fmt.Errorf("%s still runs: %v", other, got)
		}
		return nil
	})
	r := w.run(cmd("plan")...)
	if !strings.Contains(r.stdout+r.stderr, other) {
		t.Fatalf("plan does not report %s, ended behind pond's back:\n%s", other, r)
	}
	w.expect(0, cmd("apply", "-auto-approve")...)
	now := w.glideinIDs(addr)
	if len(now) != 2 || !slices.Contains(now, busy) || slices.Contains(now, other) {
		t.Fatalf("after the apply that replaces %s, the glideins are %v (were %v)", other, now, ids)
	}
	got := s.running(t)
	slices.Sort(got)
	slices.Sort(now)
	if !slices.Equal(got, now) {
		t.Fatalf("the site runs %v, the state lists %v", got, now)
	}
	importStory(t, w, s, addr, vars, now)

	eventually(t, 90*time.Second, func() error {
		if data := readFile(t, filepath.Join(w.dir, "job.log")); !strings.Contains(data, "005 (") {
			return fmt.Errorf("the job has not ended:\n%s", data)
		}
		return nil
	})
	// Idle, each leaves by itself.
	eventually(t, 3*time.Minute, func() error {
		if got := s.running(t); len(got) != 0 {
			return fmt.Errorf("still running: %v", got)
		}
		return nil
	})
	if st := s.status(t, busy); st.Phase != "ended" || st.Reason != "idle" {
		t.Errorf("%s ended with status %+v, want ended for idle", busy, st)
	}
	w.expect(0, cmd("destroy", "-auto-approve")...)
	if got := s.running(t); len(got) != 0 {
		t.Fatalf("after destroy the site runs %v", got)
	}
}

// status reads the status file of the glidein id on the site.
// importStory loses the state of an example whose glideins run, imports
// its pool and its glidein resource (KIND:PREFIX, the resource's id), and
// shows that the imported resource holds the glideins the site runs and
// that a plan right after shows no change to a resource: the import took
// the configuration's arguments.
func importStory(t *testing.T, w *workdir, s glideinSite, addr string, vars, running []string) {
	t.Helper()
	prefix := w.resourceValue(addr, "id")
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
	w.expect(0, append(append([]string{"import"}, vars...), "pool.campus", "campus")...)
	if r := w.expect(0, append(append([]string{"import"}, vars...), addr, s.kind+":"+prefix)...); !strings.Contains(r.stdout, "Import successful") {
		t.Fatalf("import of %s:\n%s", addr, r)
	}
	imported := w.glideinIDs(addr)
	slices.Sort(imported)
	if !slices.Equal(imported, running) {
		t.Errorf("imported the glideins %v, the site runs %v", imported, running)
	}
	// The outputs, which the state lost too, are all the plan shows.
	r := w.run(append([]string{"plan", "-detailed-exitcode"}, vars...)...)
	if r.code == 1 || strings.Contains(r.stdout, "will perform the following actions") {
		t.Fatalf("plan after the import: want no change to a resource:\n%s", r)
	}
}

// resourceValue is the string attribute name of the resource at addr, as
// `pondctl show -json` has it.
func (w *workdir) resourceValue(addr, name string) string {
	w.t.Helper()
	var doc struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address string         `json:"address"`
					Values  map[string]any `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	r := w.expect(0, "show", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		w.t.Fatalf("show -json: %v\n%s", err, r.stdout)
	}
	for _, res := range doc.Values.RootModule.Resources {
		if v, ok := res.Values[name].(string); ok && res.Address == addr {
			return v
		}
	}
	w.t.Fatalf("show -json has no %s.%s:\n%s", addr, name, r.stdout)
	return ""
}

func (s glideinSite) status(t *testing.T, id string) glideinStatus {
	t.Helper()
	files, _ := filepath.Glob(s.statusGlob(id))
	if len(files) != 1 {
		t.Fatalf("the status file of %s: found %v", id, files)
	}
	return readGlideinStatus(t, files[0])
}
