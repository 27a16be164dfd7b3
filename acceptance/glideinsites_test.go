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
	glideinSites["slurm-login"] = startSlurmLoginSite
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
		jobs:    func(t testing.TB) []string { return slurmJobs(t, c) },
	}
}

// slurmJobs returns the name of every job of a glidein the cluster made,
// once per job: those squeue still lists, and the ended ones of the job
// completion log.
func slurmJobs(t testing.TB, c *slurmtest.Cluster) []string {
	t.Helper()
	byID := map[string]string{}
	for _, line := range strings.Split(c.Run(t, "squeue", "-h", "-t", "all", "-o", "%i %j"), "\n") {
		if id, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && strings.HasPrefix(name, "pond-") {
			byID[id] = name
		}
	}
	for _, line := range strings.Split(c.Run(t, "sacct", "-c", "-n", "-X", "-P", "-o", "JobID,JobName"), "\n") {
		if id, name, ok := strings.Cut(strings.TrimSpace(line), "|"); ok && strings.HasPrefix(name, "pond-") {
			byID[id] = name
		}
	}
	var names []string
	for _, name := range byID {
		names = append(names, name)
	}
	return names
}

// startSlurmLoginSite is the Slurm site reached through its login node
// over SSH, as another user (slurmtest.StartLogin): pondctl has no Slurm
// command nor SLURM_CONF of its own. The login node's sbatch counts the
// submissions Slurm took, for submitted, and answers each a second later;
// every job must run as the login node's user. It kills fewer applies than the others: each of
// its commands is an SSH session.
func startSlurmLoginSite(t *testing.T) glideinSite {
	s := slurmSite(t, slurmtest.Options{Nodes: 2, CPUs: 2, MemoryMB: 2000})
	c := s.cluster
	ln := slurmtest.StartLogin(t, c)
	home := filepath.Dir(ln.WorkDir) // the login user's
	count := filepath.Join(home, "submitted")
	wrapper := filepath.Join(home, "sbatch")
	// A submission (--parsable, not plan's --test-only) is counted once
	// Slurm took it, and then returns a second later: an apply killed
	// meanwhile has a job on the cluster whose ID it never learnt.
	script := fmt.Sprintf("#!/bin/sh\nsbatch \"$@\"; rc=$?\nif [ $rc = 0 ] && [ \"$1\" = --parsable ]; then echo >> %s; sleep 1; fi\nexit $rc\n", count)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s.kind, s.env, s.trials, s.workDir = "slurm", nil, 8, ln.WorkDir
	s.statusGlob = func(id string) string { return filepath.Join(ln.WorkDir, id, "glidein.status") }
	s.provider = fmt.Sprintf(`provider "slurm" {
  partition    = %q
  work_dir     = %q
  bind_address = "127.0.0.1"
  commands     = { sbatch = %q }
  login {
    host             = %q
    port             = %d
    user             = %q
    private_key_file = %q
    known_hosts_file = %q
  }
}`, c.Partitions[0], ln.WorkDir, wrapper, ln.Host, ln.Port, ln.User, ln.SSH.KeyFile, ln.SSH.KnownHosts)
	s.running = func(t testing.TB) []string {
		t.Helper()
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(c.Run(t, "squeue", "-h", "-t", "PD,R,CF", "-o", "%j %u")), "\n") {
			name, user, _ := strings.Cut(line, " ")
			if !strings.HasPrefix(name, "pond-") {
				continue
			}
			if user != ln.User {
				t.Errorf("glidein %s runs as %s, not as the login node's user %s", name, user, ln.User)
			}
			ids = append(ids, name)
		}
		return ids
	}
	s.submitted = func(testing.TB) int {
		data, _ := os.ReadFile(count)
		return len(data)
	}
	logs := s.logs
	s.logs = func() string { return logs() + "\nsshd:\n" + ln.SSH.Log(0) }
	return s
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
