package gridengine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/batch/batchtest"
	"github.com/pond-htc/pond/overlay/glidein/gridengine"
	"github.com/pond-htc/pond/overlay/glidein/gridengine/sgetest"
)

// fakeAgent stands in for pondctl on the far side: it records its
// arguments and environment, then waits for a file "release" in its
// directory and exits with the code written there, or sleeps as told.
const fakeAgent = `#!/bin/sh
echo "$@" > "$POND_GLIDEIN_DIR/args"
env > "$POND_GLIDEIN_DIR/env"
case "$1" in
sleep) exec sleep "$2" ;;
wait)
	while [ ! -e "$POND_GLIDEIN_DIR/release" ]; do sleep 0.1; done
	exit "$(cat "$POND_GLIDEIN_DIR/release")" ;;
esac
`

func TestMain(m *testing.M) {
	// What pondctl's environment holds never reaches a job.
	os.Setenv("POND_TEST_SECRET", "not for the job")
	code := m.Run()
	sgetest.StopShared()
	os.Exit(code)
}

// writeAgent writes fakeAgent to a file of t's and returns its path.
func writeAgent(t *testing.T) string { return batchtest.Executable(t, fakeAgent) }

// newSite is a site of the cell c whose commands run on this machine.
func newSite(t *testing.T, c *sgetest.Cell, cfg gridengine.Config) *gridengine.Site {
	t.Helper()
	cfg.Env = append(cfg.Env, c.Env()...)
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(t.TempDir(), "work")
	}
	s, err := gridengine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// find lists the site and returns the glidein with this id.
func find(t *testing.T, s *gridengine.Site, id string) (glidein.Glidein, bool) {
	t.Helper()
	gs, err := s.List(ctxFor(t), glidein.IDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.ID == id {
			return g, true
		}
	}
	return glidein.Glidein{}, false
}

