package slurm_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/remote"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
	"golang.org/x/crypto/ssh/knownhosts"
)

// loginSite is a site whose Slurm commands run on the login node ln.
func loginSite(t *testing.T, ln *slurmtest.LoginNode, cfg slurm.Config) *slurm.Site {
	t.Helper()
	cfg.WorkDir = ln.WorkDir
	cfg.Login = ln.Login()
	s, err := slurm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// jobsOf returns the Slurm jobs named id: "JOBID USER STATE" each.
func jobsOf(t *testing.T, c *slurmtest.Cluster, id string) []string {
	t.Helper()
	out := c.Run(t, "squeue", "-h", "-t", "all", "-n", id, "-o", "%i %u %T")
	return strings.Split(strings.TrimSpace(out), "\n")
}

// TestLoginSubmit submits a glidein through the login node, as a user
// other than the one pond runs as: the job runs as that user, from a
// directory of its own (0700) holding its files (0600), with the binary
// copied once; a second site (another pondctl) reuses it; one
// connection serves every command; Cancel ends the job and removes the
// directory.
func TestLoginSubmit(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	ln := slurmtest.StartLogin(t, c)
	s := loginSite(t, ln, slurm.Config{MemoryMB: 100})
	ctx := ctxFor(t)
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	agent := writeAgent(t)
	req := func(id string) glidein.Request {
		return glidein.Request{ID: id, Binary: agent, Args: []string{"wait"},
			Files: map[string][]byte{"token": []byte("secret " + id)}, Lifetime: 10 * time.Minute}
	}
	g, err := s.Submit(ctx, req("pond-login-a"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(ln.WorkDir, "pond-login-a")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		g, _ := find(t, s, "pond-login-a")
		if g.State == glidein.Running {
			break
		}
		if g.State.Ended() || time.Now().After(deadline) {
			outs, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out"))
			var said []byte
			if len(outs) > 0 {
				said, _ = os.ReadFile(outs[0])
			}
			t.Fatalf("glidein: %+v, want running; its output:\n%s", g, said)
		}
	}
	jobs := jobsOf(t, c, "pond-login-a")
	if len(jobs) != 1 || jobs[0] != g.SiteID+" "+ln.User+" RUNNING" {
		t.Fatalf("squeue shows %q, want job %s of %s running", jobs, g.SiteID, ln.User)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700 | os.ModeDir}, {filepath.Join(dir, "token"), 0o600}, {filepath.Join(dir, slurm.ScriptName), 0o600}} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode() != f.mode || int(sys.Uid) != ln.UID {
			t.Errorf("%s: mode %v owner %d, want %v owned by %s (%d)", f.path, st.Mode(), sys.Uid, f.mode, ln.User, ln.UID)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "token")); err != nil || string(data) != "secret pond-login-a" {
		t.Errorf("token: %q, %v", data, err)
	}
	bins, _ := filepath.Glob(filepath.Join(ln.WorkDir, "bin", "pondctl-*"))
	if len(bins) != 1 {
		t.Fatalf("binaries on the login node: %v", bins)
	}
	before, _ := os.Stat(bins[0])

	if _, err := s.Submit(ctx, req("pond-login-a")); !errors.Is(err, glidein.ErrDuplicate) {
		t.Fatalf("second Submit of the same ID: %v, want ErrDuplicate", err)
	}

	// Another pondctl: the binary's checksum matches, it is not copied.
	s2 := loginSite(t, ln, slurm.Config{MemoryMB: 100})
	if _, err := s2.Submit(ctx, req("pond-login-b")); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(bins[0])
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the binary was copied again")
	}
	if n := strings.Count(ln.SSH.Log(0), "Accepted publickey for "+ln.User); n != 2 {
		t.Errorf("%d SSH logins for two sites, want one each:\n%s", n, ln.SSH.Log(0))
	}

	for _, id := range []string{"pond-login-a", "pond-login-b"} {
		if err := s.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(ln.WorkDir, id)); !os.IsNotExist(err) {
			t.Errorf("%s: directory left after Cancel: %v", id, err)
		}
	}
	gs, err := s.List(ctx, glidein.IDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if !g.State.Ended() {
			t.Errorf("after Cancel: %+v", g)
		}
	}
}

