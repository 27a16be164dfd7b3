package batch_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
)

// TestCheckRequest refuses what no batch system's site may submit: a bad
// ID, no binary, negative sizes, an environment name that is not one, a
// NUL in an argument, and a file named as the site's own (the script,
// the jobs' output, the lock).
func TestCheckRequest(t *testing.T) {
	ok := glidein.Request{ID: "pond-a1", Binary: "/bin/sh", Env: map[string]string{"A_1": "x"}, Args: []string{"-c"},
		Files: map[string][]byte{"token": nil}}
	for _, tc := range []struct {
		name string
		mod  func(*glidein.Request)
		want string
	}{
		{"ok", func(*glidein.Request) {}, ""},
		{"id", func(r *glidein.Request) { r.ID = "x-1" }, "glidein id"},
		{"long id", func(r *glidein.Request) { r.ID = "pond-" + strings.Repeat("a", 60) }, "at most 64"},
		{"binary", func(r *glidein.Request) { r.Binary = "" }, "no binary"},
		{"negative", func(r *glidein.Request) { r.MemoryMB = -1 }, "negative"},
		{"env", func(r *glidein.Request) { r.Env = map[string]string{"1A": ""} }, "not a variable name"},
		{"nul", func(r *glidein.Request) { r.Args = []string{"a\x00b"} }, "NUL"},
		{"script", func(r *glidein.Request) { r.Files = map[string][]byte{batch.ScriptName: nil} }, "a plain name"},
		{"output", func(r *glidein.Request) { r.Files = map[string][]byte{"out-7.txt": nil} }, "out-*"},
		{"lock", func(r *glidein.Request) { r.Files = map[string][]byte{batch.LockName: nil} }, "a plain name"},
		{"path", func(r *glidein.Request) { r.Files = map[string][]byte{"../x": nil} }, "a plain name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			tc.mod(&req)
			err := batch.CheckRequest(req, "out-")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestScript runs a glidein's batch script with sh: it exports the
// request's environment and the glidein's, quoted, says when the batch
// system ends the job, and runs the binary from its directory with
// {dir} in its arguments replaced.
func TestScript(t *testing.T) {
	dir := t.TempDir()
	req := glidein.Request{ID: "pond-s1", Env: map[string]string{"Q": `it's "$HOME"`},
		Args: []string{"-c", `echo "$POND_GLIDEIN_ID|$POND_GLIDEIN_DIR|$Q|$PWD|$0"; echo $(( ` + glidein.EndEnv + ` - $(date +%s) ))`, "{dir}/x"}}
	script := batch.Script(req, dir, "/bin/sh", []string{"#X --opt"}, 600)
	if !strings.HasPrefix(script, "#!/bin/sh\n#X --opt\n") {
		t.Errorf("the extra lines are not first:\n%s", script)
	}
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, script)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	real, _ := filepath.EvalSymlinks(dir)
	if want := "pond-s1|" + dir + `|it's "$HOME"|` + real + "|" + dir + "/x"; len(lines) != 2 || lines[0] != want {
		t.Fatalf("the script said %q, want %q first", lines, want)
	}
	if lines[1] != "600" && lines[1] != "599" {
		t.Errorf("the job ends in %s s, not 600", lines[1])
	}
	if strings.Contains(batch.Script(req, dir, "/bin/sh", nil, 0), "export "+glidein.EndEnv) {
		t.Errorf("a job without a limit has an end")
	}
}

// TestLockWait: a Cancel waits for the Submit of its glidein to end,
// and gives up when its context does.
func TestLockWait(t *testing.T) {
	var f batch.Inflight
	if !f.Lock("pond-a") || f.Lock("pond-a") || !f.Lock("pond-b") {
		t.Fatal("Lock does not hold an ID once")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := f.LockWait(ctx, "pond-a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockWait of a locked ID = %v", err)
	}
	time.AfterFunc(100*time.Millisecond, func() { f.Unlock("pond-a") })
	start := time.Now()
	if err := f.LockWait(context.Background(), "pond-a"); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Error("LockWait did not wait for Unlock")
	}
	if f.Lock("pond-a") {
		t.Error("LockWait did not lock")
	}
}

// TestRemoveDir removes a cancelled glidein's directory only once its
// job no longer runs, or after the wait when it still does.
func TestRemoveDir(t *testing.T) {
	fs := batch.NewLocalFS(t.TempDir())
	dir := filepath.Join(t.TempDir(), "pond-r")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	live := func(context.Context) (bool, error) {
		if _, err := os.Stat(dir); err != nil {
			t.Error("the directory was removed while the job ran")
		}
		return asked.Add(1) < 3, nil
	}
	if err := batch.RemoveDir(context.Background(), fs, dir, live, time.Minute, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 3 {
		t.Errorf("live asked %d times, want 3", asked.Load())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the directory is still there: %v", err)
	}

	// A job that does not end: removed after the wait anyway.
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	always := func(context.Context) (bool, error) { return true, nil }
	if err := batch.RemoveDir(context.Background(), fs, dir, always, 150*time.Millisecond, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("removed after %v, before the wait", d)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the directory is still there: %v", err)
	}
}

// TestSetCommands sets the paths a provider block names, leaves the
// others, and refuses a command the site does not run, naming those it
// does.
func TestSetCommands(t *testing.T) {
	var sub, stat string
	cmds := []batch.Command{{Name: "qsub", Path: &sub}, {Name: "qstat", Path: &stat}}
	if err := batch.SetCommands("Toy", map[string]string{"qsub": "/opt/qsub"}, cmds...); err != nil {
		t.Fatal(err)
	}
	if sub != "/opt/qsub" || stat != "" {
		t.Errorf("qsub %q, qstat %q", sub, stat)
	}
	batch.DefaultCommands(cmds...)
	if sub != "/opt/qsub" || stat != "qstat" {
		t.Errorf("with the defaults: qsub %q, qstat %q", sub, stat)
	}
	err := batch.SetCommands("Toy", map[string]string{"qrsh": "/opt/qrsh"}, cmds...)
	var se *glidein.SettingError
	if !errors.As(err, &se) || se.Setting != "commands" || !strings.Contains(err.Error(), `"qrsh" is not a Toy command pond uses (qsub, qstat)`) {
		t.Fatalf("err = %v", err)
	}
}

// TestLatest reports one glidein of an ID: a live job wins over an ended
// one, and of two ended jobs the later.
func TestLatest(t *testing.T) {
	queued := glidein.Glidein{ID: "pond-a", SiteID: "5", State: glidein.Queued}
	doneLater := glidein.Glidein{ID: "pond-a", SiteID: "9", State: glidein.Done}
	failedEarlier := glidein.Glidein{ID: "pond-a", SiteID: "3", State: glidein.Failed}
	other := glidein.Glidein{ID: "pond-0", SiteID: "1", State: glidein.Running}
	for _, order := range [][]glidein.Glidein{
		{queued, doneLater, failedEarlier, other},
		{failedEarlier, doneLater, other, queued},
		{other, doneLater, queued, failedEarlier},
	} {
		l := batch.Latest{}
		for _, g := range order {
			l.Add(g)
		}
		got := l.Sorted()
		if len(got) != 2 || got[0] != other || got[1] != queued {
			t.Errorf("of %v: %v, want the live job of each ID, by ID", order, got)
		}
	}
	if !batch.Newer(doneLater, failedEarlier) || batch.Newer(failedEarlier, doneLater) {
		t.Error("of two ended jobs, the later does not win")
	}
}

// TestCommandString shows a site's own script by what it ran, not its
// text.
func TestCommandString(t *testing.T) {
	for _, tc := range []struct {
		path string
		args []string
		want string
	}{
		{"/usr/bin/qstat", []string{"-j", "pond-a"}, "/usr/bin/qstat -j pond-a"},
		{"/bin/sh", []string{"-c", "long\nscript", "sh", "qstat", "pond-a"}, "sh -c SCRIPT sh qstat pond-a"},
		{"/bin/sh", []string{"-c", "x"}, "/bin/sh -c x"},
		{"squeue", nil, "squeue"},
	} {
		if got := batch.CommandString(tc.path, tc.args); got != tc.want {
			t.Errorf("CommandString(%q, %q) = %q, want %q", tc.path, tc.args, got, tc.want)
		}
	}
}