// waitState waits until List shows the glidein in state want.
func waitState(t *testing.T, s *gridengine.Site, c *sgetest.Cell, id string, want glidein.State) glidein.Glidein {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		g, ok := find(t, s, id)
		if ok && g.State == want {
			return g
		}
		if time.Now().After(deadline) {
			outs, _ := filepath.Glob(filepath.Join(s.Config().WorkDir, id, "sge-*.out"))
			var said []byte
			if len(outs) > 0 {
				said, _ = os.ReadFile(outs[0])
			}
			t.Fatalf("glidein %s: %+v (found %v), want %q; its output:\n%s\n%s", id, g, ok, want, said, c.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSubmitRunEnd submits a glidein that runs to its end: it runs from
// a directory of its own (0700) holding its files (0600), with its
// environment and end time and nothing of pondctl's; a second Submit of
// its ID is refused while it runs and after it ended; List reports it
// running, then done or failed by its exit status; Cancel removes its
// directory.
func TestSubmitRunEnd(t *testing.T) {
	t.Parallel()
	c := sgetest.Shared(t)
	for _, tc := range []struct {
		name, exit string
		want       glidein.State
		reason     string
	}{
		{"done", "0", glidein.Done, ""},
		{"failed", "3", glidein.Failed, "exit status 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t, c, gridengine.Config{Walltime: time.Hour})
			ctx := ctxFor(t)
			if err := s.Check(ctx); err != nil {
				t.Fatalf("Check: %v", err)
			}
			id := "pond-ge-" + tc.name
			req := glidein.Request{ID: id, Binary: writeAgent(t), Args: []string{"wait", "{dir}/x"},
				Env: map[string]string{"POND_POOL": "campus"}, Files: map[string][]byte{"token": []byte("secret")}, Lifetime: 10 * time.Minute}
			g, err := s.Submit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if jobs := c.Jobs(t, id); len(jobs) != 1 || jobs[0] != g.SiteID {
				t.Fatalf("qstat shows jobs %q named %s, want %s", jobs, id, g.SiteID)
			}
			running := waitState(t, s, c, id, glidein.Running)
			if running.SiteID != g.SiteID || running.Host != c.Host || running.Started.IsZero() {
				t.Errorf("running: %+v, want job %s on %s", running, g.SiteID, c.Host)
			}
			dir := filepath.Join(s.Config().WorkDir, id)
			for _, f := range []struct {
				path string
				mode os.FileMode
			}{{dir, 0o700 | os.ModeDir}, {filepath.Join(dir, "token"), 0o600}, {filepath.Join(dir, gridengine.ScriptName), 0o600}} {
				st, err := os.Stat(f.path)
				if err != nil || st.Mode() != f.mode {
					t.Errorf("%s: %v, %v; want mode %v", f.path, st.Mode(), err, f.mode)
				}
			}
			var env []byte
			for deadline := time.Now().Add(30 * time.Second); len(env) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				env, _ = os.ReadFile(filepath.Join(dir, "env"))
			}
			for _, want := range []string{"POND_POOL=campus", "POND_GLIDEIN_ID=" + id, "POND_GLIDEIN_DIR=" + dir, glidein.EndEnv + "="} {
				if !strings.Contains(string(env), want) {
					t.Errorf("the job's environment lacks %s:\n%s", want, env)
				}
			}
			if strings.Contains(string(env), "POND_TEST_SECRET") {
				t.Errorf("pondctl's environment reached the job:\n%s", env)
			}
			if args, _ := os.ReadFile(filepath.Join(dir, "args")); string(args) != "wait "+dir+"/x\n" {
				t.Errorf("args: %q", args)
			}
			if _, err := s.Submit(ctx, req); !errors.Is(err, glidein.ErrDuplicate) {
				t.Fatalf("Submit of a running glidein's ID: %v, want ErrDuplicate", err)
			}
			if err := os.WriteFile(filepath.Join(dir, "release"), []byte(tc.exit), 0o644); err != nil {
				t.Fatal(err)
			}
			ended := waitState(t, s, c, id, tc.want)
			if ended.SiteID != g.SiteID || ended.Reason != tc.reason {
				t.Errorf("ended: %+v, want job %s, reason %q", ended, g.SiteID, tc.reason)
			}
			// Ended, and forgotten by qstat or not: never again.
			if _, err := s.Submit(ctx, req); !errors.Is(err, glidein.ErrDuplicate) {
				t.Fatalf("Submit of an ended glidein's ID: %v, want ErrDuplicate", err)
			}
			if err := s.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("directory left after Cancel: %v", err)
			}
		})
	}
}

