package slurm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch/batchtest"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// fakeAgent stands in for pondctl on the far side: it records its
// arguments and environment, then waits for a file "release" in its
// directory and exits with the code written there, or sleeps as told.
const fakeAgent = `#!/bin/sh
echo "$@" > "$POND_GLIDEIN_DIR/args"
env > "$POND_GLIDEIN_DIR/env"
case "$1" in
sleep) exec sleep "$2" ;;
linger)
	# Told to leave, it still writes into its directory for a while, as
	# an agent writes its status and its daemons their files.
	trap 'i=0; end=$(( $(date +%s) + 2 )); while [ "$(date +%s)" -lt $end ]; do mkdir -p "$POND_GLIDEIN_DIR/spool" && echo x > "$POND_GLIDEIN_DIR/spool/f.$i"; i=$((i+1)); done; exit 0' TERM
	while :; do sleep 0.1; done ;;
wait)
	while [ ! -e "$POND_GLIDEIN_DIR/release" ]; do sleep 0.1; done
	exit "$(cat "$POND_GLIDEIN_DIR/release")" ;;
esac
`

func TestMain(m *testing.M) {
	code := m.Run()
	slurmtest.StopShared()
	os.Exit(code)
}

// writeAgent writes fakeAgent to a file of t's and returns its path.
func writeAgent(t *testing.T) string { return batchtest.Executable(t, fakeAgent) }

func newSite(t *testing.T, c *slurmtest.Cluster, cfg slurm.Config) *slurm.Site {
	t.Helper()
	cfg.Env = append(cfg.Env, c.Env()...)
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(t.TempDir(), "work")
	}
	s, err := slurm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// find lists the site and returns the glidein with this id.
