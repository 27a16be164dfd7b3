package acceptance

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// The glidein sites the acceptance tests run against: a Slurm cluster
// (slurmtest: munged, slurmctld and slurmd on this machine) and SSH hosts
// (sshtest: sshd on 127.0.0.2, 127.0.0.3, ...). Both skip a test without
// root or the packages, unless CI is set.
func init() {
	glideinSites["slurm"] = startSlurmSite
	glideinSites["ssh"] = startSSHSite
}

// slurmBenchOptions is the cluster BenchmarkGlideinFirstJob runs on.
var slurmBenchOptions = slurmtest.Options{Nodes: 1, CPUs: 2, MemoryMB: 2000}

// startSlurmSite starts a cluster of two nodes of 2 CPUs each: room for
// four glideins of one slot running at once.
func startSlurmSite(t *testing.T) glideinSite {
	return slurmSite(t, slurmtest.Options{Nodes: 2, CPUs: 2, MemoryMB: 2000})
}

// slurmSite starts a cluster shaped by opts.
func slurmSite(t testing.TB, opts slurmtest.Options) glideinSite {
	c := slurmtest.Start(t, opts)
	work := filepath.Join(t.TempDir(), "slurm-work")
	queued := func(t testing.TB) []string {
		t.Helper()
		var ids []string
		for _, name := range strings.Fields(c.Run(t, "squeue", "-h", "-t", "PD,R,CF", "-o", "%j")) {
			if strings.HasPrefix(name, "pond-") {
				ids = append(ids, name)
			}
		}
		return ids
	}
	return glideinSite{
		kind:       "slurm",
		workDir:    work,
		statusGlob: func(id string) string { return filepath.Join(work, id, "glidein.status") },
		provider: fmt.Sprintf(`provider "slurm" {
  partition    = %q
  work_dir     = %q
  bind_address = "127.0.0.1"
}`, c.Partitions[0], work),
		env: c.Env(),
		describe: func(t testing.TB) string {
			return c.Run(t, "squeue", "-h", "-t", "all", "-o", "%i %j %T %r %S %e")
		},
		running: queued,
		kill: func(t testing.TB, id string) {
			t.Helper()
			c.Run(t, "scancel", "--name", id)
		},
		logs:    c.Logs,
		cluster: c,
	}
}

// startSSHSite starts three SSH hosts, each taking one glidein at a time.
func startSSHSite(t *testing.T) glideinSite { return sshSite(t) }

// sshSite starts three SSH hosts, each taking one glidein at a time.
func sshSite(t testing.TB) glideinSite {
	srv := sshtest.Start(t, 3)
	hosts := make([]string, len(srv.Hosts))
	for i, h := range srv.Hosts {
		hosts[i] = strconv.Quote(h)
	}
	return glideinSite{
		kind: "ssh",
		statusGlob: func(id string) string {
			return filepath.Join(srv.Dir, "glideins", "hosts", "*", id, "glidein.status")
		},
		provider: fmt.Sprintf(`provider "ssh" {
  hosts            = [%s]
  user             = %q
  private_key_file = %q
  known_hosts_file = %q
  remote_dir       = %q
  slots_per_host   = 1
  bind_address     = "127.0.0.1"
}`, strings.Join(hosts, ", "), srv.User, srv.KeyFile, srv.KnownHosts, filepath.Join(srv.Dir, "glideins")),
		running: func(t testing.TB) []string {
			t.Helper()
			return sshGlideins(t, srv)
		},
		kill: func(t testing.TB, id string) {
			t.Helper()
			for _, p := range sshProcs(t, srv) {
				if p.id == id {
					// The whole session: the wrapper, timeout(1) and the agent.
					for _, q := range sshProcs(t, srv) {
						if q.sid == p.sid {
							_ = syscall.Kill(q.pid, syscall.SIGKILL)
						}
					}
				}
			}
		},
		ssh: srv,
	}
}

// sshProc is a process started through the SSH hosts' sessions.
type sshProc struct {
	pid, sid int
	id       string // the glidein's ID (-glidein) when on its command line
}

// sshProcs lists the live processes the SSH hosts' sessions started.
func sshProcs(t testing.TB, srv *sshtest.Servers) []sshProc {
	t.Helper()
	pids, err := srv.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var out []sshProc
	for _, pid := range pids {
		stat, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		cmdline, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err1 != nil || err2 != nil {
			continue // gone meanwhile
		}
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 4 {
			continue
		}
		sid, _ := strconv.Atoi(f[3])
		p := sshProc{pid: pid, sid: sid}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if k := slices.Index(args, "-glidein"); k >= 0 && k+1 < len(args) {
			p.id = args[k+1]
		}
		out = append(out, p)
	}
	return out
}

// sshGlideins returns the IDs of the glideins that run on the SSH hosts,
// an ID once per session it runs in.
func sshGlideins(t testing.TB, srv *sshtest.Servers) []string {
	t.Helper()
	seen := map[[2]string]bool{}
	var ids []string
	for _, p := range sshProcs(t, srv) {
		key := [2]string{p.id, strconv.Itoa(p.sid)}
		if p.id == "" || seen[key] {
			continue
		}
		seen[key] = true
		ids = append(ids, p.id)
	}
	return ids
}