// TestLoginUnknownHost refuses a login node whose key the known_hosts
// file does not have, and one whose key changed, saying so.
func TestLoginUnknownHost(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	ln := slurmtest.StartLogin(t, c)
	other := sshtest.GenerateKey(t, filepath.Join(t.TempDir(), "other"))
	for _, tc := range []struct {
		name, known string
		want        error
	}{
		{"empty", "", remote.ErrUnknownHost},
		{"other key", knownhosts.Line([]string{knownhosts.Normalize(ln.SSH.Hosts[0])}, other.PublicKey()), remote.ErrHostKeyChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known := filepath.Join(t.TempDir(), "known_hosts")
			if err := os.WriteFile(known, []byte(tc.known+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := slurm.New(slurm.Config{WorkDir: ln.WorkDir, Login: &slurm.Login{Host: ln.Host, Port: ln.Port, User: ln.User,
				PrivateKeyFile: ln.SSH.KeyFile, KnownHostsFile: known}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.Check(ctxFor(t))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), strconv.Itoa(ln.Port)) {
				t.Fatalf("Check: %v, want %v naming the login node", err, tc.want)
			}
			if _, err := os.Stat(ln.WorkDir); !os.IsNotExist(err) {
				t.Fatalf("the work directory was made on a host not trusted: %v", err)
			}
		})
	}
}

// TestLoginLostSbatch cuts the SSH connection while sbatch runs on the
// login node, before it submitted (the wrapper waits first) and after:
// Submit learns from squeue, under the submission's lock that the
// orphaned sbatch still holds, whether the job exists, and reports it:
// one job, never two, and never one that pond does not know of.
func TestLoginLostSbatch(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	ln := slurmtest.StartLogin(t, c)
	for _, tc := range []struct {
		name, wrapper string
	}{
		{"before", "touch \"$MARK\"; sleep 3; exec sbatch \"$@\"\n"},
		{"after", "sbatch \"$@\"; rc=$?; touch \"$MARK\"; sleep 3; exit $rc\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "pond-lost-" + tc.name
			mark := filepath.Join(filepath.Dir(ln.WorkDir), "mark-"+tc.name)
			wrapper := filepath.Join(filepath.Dir(ln.WorkDir), "sbatch-"+tc.name)
			if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nMARK="+mark+"\n"+tc.wrapper), 0o755); err != nil {
				t.Fatal(err)
			}
			s := loginSite(t, ln, slurm.Config{MemoryMB: 100, Commands: slurm.Commands{Sbatch: wrapper}})
			ctx := ctxFor(t)
			go func() {
				deadline := time.Now().Add(time.Minute)
				for time.Now().Before(deadline) {
					if _, err := os.Stat(mark); err == nil {
						t.Logf("cut the connection: killed sshd %v", ln.SSH.CutConnections(0))
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			g, err := s.Submit(ctx, glidein.Request{ID: id, Binary: writeAgent(t), Args: []string{"sleep", "600"}, Lifetime: 10 * time.Minute})
			if err != nil {
				t.Fatalf("Submit with its connection cut: %v\nsqueue: %q", err, jobsOf(t, c, id))
			}
			if _, err := os.Stat(mark); err != nil {
				t.Fatal("the connection was not cut: the wrapper never ran")
			}
			// The orphaned sbatch has had every chance to submit twice.
			time.Sleep(4 * time.Second)
			jobs := jobsOf(t, c, id)
			if len(jobs) != 1 || !strings.HasPrefix(jobs[0], g.SiteID+" ") {
				t.Fatalf("squeue shows %q for %s, want only job %s, the one Submit returned", jobs, id, g.SiteID)
			}
			if _, err := s.Submit(ctx, glidein.Request{ID: id, Binary: writeAgent(t), Args: []string{"sleep", "600"}}); !errors.Is(err, glidein.ErrDuplicate) {
				t.Fatalf("Submit again: %v, want ErrDuplicate", err)
			}
			if err := s.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
		})
	}
}