func find(t *testing.T, s *slurm.Site, id string) (glidein.Glidein, bool) {
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
func waitState(t *testing.T, s *slurm.Site, id string, want glidein.State, within time.Duration) glidein.Glidein {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		g, ok := find(t, s, id)
		if ok && g.State == want {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("glidein %s: state %q (found %v, %+v) after %v, want %q", id, g.State, ok, g, within, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSubmitListStates submits two glideins that each need the whole node:
// the first runs, the second queues for resources; each ends as its agent
// ends it, with success and with an error.
func TestSubmitListStates(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	s := newSite(t, c, slurm.Config{MemoryMB: 100})
	ctx := ctxFor(t)
	agent := writeAgent(t)
	req := func(id string) glidein.Request {
		return glidein.Request{
			ID: id, Binary: agent, Args: []string{"wait", "-config", "{dir}/agent.hcl"},
			Env:   map[string]string{"POND_TEST": "it's here"},
			Files: map[string][]byte{"token": []byte("secret " + id), "agent.hcl": []byte("pool = \"x\"")},
			CPUs:  2, Lifetime: 10 * time.Minute,
		}
	}
	a, err := s.Submit(ctx, req("pond-a"))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "pond-a" || a.SiteID == "" || a.State != glidein.Queued || a.Submitted.IsZero() {
		t.Fatalf("Submit returned %+v", a)
	}
	ga := waitState(t, s, "pond-a", glidein.Running, 30*time.Second)
	if ga.SiteID != a.SiteID || ga.Host != c.Nodes[0] || ga.Started.IsZero() || !ga.Ended.IsZero() {
		t.Fatalf("running glidein: %+v", ga)
	}
	if _, err := s.Submit(ctx, req("pond-b")); err != nil {
		t.Fatal(err)
	}
	// Slurm gives the reason once its scheduler looked at the job.
	deadline := time.Now().Add(20 * time.Second)
	for {
		gb := waitState(t, s, "pond-b", glidein.Queued, 10*time.Second)
		if gb.Reason == "Resources" || gb.Reason == "Priority" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued glidein's reason = %q, want Resources or Priority", gb.Reason)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The glidein's directory, files, arguments and environment.
	dir := filepath.Join(s.Config().WorkDir, "pond-a")
	waitFile(t, filepath.Join(dir, "env"))
	assertMode(t, dir, 0o700|os.ModeDir)
	for _, f := range []string{"token", "agent.hcl", slurm.ScriptName} {
		assertMode(t, filepath.Join(dir, f), 0o600)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "token")); string(got) != "secret pond-a" {
		t.Errorf("token = %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "args")); strings.TrimSpace(string(got)) != "wait -config "+dir+"/agent.hcl" {
		t.Errorf("args = %q, want {dir} replaced by %s", got, dir)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env"))
	for _, want := range []string{"POND_TEST=it's here", "POND_GLIDEIN_ID=pond-a", "POND_GLIDEIN_DIR=" + dir, "POND_GLIDEIN_END="} {
		if !strings.Contains(string(env), want+"") {
			t.Errorf("the glidein's environment lacks %q:\n%s", want, env)
		}
	}
	// The binary was copied once, for both.
	bins, _ := filepath.Glob(filepath.Join(s.Config().WorkDir, "bin", "pondctl-*"))
	if len(bins) != 1 {
		t.Errorf("binaries in work_dir/bin: %v, want one", bins)
	}

	release(t, dir, "0")
	ga = waitState(t, s, "pond-a", glidein.Done, 30*time.Second)
	if ga.Ended.IsZero() || ga.Reason != "" {
		t.Errorf("done glidein: %+v", ga)
	}
	waitState(t, s, "pond-b", glidein.Running, 30*time.Second)
	release(t, filepath.Join(s.Config().WorkDir, "pond-b"), "3")
	gb := waitState(t, s, "pond-b", glidein.Failed, 30*time.Second)
	if !strings.Contains(gb.Reason, "FAILED") {
		t.Errorf("failed glidein's reason = %q, want FAILED", gb.Reason)
	}

	// Cancel of ended glideins removes their directories.
	for _, id := range []string{"pond-a", "pond-b"} {
		if err := s.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(s.Config().WorkDir, id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's directory is left: %v", id, err)
		}
	}
}

// TestScancelBehindTheSitesBack: a glidein scancel'ed on the cluster is
// Cancelled; Cancel then, again, and of an unknown ID, is fine.
func TestScancelBehindTheSitesBack(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	s := newSite(t, c, slurm.Config{})
	ctx := ctxFor(t)
	g, err := s.Submit(ctx, glidein.Request{ID: "pond-sc", Binary: writeAgent(t), Args: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "pond-sc", glidein.Running, 30*time.Second)
	c.Run(t, "scancel", g.SiteID)
	got := waitState(t, s, "pond-sc", glidein.Cancelled, 30*time.Second)
	if got.SiteID != g.SiteID || got.Ended.IsZero() {
		t.Errorf("cancelled glidein: %+v", got)
	}
	for _, id := range []string{"pond-sc", "pond-sc", "pond-never-submitted"} {
		if err := s.Cancel(ctx, id); err != nil {
			t.Errorf("Cancel(%s): %v", id, err)
		}
	}
	if err := s.Cancel(ctx, "../etc"); err == nil {
		t.Error("Cancel of a malformed id: no error")
	}
}

// TestCancelQueuedAndRunning: Cancel ends a running and a queued glidein
// and removes their directories; squeue then shows no live job of theirs.
func TestCancelQueuedAndRunning(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	s := newSite(t, c, slurm.Config{CPUs: 2})
	ctx := ctxFor(t)
	agent := writeAgent(t)
	for _, id := range []string{"pond-run", "pond-queue"} {
		if _, err := s.Submit(ctx, glidein.Request{ID: id, Binary: agent, Args: []string{"sleep", "300"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, s, "pond-run", glidein.Running, 30*time.Second)
	waitState(t, s, "pond-queue", glidein.Queued, 10*time.Second)
	for _, id := range []string{"pond-run", "pond-queue"} {
		if err := s.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(s.Config().WorkDir, id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's directory is left: %v", id, err)
		}
		waitState(t, s, id, glidein.Cancelled, 30*time.Second)
	}
	if out := c.Run(t, "squeue", "-h", "-t", "PENDING,RUNNING"); strings.TrimSpace(out) != "" {
		t.Errorf("squeue after Cancel:\n%s", out)
	}
}

// TestCancelWhileItWrites: a glidein that writes into its directory while
// it leaves (its status, its daemons' files) is cancelled without error,
// and its directory is gone once Cancel returns, for good.
func TestCancelWhileItWrites(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	s := newSite(t, c, slurm.Config{})
	ctx := ctxFor(t)
	if _, err := s.Submit(ctx, glidein.Request{ID: "pond-linger", Binary: writeAgent(t), Args: []string{"linger"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "pond-linger", glidein.Running, 30*time.Second)
	dir := filepath.Join(s.Config().WorkDir, "pond-linger")
	waitFile(t, filepath.Join(dir, "env"))
	if err := s.Cancel(ctx, "pond-linger"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	for range 2 {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("its directory after Cancel: %v", err)
		}
		time.Sleep(2 * time.Second)
	}
}

// TestTimeLimit: a glidein that outlives its lifetime is ended by Slurm
// and shows Failed, TIMEOUT.
func TestTimeLimit(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	s := newSite(t, c, slurm.Config{})
	ctx := ctxFor(t)
	if _, err := s.Submit(ctx, glidein.Request{ID: "pond-tl", Binary: writeAgent(t), Args: []string{"sleep", "600"}, Lifetime: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// Slurm counts minutes and looks at limits every 30 s.
	g := waitState(t, s, "pond-tl", glidein.Failed, 150*time.Second)
	if !strings.HasPrefix(g.Reason, "TIMEOUT") {
		t.Errorf("reason = %q, want TIMEOUT", g.Reason)
	}
	if d := g.Ended.Sub(g.Started); d < time.Minute || d > 2*time.Minute {
		t.Errorf("ran %v (%v to %v), want its 1-minute limit", d, g.Started, g.Ended)
	}
}

// TestCrashBeforeRecording: the caller dies between sbatch and recording
// what Submit returned; another site on the same cluster finds the
// glidein by its ID, also after squeue forgot it (the completion log), and
// refuses to submit it again while squeue has it.
func TestCrashBeforeRecording(t *testing.T) {
	t.Parallel()
	// A cluster of its own: squeue forgets ended jobs after 2 s here,
	// not the 300 s of the shared one.
	c := slurmtest.Start(t, slurmtest.Options{MinJobAge: 2 * time.Second})
	work := filepath.Join(t.TempDir(), "work")
	ctx := ctxFor(t)
	agent := writeAgent(t)
	first := newSite(t, c, slurm.Config{WorkDir: work})
	if _, err := first.Submit(ctx, glidein.Request{ID: "pond-crash", Binary: agent, Args: []string{"sleep", "1"}}); err != nil {
		t.Fatal(err)
	}
	// What Submit returned is lost; a new site (a new process) asks.
	again := newSite(t, c, slurm.Config{WorkDir: work})
	g, ok := find(t, again, "pond-crash")
	if !ok || g.SiteID == "" {
		t.Fatalf("List does not find the glidein submitted before the crash: %+v", g)
	}
	_, err := again.Submit(ctx, glidein.Request{ID: "pond-crash", Binary: agent})
	if !errors.Is(err, glidein.ErrDuplicate) {
		t.Fatalf("second Submit of the same id: %v, want ErrDuplicate", err)
	}
	waitState(t, again, "pond-crash", glidein.Done, 30*time.Second)
	// Gone from squeue, still found through sacct -c.
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(c.Run(t, "squeue", "-h", "-t", "all", "-o", "%j"), "pond-crash") {
		if time.Now().After(deadline) {
			t.Fatal("squeue still shows the job after MinJobAge")
		}
		time.Sleep(200 * time.Millisecond)
	}
	h, ok := find(t, again, "pond-crash")
	if !ok || h.State != glidein.Done || h.SiteID != g.SiteID || h.Ended.IsZero() {
		t.Fatalf("after squeue forgot it, List shows %+v (found %v), want Done as job %s", h, ok, g.SiteID)
	}
	// Nor is it submitted again now that squeue forgot it: its output is
	// in its directory until Cancel.
	if _, err := again.Submit(ctx, glidein.Request{ID: "pond-crash", Binary: agent}); !errors.Is(err, glidein.ErrDuplicate) {
		t.Fatalf("Submit of an ended glidein's id: %v, want ErrDuplicate", err)
	}
	// Other prefixes do not see it.
	gs, err := again.List(ctx, "pond-other")
	if err != nil || len(gs) != 0 {
		t.Fatalf("List(pond-other) = %v, %v", gs, err)
	}
}

// TestDuplicateSubmitsOnce: of several Submits of one ID, at the same time
// or one after the other, one starts a job, the others are ErrDuplicate.
func TestDuplicateSubmitsOnce(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	s := newSite(t, c, slurm.Config{})
	ctx := ctxFor(t)
	agent := writeAgent(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := s.Submit(ctx, glidein.Request{ID: "pond-dup", Binary: agent, Args: []string{"sleep", "300"}})
			errs <- err
		}()
	}
	ok := 0
	for range 4 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, glidein.ErrDuplicate):
			t.Errorf("Submit: %v, want nil or ErrDuplicate", err)
		}
	}
	if _, err := s.Submit(ctx, glidein.Request{ID: "pond-dup", Binary: agent}); !errors.Is(err, glidein.ErrDuplicate) {
		t.Errorf("Submit after the first: %v, want ErrDuplicate", err)
	}
	jobs := strings.Fields(c.Run(t, "squeue", "-h", "-t", "all", "-n", "pond-dup", "-o", "%i"))
	if ok != 1 || len(jobs) != 1 {
		t.Fatalf("%d Submits succeeded, squeue shows jobs %v; want one", ok, jobs)
	}
}

// TestRealPondctl runs the real pondctl as the glidein: `pondctl version`.
func TestRealPondctl(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	bin := filepath.Join(t.TempDir(), "pondctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/pond-htc/pond/cmd/pondctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := newSite(t, c, slurm.Config{})
	ctx := ctxFor(t)
	g, err := s.Submit(ctx, glidein.Request{ID: "pond-real", Binary: bin, Args: []string{"version"}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "pond-real", glidein.Done, 30*time.Second)
	out, err := os.ReadFile(filepath.Join(s.Config().WorkDir, "pond-real", "slurm-"+g.SiteID+".out"))
	if err != nil || !strings.Contains(string(out), "Pond v") {
		t.Fatalf("the glidein's output: %q, %v; want pondctl's version", out, err)
	}

	// A glidein that fails its validation exits with
	// glidein.ExitValidation: squeue says only FAILED, sacct -j gives the
	// exit code, and the glidein's status file why.
	_, err = s.Submit(ctx, glidein.Request{ID: "pond-invalid", Binary: bin,
		Args: []string{"agent", "-name", "invalid", "-glidein", "pond-invalid", "-pool", "campus", "-condor-host", "127.0.0.1:1",
			"-data-dir", "{dir}", "-validate", "{dir}/validate.json", "-insecure-api"},
		Files: map[string][]byte{"validate.json": []byte(`[{"type": "command", "name": "cvmfs", "command": ["/bin/false"]}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	f := waitState(t, s, "pond-invalid", glidein.Failed, 30*time.Second)
	if want := "FAILED exit code 3: validation failed: check cvmfs: exit status 1"; f.Reason != want {
		t.Errorf("the glidein that failed its validation: reason %q, want %q", f.Reason, want)
	}
	// Its status file gone (the site cleaned it up), the exit code still
	// names the failure.
	if err := os.Remove(filepath.Join(s.Config().WorkDir, "pond-invalid", glidein.StatusFile)); err != nil {
		t.Fatal(err)
	}
	if f, _ := find(t, s, "pond-invalid"); f.Reason != "FAILED exit code 3: validation failed" {
		t.Errorf("without its status file: reason %q", f.Reason)
	}
	// What the glidein ran may write its status file: the reason holds
	// no control character and is cut; a file too large tells nothing.
	status := filepath.Join(s.Config().WorkDir, "pond-invalid", glidein.StatusFile)
	for _, tt := range []struct{ message, want string }{
		{"validation failed: check disk: \x1b[31m1 MB\r\nfree\u202e", "FAILED exit code 3: validation failed: check disk: [31m1 MB free"},
		{strings.Repeat("x", 5000), "FAILED exit code 3: " + strings.Repeat("x", glidein.MaxMessage-len("…")) + "…"},
		{strings.Repeat("x", 70000), "FAILED exit code 3: validation failed"},
	} {
		data, _ := json.Marshal(map[string]string{"id": "pond-invalid", "reason": glidein.ReasonValidation, "message": tt.message})
		if err := os.WriteFile(status, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if f, _ := find(t, s, "pond-invalid"); f.Reason != tt.want {
			t.Errorf("status file with the message %.40q: reason %q, want %q", tt.message, f.Reason, tt.want)
		}
	}
}

// TestCheck: a good site passes; each fault is named.
func TestCheck(t *testing.T) {
	t.Parallel()
	// A cluster of its own: partitions, features and limits the shared
	// one does not have.
	c := slurmtest.Start(t, slurmtest.Options{Partitions: []string{"debug", "short"}, Features: []string{"fast"},
		Extra: []string{"PartitionName=tiny Nodes=ALL MaxTime=10 AllowAccounts=physics State=UP"}})
	ctx := ctxFor(t)
	missing := filepath.Join(t.TempDir(), "no-sbatch")
	tests := []struct {
		name    string
		cfg     slurm.Config
		wantErr string // "" for none
	}{
		{"default partition", slurm.Config{}, ""},
		{"named partitions", slurm.Config{Partition: "debug,short", Constraint: "fast", TimeLimit: time.Hour, Extra: []string{"--nice=10"}}, ""},
		{"unknown partition", slurm.Config{Partition: "nope"}, `partition "nope": the cluster has no such partition`},
		{"time limit beyond MaxTime", slurm.Config{Partition: "tiny", TimeLimit: time.Hour}, "time_limit 1h0m0s is beyond the partition \"tiny\" MaxTime 00:10:00"},
		{"account not allowed", slurm.Config{Partition: "tiny", Account: "chemistry"}, `account "chemistry": the partition "tiny" allows only physics`},
		{"account without accounting", slurm.Config{Account: "physics"}, "account is set, but the cluster keeps no accounts"},
		{"qos without accounting", slurm.Config{QOS: "high"}, "qos is set, but the cluster keeps no accounts"},
		{"unknown feature", slurm.Config{Constraint: "gpu"}, "sbatch would refuse such a glidein"},
		{"too much memory", slurm.Config{MemoryMB: 1 << 20}, "sbatch would refuse such a glidein"},
		{"sbatch missing", slurm.Config{Commands: slurm.Commands{Sbatch: missing}}, `sbatch command "` + missing + `": not found (set sbatch to its path)`},
		{"work_dir not writable", slurm.Config{WorkDir: "/proc/pond-work"}, "work_dir /proc/pond-work"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newSite(t, c, tt.cfg).Check(ctx)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Check: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// TestSbatchRefuses: Submit to a site whose job sbatch refuses returns
// sbatch's own words and leaves nothing behind.
func TestSbatchRefuses(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	ctx := ctxFor(t)
	s := newSite(t, c, slurm.Config{Partition: "nope"})
	_, err := s.Submit(ctx, glidein.Request{ID: "pond-refused", Binary: writeAgent(t), Files: map[string][]byte{"token": []byte("x")}})
	if err == nil || !strings.Contains(err.Error(), "sbatch refused it") || !strings.Contains(err.Error(), "invalid partition specified: nope") {
		t.Fatalf("Submit: %v, want sbatch's error", err)
	}
	if _, err := os.Stat(filepath.Join(s.Config().WorkDir, "pond-refused")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused glidein's directory is left: %v", err)
	}
	if gs, err := s.List(ctx, "pond-refused"); err != nil || len(gs) != 0 {
		t.Errorf("List after a refused Submit: %v, %v", gs, err)
	}
	// The bad requests never reach sbatch.
	for _, req := range []glidein.Request{
		{ID: "job-1", Binary: "/bin/sh"},
		{ID: "pond-" + strings.Repeat("x", 60), Binary: "/bin/sh"},
		{ID: "pond-a/b", Binary: "/bin/sh"},
		{ID: "pond-x", Binary: ""},
		{ID: "pond-x", Binary: "/no/such/binary"},
		{ID: "pond-x", Binary: "/bin/sh", Files: map[string][]byte{"../token": nil}},
		{ID: "pond-x", Binary: "/bin/sh", Files: map[string][]byte{slurm.ScriptName: nil}},
		{ID: "pond-x", Binary: "/bin/sh", Env: map[string]string{"A B": "x"}},
	} {
		if _, err := s.Submit(ctx, req); err == nil || strings.Contains(err.Error(), "sbatch") {
			t.Errorf("Submit(%+v): %v, want a refusal before sbatch", req, err)
		}
	}
}

func release(t *testing.T, dir, code string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "release"), []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Error(err)
		return
	}
	if got := st.Mode() & (os.ModeDir | os.ModePerm); got != want {
		t.Errorf("%s: mode %v, want %v", path, got, want)
	}
}

// BenchmarkSubmit is glideins submitted per second through the site:
// squeue (the duplicate check), the directory and files, sbatch.
func BenchmarkSubmit(b *testing.B) {
	// A cluster of its own, as docs/performance.md measured it: the
	// jobs it leaves queued fill no other test's nodes.
	c := slurmtest.Start(b, slurmtest.Options{})
	s, err := slurm.New(slurm.Config{WorkDir: filepath.Join(b.TempDir(), "work"), Env: c.Env()})
	if err != nil {
		b.Fatal(err)
	}
	agent := filepath.Join(b.TempDir(), "agent.sh")
	if err := os.WriteFile(agent, []byte(fakeAgent), 0o755); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("pond-bench-%d", i)
		if _, err := s.Submit(ctx, glidein.Request{ID: id, Binary: agent, Args: []string{"sleep", "600"},
			Files: map[string][]byte{"token": []byte("x")}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "glideins/s")
}

// BenchmarkSbatch is Slurm's own rate on the same machine: sbatch of the
// same kind of job, one after the other.
func BenchmarkSbatch(b *testing.B) {
	// A cluster of its own, as docs/performance.md measured it: the
	// jobs it leaves queued fill no other test's nodes.
	c := slurmtest.Start(b, slurmtest.Options{})
	dir := b.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 600\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		c.Run(b, "sbatch", "--parsable", fmt.Sprintf("--job-name=bench-%d", i), "--output=/dev/null", "--chdir="+dir, script)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// TestMissingCommands: a command that is not there is named, with the
// attribute that sets its path, by every method that runs it.
func TestMissingCommands(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	s, err := slurm.New(slurm.Config{WorkDir: t.TempDir(),
		Commands: slurm.Commands{Sbatch: missing, Squeue: missing, Sacct: missing, Scancel: missing, Scontrol: missing}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	_, listErr := s.List(ctx, glidein.IDPrefix)
	_, submitErr := s.Submit(ctx, glidein.Request{ID: "pond-x", Binary: "/bin/sh"})
	for _, tt := range []struct {
		method string
		err    error
		attr   string
	}{
		{"Check", s.Check(ctx), "sbatch"},
		{"List", listErr, "squeue"},
		{"Submit", submitErr, "squeue"},
		{"Cancel", s.Cancel(ctx, "pond-x"), "scancel"},
	} {
		want := tt.attr + ` command "` + missing + `": not found (set ` + tt.attr + " to its path)"
		if tt.err == nil || !strings.Contains(tt.err.Error(), want) {
			t.Errorf("%s: %v, want %q", tt.method, tt.err, want)
		}
	}
}

// TestOptionsReachSlurm: what the site is configured with is what Slurm
// shows of the job, and the environment of pondctl (here the site's
// commands' environment) does not reach the glidein.
func TestOptionsReachSlurm(t *testing.T) {
	t.Parallel()
	// A cluster of its own: partitions and features the shared one does
	// not have.
	c := slurmtest.Start(t, slurmtest.Options{Partitions: []string{"debug", "short"}, Features: []string{"fast"}})
	s := newSite(t, c, slurm.Config{Partition: "short", Constraint: "fast", Extra: []string{"--nice=7"},
		TimeLimit: 90 * time.Minute, CPUs: 1, MemoryMB: 150, Env: []string{"AWS_SECRET_ACCESS_KEY=not-for-the-glidein"}})
	ctx := ctxFor(t)
	g, err := s.Submit(ctx, glidein.Request{ID: "pond-opt", Binary: writeAgent(t), Args: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(c.Run(t, "squeue", "-h", "-j", g.SiteID, "-o", "%P|%f|%y|%l|%C|%m|%j|%k"))
	if want := "short|fast|7|1:30:00|1|150M|pond-opt|pond-opt"; got != want {
		t.Errorf("squeue shows %q, want %q", got, want)
	}
	waitState(t, s, "pond-opt", glidein.Running, 30*time.Second)
	env := filepath.Join(s.Config().WorkDir, "pond-opt", "env")
	waitFile(t, env)
	data, _ := os.ReadFile(env)
	if strings.Contains(string(data), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("the glidein got pondctl's environment:\n%s", data)
	}
	// Its own per-request figures win over the site's.
	g2, err := s.Submit(ctx, glidein.Request{ID: "pond-opt2", Binary: writeAgent(t), CPUs: 2, MemoryMB: 200, Lifetime: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got = strings.TrimSpace(c.Run(t, "squeue", "-h", "-j", g2.SiteID, "-o", "%l|%C|%m"))
	if want := "1:00|2|200M"; got != want {
		t.Errorf("squeue shows %q, want %q", got, want)
	}
}

// TestAccounts runs against a cluster with slurmdbd: Check finds the
// account and QOS or names the one missing, sbatch's refusal of an unknown
// account reaches Submit's error, and an ended glidein is listed from
// sacct once squeue forgot it.
func TestAccounts(t *testing.T) {
	t.Parallel()
	// A cluster of its own: accounts and QOS, enforced by slurmdbd.
	c := slurmtest.Start(t, slurmtest.Options{Accounting: true, Accounts: []string{"physics", "chemistry"}, QOS: []string{"high"},
		MinJobAge: 2 * time.Second})
	ctx := ctxFor(t)
	for _, tt := range []struct {
		name    string
		cfg     slurm.Config
		wantErr string
	}{
		{"account and qos", slurm.Config{Account: "chemistry", QOS: "high"}, ""},
		{"unknown account", slurm.Config{Account: "nope"}, `account "nope": no such account for user root`},
		{"unknown qos", slurm.Config{Account: "physics", QOS: "nope"}, `qos "nope": no such QOS`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := newSite(t, c, tt.cfg).Check(ctx)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Check: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
	agent := writeAgent(t)
	bad := newSite(t, c, slurm.Config{Account: "nope"})
	if _, err := bad.Submit(ctx, glidein.Request{ID: "pond-acct-bad", Binary: agent}); err == nil || !strings.Contains(err.Error(), "Invalid account") {
		t.Errorf("Submit with an unknown account: %v, want sbatch's Invalid account", err)
	}
	s := newSite(t, c, slurm.Config{Account: "chemistry", QOS: "high"})
	g, err := s.Submit(ctx, glidein.Request{ID: "pond-acct", Binary: agent, Args: []string{"sleep", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "pond-acct", glidein.Done, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(c.Run(t, "squeue", "-h", "-t", "all", "-o", "%j"), "pond-acct") {
		if time.Now().After(deadline) {
			t.Fatal("squeue still shows the job after MinJobAge")
		}
		time.Sleep(200 * time.Millisecond)
	}
	got, ok := find(t, s, "pond-acct")
	if !ok || got.State != glidein.Done || got.SiteID != g.SiteID || got.Host != c.Nodes[0] {
		t.Fatalf("after squeue forgot it, List shows %+v (found %v), want Done as job %s from sacct", got, ok, g.SiteID)
	}
}

// TestWriteFiles replaces files in the directory of a running glidein and
// of one still queued (a factory renewing their credentials), each
// through a rename, mode 0600; a glidein that ended, one the site does
// not know, and a name that is not a plain file name are refused.
func TestWriteFiles(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 1)
	s := newSite(t, c, slurm.Config{MemoryMB: 100})
	ctx := ctxFor(t)
	agent := writeAgent(t)
	for _, id := range []string{"pond-wr", "pond-wq"} {
		if _, err := s.Submit(ctx, glidein.Request{ID: id, Binary: agent, Args: []string{"wait"}, CPUs: 2,
			Files: map[string][]byte{"node.token": []byte("old")}}); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, s, "pond-wr", glidein.Running, 30*time.Second)
	waitState(t, s, "pond-wq", glidein.Queued, 10*time.Second)
	for _, id := range []string{"pond-wr", "pond-wq"} {
		if err := s.WriteFiles(ctx, id, map[string][]byte{"node.token": []byte("new " + id), "tls.crt": []byte("cert")}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		dir := filepath.Join(s.Config().WorkDir, id)
		if got, _ := os.ReadFile(filepath.Join(dir, "node.token")); string(got) != "new "+id {
			t.Errorf("%s: node.token = %q", id, got)
		}
		assertMode(t, filepath.Join(dir, "node.token"), 0o600)
		assertMode(t, filepath.Join(dir, "tls.crt"), 0o600)
		if left, _ := filepath.Glob(filepath.Join(dir, ".*.new")); len(left) != 0 {
			t.Errorf("%s: temporary files left: %v", id, left)
		}
	}
	for _, tc := range []struct {
		id    string
		files map[string][]byte
		want  string
	}{
		{"pond-nosuch", map[string][]byte{"node.token": nil}, "not queued or running"},
		{"pond-wr", map[string][]byte{"../node.token": nil}, "a plain name"},
		{"pond-wr", map[string][]byte{slurm.ScriptName: nil}, "a plain name"},
		{"job-1", map[string][]byte{"node.token": nil}, "job-1"},
	} {
		if err := s.WriteFiles(ctx, tc.id, tc.files); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WriteFiles(%s, %v): %v, want an error saying %q", tc.id, tc.files, err, tc.want)
		}
	}
	release(t, filepath.Join(s.Config().WorkDir, "pond-wr"), "0")
	waitState(t, s, "pond-wr", glidein.Done, 30*time.Second)
	if err := s.WriteFiles(ctx, "pond-wr", map[string][]byte{"node.token": nil}); err == nil || !strings.Contains(err.Error(), "not queued or running") {
		t.Errorf("WriteFiles of an ended glidein: %v", err)
	}
	for _, id := range []string{"pond-wr", "pond-wq"} {
		if err := s.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