// TestCancel ends a running glidein and a queued one (held): Grid Engine
// shows no job of theirs afterwards, their directories are gone, and
// cancelling again, or an ID never submitted, is not an error.
func TestCancel(t *testing.T) {
	t.Parallel()
	c := sgetest.Shared(t)
	s := newSite(t, c, gridengine.Config{})
	held := newSite(t, c, gridengine.Config{WorkDir: s.Config().WorkDir, Extra: []string{"-h"}})
	ctx := ctxFor(t)
	if _, err := s.Submit(ctx, glidein.Request{ID: "pond-ge-cancel-run", Binary: writeAgent(t), Args: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Submit(ctx, glidein.Request{ID: "pond-ge-cancel-held", Binary: writeAgent(t), Args: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, c, "pond-ge-cancel-run", glidein.Running)
	if g, _ := find(t, s, "pond-ge-cancel-held"); g.State != glidein.Queued || g.Reason != "on hold" {
		t.Fatalf("held glidein: %+v, want queued on hold", g)
	}
	for _, id := range []string{"pond-ge-cancel-run", "pond-ge-cancel-held"} {
		if err := s.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if jobs := c.Jobs(t, id); len(jobs) != 0 {
			t.Errorf("%s: jobs %q left after Cancel", id, jobs)
		}
		if _, err := os.Stat(filepath.Join(s.Config().WorkDir, id)); !os.IsNotExist(err) {
			t.Errorf("%s: directory left after Cancel: %v", id, err)
		}
		if err := s.Cancel(ctx, id); err != nil {
			t.Errorf("Cancel again: %v", err)
		}
	}
	if err := s.Cancel(ctx, "pond-ge-never"); err != nil {
		t.Errorf("Cancel of an ID never submitted: %v", err)
	}
}

// TestRefused: a job qsub refuses (a queue the cell has not) leaves
// nothing, neither a job nor a directory, and says why; Check says so
// first, about the setting.
func TestRefused(t *testing.T) {
	t.Parallel()
	c := sgetest.Shared(t)
	s := newSite(t, c, gridengine.Config{Queue: "nosuch.q"})
	ctx := ctxFor(t)
	var se *glidein.SettingError
	if err := s.Check(ctx); !errors.As(err, &se) || se.Setting != "queue" || !strings.Contains(err.Error(), "nosuch.q") {
		t.Errorf("Check: %v, want an error about queue naming nosuch.q", err)
	}
	_, err := s.Submit(ctx, glidein.Request{ID: "pond-ge-refused", Binary: writeAgent(t), Args: []string{"sleep", "1"}})
	if !errors.Is(err, batch.ErrRefused) || !strings.Contains(err.Error(), "qsub refused it") {
		t.Fatalf("Submit to a queue that is not: %v, want qsub's refusal", err)
	}
	if jobs := c.Jobs(t, "pond-ge-refused"); len(jobs) != 0 {
		t.Errorf("jobs %q of a refused submission", jobs)
	}
	if _, err := os.Stat(filepath.Join(s.Config().WorkDir, "pond-ge-refused")); !os.IsNotExist(err) {
		t.Errorf("the directory of a refused submission is left: %v", err)
	}
}

// TestUnreachable: commands that cannot reach the qmaster make Check
// fail, saying where they looked.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	c := sgetest.Shared(t)
	s, err := gridengine.New(gridengine.Config{WorkDir: t.TempDir(), Env: append(c.Env(), "SGE_QMASTER_PORT=1")})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Check(ctxFor(t))
	if err == nil || !strings.Contains(err.Error(), "act_qmaster") {
		t.Fatalf("Check against no qmaster: %v, want an error naming where the qmaster is looked for", err)
	}
}

// TestWriteFiles replaces a running glidein's file through a rename, and
// refuses a glidein that is not queued or running.
func TestWriteFiles(t *testing.T) {
	t.Parallel()
	c := sgetest.Shared(t)
	s := newSite(t, c, gridengine.Config{})
	ctx := ctxFor(t)
	id := "pond-ge-files"
	if _, err := s.Submit(ctx, glidein.Request{ID: id, Binary: writeAgent(t), Args: []string{"sleep", "600"},
		Files: map[string][]byte{"token": []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFiles(ctx, id, map[string][]byte{"token": []byte("new")}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Config().WorkDir, id, "token")
	if data, err := os.ReadFile(path); err != nil || string(data) != "new" {
		t.Fatalf("token after WriteFiles: %q, %v", data, err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode() != 0o600 {
		t.Errorf("token: %v, %v; want mode 0600", st.Mode(), err)
	}
	for _, bad := range []string{gridengine.ScriptName, "sge-1.out", ".submit.lock", "../x"} {
		if err := s.WriteFiles(ctx, id, map[string][]byte{bad: nil}); err == nil {
			t.Errorf("WriteFiles of %q was taken", bad)
		}
	}
	if err := s.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFiles(ctx, id, map[string][]byte{"token": []byte("late")}); err == nil || !strings.Contains(err.Error(), "not queued or running") {
		t.Errorf("WriteFiles after Cancel: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Config().WorkDir, id)); !os.IsNotExist(err) {
		t.Errorf("WriteFiles after Cancel made the directory again: %v", err)
	}
}
