package gridengine_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/gridengine"
	"github.com/pond-htc/pond/overlay/glidein/gridengine/sgetest"
)

// loginSite is a site whose Grid Engine commands run on the login node ln.
func loginSite(t *testing.T, ln *sgetest.LoginNode, cfg gridengine.Config) *gridengine.Site {
	t.Helper()
	cfg.WorkDir = ln.WorkDir
	cfg.Login = ln.Login()
	s, err := gridengine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestLoginSubmit submits a glidein through the login node, as a user
// other than the one pond runs as: the job runs as that user, from a
// directory of its own holding its files, over one SSH connection;
// Cancel ends the job and removes the directory.
func TestLoginSubmit(t *testing.T) {
	t.Parallel()
	c := sgetest.Shared(t)
	ln := sgetest.StartLogin(t, c)
	s := loginSite(t, ln, gridengine.Config{})
	ctx := ctxFor(t)
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	id := "pond-ge-login"
	g, err := s.Submit(ctx, glidein.Request{ID: id, Binary: writeAgent(t), Args: []string{"wait"},
		Files: map[string][]byte{"token": []byte("secret")}, Lifetime: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	running := waitState(t, s, c, id, glidein.Running)
	if running.SiteID != g.SiteID {
		t.Fatalf("running: %+v, want job %s", running, g.SiteID)
	}
	owner := c.Run(t, "qstat", "-j", g.SiteID)
	if !strings.Contains(owner, "owner:                      "+ln.User+"\n") {
		t.Errorf("job %s is not %s's:\n%s", g.SiteID, ln.User, owner)
	}
	dir := filepath.Join(ln.WorkDir, id)
	var st os.FileInfo
	for deadline := time.Now().Add(30 * time.Second); st == nil && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, _ = os.Stat(filepath.Join(dir, "args"))
	}
	if st == nil || int(st.Sys().(*syscall.Stat_t).Uid) != ln.UID {
		t.Errorf("the job's own file: %v, want one written by %s", st, ln.User)
	}
	if _, err := s.Submit(ctx, glidein.Request{ID: id, Binary: writeAgent(t)}); !errors.Is(err, glidein.ErrDuplicate) {
		t.Fatalf("second Submit: %v, want ErrDuplicate", err)
	}
	if err := s.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if jobs := c.Jobs(t, id); len(jobs) != 0 {
		t.Errorf("jobs %q left after Cancel", jobs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory left after Cancel: %v", err)
	}
	if n := strings.Count(ln.SSH.Log(0), "Accepted publickey for "+ln.User); n != 1 {
		t.Errorf("%d SSH logins, want one:\n%s", n, ln.SSH.Log(0))
	}
}

// TestLoginLostQsub cuts the SSH connection while qsub runs on the login
// node, before it submitted (the wrapper waits first) and after: Submit
// learns from qstat, under the submission's lock that the orphaned qsub
// still holds, whether the job exists, and reports it: one job, never
// two, and never one that pond does not know of.
func TestLoginLostQsub(t *testing.T) {
	t.Parallel()
	c := sgetest.Shared(t)
	ln := sgetest.StartLogin(t, c)
	for _, tc := range []struct {
		name, wrapper string
	}{
		{"before", "touch \"$MARK\"; sleep 3; exec qsub \"$@\"\n"},
		{"after", "qsub \"$@\"; rc=$?; touch \"$MARK\"; sleep 3; exit $rc\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "pond-ge-lost-" + tc.name
			mark := filepath.Join(filepath.Dir(ln.WorkDir), "mark-"+tc.name)
			wrapper := filepath.Join(filepath.Dir(ln.WorkDir), "qsub-"+tc.name)
			if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nMARK="+mark+"\n"+tc.wrapper), 0o755); err != nil {
				t.Fatal(err)
			}
			s := loginSite(t, ln, gridengine.Config{Commands: gridengine.Commands{Qsub: wrapper}})
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
			g, err := s.Submit(ctx, glidein.Request{ID: id, Binary: writeAgent(t), Args: []string{"sleep", "600"}})
			if err != nil {
				t.Fatalf("Submit with its connection cut: %v\nqstat: %q", err, c.Jobs(t, id))
			}
			if _, err := os.Stat(mark); err != nil {
				t.Fatal("the connection was not cut: the wrapper never ran")
			}
			// The orphaned qsub has had every chance to submit twice.
			time.Sleep(4 * time.Second)
			if jobs := c.Jobs(t, id); len(jobs) != 1 || jobs[0] != g.SiteID {
				t.Fatalf("qstat shows jobs %q named %s, want only job %s, the one Submit returned", jobs, id, g.SiteID)
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
