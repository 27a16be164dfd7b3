package startd

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/testenv"
)

// escapee is a job that starts a process which leaves its process group and
// session (setsid, and a double fork) and writes its pid, then a heartbeat,
// to files in dir; the job's main process then waits (wait) or exits.
func escapee(dir string, wait bool) jobshim.Spec {
	script := fmt.Sprintf(`( setsid sh -c 'echo $$ > %[1]s/pid; while :; do date +%%s%%N > %[1]s/beat; sleep 0.05; done' & ) ; sleep 0.2`, dir)
	if wait {
		script += "; sleep 600"
	}
	return jobshim.Spec{Path: "/bin/sh", Args: []string{"/bin/sh", "-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}}
}

func testIsolation(t *testing.T) isolation {
	t.Helper()
	s := &Startd{execute: t.TempDir(), log: slog.New(slog.DiscardHandler)}
	iso, err := s.jobIsolation(config.New(config.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	return iso
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// TestSupervisorKillsEscapedProcesses runs jobs whose processes escape
// their process group and session, and checks that none outlives the job:
// neither when the job's main process exits on its own, nor when the
// startd kills the job; with and without namespaces.
func TestSupervisorKillsEscapedProcesses(t *testing.T) {
	isos := map[string]isolation{"subreaper": {}}
	if iso := testIsolation(t); iso.pidNS {
		isos["namespaces"] = iso
	} else if testenv.CI() {
		t.Fatalf("no namespaces here: %s (CI is set: the namespaces case must run)", iso.why)
	} else {
		t.Logf("no namespaces here: %s", iso.why)
	}
	for name, iso := range isos {
		for _, killed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/killed=%v", name, killed), func(t *testing.T) {
				dir := t.TempDir()
				spec := escapee(dir, killed)
				var err error
				if spec.Mounts, err = scratchMounts(dir, iso.mounts); err != nil {
					t.Fatal(err)
				}
				null, _ := os.Open(os.DevNull)
				defer null.Close()
				p, err := startSupervisor(iso, spec, null, null, null)
				if err != nil {
					t.Fatal(err)
				}
				var pid int
				eventuallyTrue(t, 5*time.Second, func() bool {
					b, _ := os.ReadFile(filepath.Join(dir, "pid"))
					pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
					_, err := os.Stat(filepath.Join(dir, "beat"))
					return pid > 0 && err == nil
				})
				// With a PID namespace the pid written is the namespace's:
				// the heartbeat says whether the escapee lives.
				if killed {
					time.Sleep(300 * time.Millisecond)
					p.kill()
				}
				done := make(chan struct{})
				go func() { p.wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("the supervisor did not end")
				}
				switch {
				case killed && p.pidNS:
					// Killed with its supervisor, which says nothing.
				case p.final == nil:
					t.Fatalf("the supervisor said nothing of how the job ended: %v", p.waitErr)
				case !killed && (p.final.ExitCode != 0 || p.final.Signal != 0):
					t.Errorf("job ended with %+v, want exit 0", *p.final)
				}
				if !iso.pidNS && alive(pid) {
					t.Errorf("the escaped process %d outlives its job", pid)
				}
				assertNoHeartbeat(t, filepath.Join(dir, "beat"))
			})
		}
	}
}

func assertNoHeartbeat(t *testing.T, path string) {
	t.Helper()
	before, _ := os.ReadFile(path)
	time.Sleep(500 * time.Millisecond)
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Errorf("the heartbeat goes on after the job ended: %q then %q", before, after)
	}
}

// TestPrivateTmp runs two jobs under supervisors with private temporary
// directories: what the first writes in /tmp and /dev/shm the second does
// not see, and nothing reaches the host's.
func TestPrivateTmp(t *testing.T) {
	iso := testIsolation(t)
	if len(iso.mounts) == 0 {
		testenv.SkipOrFailf(t, "no private /tmp here: %s", iso.why)
	}
	name := fmt.Sprintf("pond-private-%d", time.Now().UnixNano())
	run := func(script string) string {
		t.Helper()
		dir := t.TempDir()
		spec := jobshim.Spec{Path: "/bin/sh", Args: []string{"/bin/sh", "-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}}
		var err error
		if spec.Mounts, err = scratchMounts(dir, iso.mounts); err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dir, "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		p, err := startSupervisor(iso, spec, out, out, out)
		if err != nil {
			t.Fatal(err)
		}
		p.wait()
		if p.final == nil || p.final.ExitCode != 0 {
			t.Fatalf("job %q ended with %+v (%v): %s", script, p.final, p.waitErr, readAll(filepath.Join(dir, "out")))
		}
		b := readAll(filepath.Join(dir, "out"))
		removeScratch(dir)
		if _, err := os.Stat(nsDir(dir)); err == nil {
			t.Errorf("%s left after the job", nsDir(dir))
		}
		return b
	}
	run(fmt.Sprintf("umask 077; echo secret > /tmp/%[1]s; echo secret > /dev/shm/%[1]s; cat /tmp/%[1]s /dev/shm/%[1]s", name))
	if got := run(fmt.Sprintf("cat /tmp/%[1]s /dev/shm/%[1]s 2>&1; ls /tmp /dev/shm", name)); strings.Contains(got, "secret") || strings.Contains(got, name+"\n") {
		t.Errorf("a later job saw the first one's files: %q", got)
	}
	for _, d := range []string{"/tmp", "/dev/shm"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			os.Remove(filepath.Join(d, name))
			t.Errorf("the job's file reached the host's %s", d)
		}
	}
}

func readAll(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func eventuallyTrue(t *testing.T, d time.Duration, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !f(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("timed out")
		}
	}
}

// TestMountUnderScratch reads the knob.
func TestMountUnderScratch(t *testing.T) {
	for _, tt := range []struct {
		value string
		set   bool
		want  string // joined, or the error
	}{
		{"", false, "/tmp"}, // the default holds /tmp
		{"", true, ""},
		{"/tmp, /nonexistent-dir", true, "/tmp"},
		{"tmp", true, `MOUNT_UNDER_SCRATCH: "tmp" is not an absolute path below /`},
		{"/", true, `MOUNT_UNDER_SCRATCH: "/" is not an absolute path below /`},
	} {
		cfg := config.New(config.Options{})
		if tt.set {
			if err := cfg.Set("MOUNT_UNDER_SCRATCH", tt.value); err != nil {
				t.Fatal(err)
			}
		}
		got, err := mountUnderScratch(cfg)
		s := strings.Join(got, ",")
		if err != nil {
			s = err.Error()
		}
		if tt.set && s != tt.want || !tt.set && !strings.HasPrefix(s, tt.want) {
			t.Errorf("MOUNT_UNDER_SCRATCH=%q (set %v): %q, want %q", tt.value, tt.set, s, tt.want)
		}
	}
}

// TestRestartRemovesScratch starts a startd over the scratch directories a
// dead one left: they go, and nothing else does.
func TestRestartRemovesScratch(t *testing.T) {
	data := t.TempDir()
	s, err := New(Options{Config: config.New(config.Options{}), Name: "node1", Address: "127.0.0.1:1", DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	if s.ownExecute {
		t.Cleanup(func() { os.RemoveAll(s.execute) })
	}
	left := filepath.Join(s.execute, "dir_slot1_1_0")
	other := filepath.Join(s.execute, "keep")
	mustNil(t, os.MkdirAll(filepath.Join(left, "sub"), 0o700), os.MkdirAll(left+".tmp/tmp", 0o700), os.WriteFile(other, nil, 0o600))
	if _, err := New(Options{Config: config.New(config.Options{}), Name: "node1", Address: "127.0.0.1:1", DataDir: data}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{left, left + ".tmp"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is left after a restart", p)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the restart removed what is not a scratch directory: %v", err)
	}
}

// TestRemoveExecute removes the scratch directories of an execute directory
// outside the data directory it is recorded in, and the execute directory
// once empty.
func TestRemoveExecute(t *testing.T) {
	data, outside := t.TempDir(), t.TempDir()
	for _, keep := range []bool{true, false} {
		exec := filepath.Join(outside, fmt.Sprint(keep))
		mustNil(t, os.MkdirAll(filepath.Join(exec, "dir_slot1_1_0", "sub"), 0o700), os.MkdirAll(filepath.Join(exec, "dir_slot1_1_0.tmp"), 0o700))
		if keep {
			mustNil(t, os.WriteFile(filepath.Join(exec, "keep"), nil, 0o600))
		}
		sub := filepath.Join(data, fmt.Sprint(keep), "condor")
		mustNil(t, os.MkdirAll(sub, 0o700), os.WriteFile(filepath.Join(sub, ExecuteRecord), []byte(exec+"\n"), 0o600))
	}
	if err := RemoveExecute(data); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(outside, "true"))
	if len(ents) != 1 || ents[0].Name() != "keep" {
		t.Errorf("left %v, want only keep", ents)
	}
	if _, err := os.Stat(filepath.Join(outside, "false")); err == nil {
		t.Error("the emptied execute directory is left")
	}
	mustNil(t, os.WriteFile(filepath.Join(data, ExecuteRecord), []byte("relative\n"), 0o600))
	if err := RemoveExecute(data); err == nil || !strings.Contains(err.Error(), "is not an execute directory") {
		t.Errorf("a record of a relative path: %v", err)
	}
}

// TestRecordExecuteMakesTheDataDirectory: a startd whose execute directory
// lies outside a data directory that does not exist yet (an agent's first
// start as root, its data directory private) records it there all the same.
func TestRecordExecuteMakesTheDataDirectory(t *testing.T) {
	data := filepath.Join(t.TempDir(), "node", "condor")
	s := &Startd{execute: t.TempDir(), opts: Options{DataDir: data}}
	if err := s.recordExecute(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(data, ExecuteRecord))
	if err != nil || string(got) != s.execute+"\n" {
		t.Fatalf("the record holds %q (%v), want %q", got, err, s.execute+"\n")
	}
}

func mustNil(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestJobSupervisorKnob reads POND_JOB_SUPERVISOR, and a startd refuses a
// bad value at start, naming the knob.
func TestJobSupervisorKnob(t *testing.T) {
	for _, tt := range []struct {
		value string
		set   bool
		want  string // the mode, or the error
	}{
		{"", false, "resident"},
		{"", true, "resident"},
		{"resident", true, "resident"},
		{" Per-Job ", true, "per-job"},
		{"per-job", true, "per-job"},
		{"perjob", true, `POND_JOB_SUPERVISOR: "perjob" is not resident or per-job`},
		{"shared", true, `POND_JOB_SUPERVISOR: "shared" is not resident or per-job`},
	} {
		cfg := config.New(config.Options{})
		if tt.set {
			if err := cfg.Set(KnobJobSupervisor, tt.value); err != nil {
				t.Fatal(err)
			}
		}
		got, err := jobSupervisor(cfg)
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s=%q (set %v): %q, want %q", KnobJobSupervisor, tt.value, tt.set, got, tt.want)
		}
	}
	cfg := mustConfig(t, map[string]string{KnobJobSupervisor: "perjob"})
	_, err := New(Options{Config: cfg, Name: "node1", Address: "127.0.0.1:1", DataDir: t.TempDir(), SharedExecute: sharedExecute(t)})
	if err == nil || !strings.Contains(err.Error(), KnobJobSupervisor) {
		t.Errorf("a startd with %s=perjob: %v, want it refused naming the knob", KnobJobSupervisor, err)
	}
}

// TestJobSupervisorAdvertised starts startds with each value of
// POND_JOB_SUPERVISOR: the machine ad says which supervisor their jobs
// run under, per-job whenever it is forced.
func TestJobSupervisorAdvertised(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{"", SupervisorResident},
		{SupervisorResident, SupervisorResident},
		{SupervisorPerJob, SupervisorPerJob},
	} {
		t.Run("mode="+tt.value, func(t *testing.T) {
			knobs := map[string]string{}
			if tt.value != "" {
				knobs[KnobJobSupervisor] = tt.value
			}
			s := newStartd(t, knobs)
			want := tt.want
			if !s.iso.pidNS || s.iso.userNS {
				// Without namespaces, or not as root, each job starts
				// its own.
				want = SupervisorPerJob
			}
			got, _ := s.machine.EvalAttr(SupervisorAttr).StringValue()
			if got != want || s.iso.resident != (want == SupervisorResident) {
				t.Errorf("%s = %q (resident %v), want %q", SupervisorAttr, got, s.iso.resident, want)
			}
		})
	}
}

// TestPerJobSupervisorThreads counts the threads of the supervisor of one
// job in a PID namespace of its own, each a process id of the host, while
// its job (which forks) runs: no more than a resident supervisor's.
func TestPerJobSupervisorThreads(t *testing.T) {
	iso := testIsolation(t)
	if !iso.pidNS {
		testenv.SkipOrFailf(t, "no PID namespace here: %s", iso.why)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for i := range 3 {
		dir := t.TempDir()
		spec := jobshim.Spec{Path: "/bin/sh", Args: []string{"/bin/sh", "-c", "sleep 0.5 & sleep 0.5"}, Dir: dir}
		if spec.Mounts, err = scratchMounts(dir, iso.mounts); err != nil {
			t.Fatal(err)
		}
		p, err := startSupervisor(iso, spec, null, null, null)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.pid()))
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) > jobshim.ResidentThreads {
			t.Errorf("job %d: its supervisor has %d threads, want at most %d", i, len(tasks), jobshim.ResidentThreads)
		}
		p.wait()
		if p.final == nil || p.final.ExitCode != 0 {
			t.Fatalf("job %d ended with %+v (%v)", i, p.final, p.waitErr)
		}
		removeScratch(dir)
	}
}
