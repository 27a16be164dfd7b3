package startd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/startd/cgroup"
	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/testenv"
)

// residentIsolation is the isolation of the machine, which must allow a
// resident supervisor.
func residentIsolation(t *testing.T) isolation {
	t.Helper()
	iso := testIsolation(t)
	if !iso.resident {
		testenv.SkipOrFailf(t, "no resident supervisor here (needs root and a PID namespace): %s", iso.why)
	}
	return iso
}

// residentJob runs script on res as a job of its own in a new scratch
// directory with iso's private directories, its output in the returned
// file; before, when given, runs once the job has started.
func residentJob(t *testing.T, iso isolation, res *resident, script string, before func(p *supervisor, dir string)) (*supervisor, bool, string) {
	t.Helper()
	return residentJobSpec(t, iso, res, script, nil, before)
}

// residentJobSpec is residentJob, the job's spec changed by with (nil:
// as it is).
func residentJobSpec(t *testing.T, iso isolation, res *resident, script string, with func(*jobshim.Spec), before func(p *supervisor, dir string)) (*supervisor, bool, string) {
	t.Helper()
	dir := t.TempDir()
	spec := jobshim.Spec{Path: "/bin/sh", Args: []string{"/bin/sh", "-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "D=" + dir}}
	if with != nil {
		with(&spec)
	}
	var err error
	if spec.Mounts, err = scratchMounts(dir, iso.mounts); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	reusable := make(chan bool, 1)
	p, err := res.run(spec, null, out, out, func(ok bool) { reusable <- ok })
	out.Close()
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(p, dir)
	}
	select {
	case <-p.waited:
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not end")
	}
	ok := <-reusable
	b := readAll(filepath.Join(dir, "out"))
	t.Cleanup(func() { removeScratch(dir) })
	return p, ok, b
}

// waitFile waits until path exists and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	var b []byte
	eventuallyTrue(t, 10*time.Second, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && len(b) > 0
	})
	return strings.TrimSpace(string(b))
}

// TestResidentSupervisorContainsEachJob runs jobs one after the other on
// one resident supervisor, as a reused claim does, and checks that each
// job is as contained as under a supervisor of its own: what a job leaves
// running (a detached sleeper: setsid and a double fork) is gone when its
// end is reported, before the next job starts; the next job's private
// /tmp, /var/tmp and /dev/shm are empty of what the last one wrote there;
// a soft-kill signal reaches the job's processes; the job's CPU time and
// memory are its own; killing the supervisor ends its job and the claim
// then needs another supervisor.
func TestResidentSupervisorContainsEachJob(t *testing.T) {
	iso := residentIsolation(t)
	res, err := startResident(slog.New(slog.DiscardHandler), "claim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.kill(); <-res.exited })
	name := fmt.Sprintf("pond-resident-%d", time.Now().UnixNano())
	steps := []struct {
		name   string
		script string
		during func(t *testing.T, p *supervisor, dir string)
		check  func(t *testing.T, p *supervisor, reusable bool, out string)
	}{{
		name: "detached sleeper and private files",
		script: fmt.Sprintf(`( setsid sh -c 'sleep 600' & ) ; ( setsid sh -c 'while :; do sleep 0.05; done' & ) ; sleep 0.2;
			for d in /tmp /var/tmp /dev/shm; do echo secret > $d/%s; done
			i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`, name),
		check: func(t *testing.T, p *supervisor, reusable bool, out string) {
			if p.final == nil || p.final.ExitCode != 0 || !reusable {
				t.Fatalf("job ended with %+v (%v), reusable %v: %s", p.final, p.waitErr, reusable, out)
			}
			// Reported only once every process of the job is gone.
			if left := jobshim.Descendants(res.cmd.Process.Pid); len(left) > 0 {
				t.Errorf("processes of the job outlive its end: %v", left)
			}
			if p.final.UserCPU+p.final.SysCPU < 0.05 || p.final.MaxRSSKB <= 0 {
				t.Errorf("the job's use: %+v", *p.final)
			}
		},
	}, {
		name:   "the next job sees none of it",
		script: fmt.Sprintf(`cat /tmp/%[1]s /var/tmp/%[1]s /dev/shm/%[1]s 2>&1; ls -A /tmp /var/tmp /dev/shm; ps -e -o pid=,args= 2>/dev/null || ls /proc`, name),
		check: func(t *testing.T, p *supervisor, reusable bool, out string) {
			if p.final == nil || !reusable {
				t.Fatalf("job ended with %+v (%v): %s", p.final, p.waitErr, out)
			}
			if strings.Contains(out, "secret") || strings.Contains(out, name+"\n") {
				t.Errorf("a later job saw the first one's files: %q", out)
			}
			if strings.Contains(out, "sleep 600") || strings.Contains(out, "while") {
				t.Errorf("a later job saw the first one's processes: %q", out)
			}
			// The first job's CPU is not this one's.
			if cpu := p.final.UserCPU + p.final.SysCPU; cpu > 0.05 {
				t.Errorf("the second job's CPU time %.3f s includes the first's", cpu)
			}
		},
	}, {
		name:   "soft-kill signal",
		script: `trap 'echo got TERM > $D/term; exit 3' TERM; echo up > $D/up; while :; do sleep 0.05; done`,
		during: func(t *testing.T, p *supervisor, dir string) {
			waitFile(t, filepath.Join(dir, "up"))
			kids := childrenOf(p.pid())
			if len(kids) == 0 {
				t.Fatal("the job's main process is not a child of the supervisor")
			}
			for _, pid := range kids {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		},
		check: func(t *testing.T, p *supervisor, reusable bool, out string) {
			if p.final == nil || p.final.ExitCode != 3 || !reusable {
				t.Fatalf("job ended with %+v (%v), want exit 3 from its TERM trap: %s", p.final, p.waitErr, out)
			}
		},
	}, {
		name:   "supervisor killed",
		script: `( setsid sh -c 'while :; do date +%s%N > $D/beat; sleep 0.05; done' & ) ; echo $$ > $D/up; sleep 600`,
		during: func(t *testing.T, p *supervisor, dir string) {
			waitFile(t, filepath.Join(dir, "beat"))
			_ = syscall.Kill(p.pid(), syscall.SIGKILL)
		},
		check: func(t *testing.T, p *supervisor, reusable bool, out string) {
			if p.final != nil || reusable || p.waitErr == nil {
				t.Fatalf("a killed supervisor's job ended with %+v (%v), reusable %v", p.final, p.waitErr, reusable)
			}
		},
	}}
	// The supervisor's mounts by their ids. Its namespace began as a copy
	// of the host's: a mount the host removes meanwhile (another test's)
	// may go from it too, but none can come to it but its own.
	mounts := func() map[string]bool {
		ids := map[string]bool{}
		for _, line := range strings.Split(readAll(fmt.Sprintf("/proc/%d/mountinfo", res.cmd.Process.Pid)), "\n") {
			if id, _, ok := strings.Cut(line, " "); ok {
				ids[id] = true
			}
		}
		return ids
	}
	var before map[string]bool // once the supervisor has mounted its own
	for _, st := range steps {
		var dir string
		p, reusable, out := residentJob(t, iso, res, st.script, func(p *supervisor, d string) {
			dir = d
			if before == nil {
				before = mounts()
			}
			if st.during != nil {
				st.during(t, p, dir)
			}
		})
		t.Run(st.name, func(t *testing.T) { st.check(t, p, reusable, out) })
		if st.name == "supervisor killed" {
			assertNoHeartbeat(t, filepath.Join(dir, "beat"))
			continue
		}
		// A job's mounts go with it (they are its own namespace's).
		eventuallyTrue(t, 5*time.Second, func() bool {
			for id := range mounts() {
				if !before[id] {
					return false
				}
			}
			return true
		})
	}
}

// TestResidentSupervisorStartsJobsInTheirCgroups runs jobs of a claim on
// one resident supervisor, each in the slot's cgroups (kept from one job to
// the next, as the startd keeps them), and checks that each job's process
// is in the job's cgroup of every hierarchy (v1 and v2) while none of the
// supervisor's threads is in any of them: the job is started in its
// cgroups without the supervisor moving there.
func TestResidentSupervisorStartsJobsInTheirCgroups(t *testing.T) {
	iso := residentIsolation(t)
	if os.Geteuid() != 0 {
		testenv.SkipOrFailf(t, "cgroups need root")
	}
	cg, err := cgroup.Open(fmt.Sprintf("pond-test/resident-%d", os.Getpid()))
	if err != nil {
		testenv.SkipOrFailf(t, "no cgroups here: %v", err)
	}
	t.Cleanup(cg.Close)
	res, err := startResident(slog.New(slog.DiscardHandler), "claim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.kill(); <-res.exited })
	// members lists the processes (cgroup.procs) and the threads (tasks in
	// v1, cgroup.threads in v2) of the cgroup of procs.
	members := func(procs string) (pids, tids []string) {
		pids = strings.Fields(readAll(procs))
		threads := filepath.Join(filepath.Dir(procs), "tasks")
		if _, err := os.Stat(threads); err != nil {
			threads = filepath.Join(filepath.Dir(procs), "cgroup.threads")
		}
		return pids, strings.Fields(readAll(threads))
	}
	for job := range 3 {
		g, err := cg.Acquire("slot1", cgroup.Limits{MemoryBytes: 1 << 30, MaxPids: 4096})
		if err != nil {
			t.Fatal(err)
		}
		with := func(s *jobshim.Spec) { s.Cgroup, s.CgroupHome, s.CgroupSerial = g.Procs(), cg.Home(), g.Serial() }
		_, reusable, out := residentJobSpec(t, iso, res, `echo up > $D/up; sleep 0.3`, with, func(p *supervisor, dir string) {
			waitFile(t, filepath.Join(dir, "up"))
			kids := childrenOf(p.pid())
			if len(kids) != 1 {
				t.Fatalf("job %d: the supervisor's children %v, want the job's process", job, kids)
			}
			ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.pid()))
			if err != nil {
				t.Fatal(err)
			}
			for _, procs := range g.Procs() {
				pids, tids := members(procs)
				if !slices.Contains(pids, fmt.Sprint(kids[0])) {
					t.Errorf("job %d: its process %d is not in its cgroup %s (%v)", job, kids[0], filepath.Dir(procs), pids)
				}
				for _, e := range ents {
					if slices.Contains(tids, e.Name()) {
						t.Errorf("job %d: the supervisor's thread %s is in the job's cgroup %s", job, e.Name(), filepath.Dir(procs))
					}
				}
			}
		})
		if !reusable {
			t.Fatalf("job %d: the supervisor cannot run the claim's next job: %s", job, out)
		}
		if err := g.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResidentSupervisorStaysForItsClaim runs jobs of a claim as the
// starter does: they share one supervisor while the claim lives, which a
// job's kill that comes after its end leaves alone; a killed
// supervisor is replaced for the claim's next job; the claim's release
// ends its supervisor, and the slot's next claim gets another; so does the
// startd's shutdown.
func TestResidentSupervisorStaysForItsClaim(t *testing.T) {
	iso := residentIsolation(t)
	s := &Startd{execute: t.TempDir(), iso: iso, log: slog.New(slog.DiscardHandler), claims: map[string]*slot{}, residents: map[string]*resident{}}
	s.stop, s.cancel = context.WithCancel(context.Background())
	sl := &slot{name: "slot1", state: "Claimed", claimID: "first"}
	s.claims["first"] = sl
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	job := func(claim string) *supervisor {
		t.Helper()
		dir, err := os.MkdirTemp(s.execute, "dir_")
		if err != nil {
			t.Fatal(err)
		}
		spec := jobshim.Spec{Path: "/bin/true", Args: []string{"/bin/true"}, Dir: dir}
		if spec.Mounts, err = scratchMounts(dir, iso.mounts); err != nil {
			t.Fatal(err)
		}
		p, err := s.startOnResident("slot1", claim, spec, [3]*os.File{null, null, null})
		if err != nil {
			t.Fatal(err)
		}
		p.wait()
		if p.final == nil || p.final.ExitCode != 0 {
			t.Fatalf("job ended with %+v (%v)", p.final, p.waitErr)
		}
		removeScratch(dir)
		// Kept for the claim once its job has ended.
		eventuallyTrue(t, 5*time.Second, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.residents[claim] == p.res
		})
		return p
	}
	a := job("first")
	// A kill that comes once the job has ended (a vacate racing with its
	// end) is not the claim's next job's.
	a.kill()
	b := job("first")
	if a.res != b.res {
		t.Errorf("the claim's second job started another supervisor (%d, then %d)", a.pid(), b.pid())
	}
	b.res.kill()
	<-b.res.exited
	c := job("first")
	if c.res == b.res || !c.res.alive() {
		t.Errorf("the claim's job after its supervisor was killed ran on the dead one")
	}
	s.mu.Lock()
	s.releaseLocked(sl)
	s.mu.Unlock()
	select {
	case <-c.res.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the released claim's supervisor did not exit")
	}
	s.mu.Lock()
	sl.state, sl.claimID = "Claimed", "second"
	s.claims["second"] = sl
	s.mu.Unlock()
	d := job("second")
	if d.res == c.res {
		t.Error("the slot's next claim ran on the last claim's supervisor")
	}
	s.shutdown()
	select {
	case <-d.res.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the supervisor did not exit with the startd")
	}
}

// lockedBuffer is a log the startd's goroutines write to at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestResidentSupervisorDeathIsLogged makes a claim's supervisor print its
// goroutines' stacks and exit (SIGQUIT, as the Go runtime does) while its
// job runs: the startd logs that it died, with the slot, the claim and the
// end of what it wrote to its standard error. A supervisor the startd
// kills (the job's kill) or tells to exit (the claim's end) logs nothing.
func TestResidentSupervisorDeathIsLogged(t *testing.T) {
	iso := residentIsolation(t)
	var log lockedBuffer
	s := &Startd{execute: t.TempDir(), iso: iso, log: slog.New(slog.NewTextHandler(&log, nil)), claims: map[string]*slot{}, residents: map[string]*resident{}}
	s.stop, s.cancel = context.WithCancel(context.Background())
	sl := &slot{name: "slot1", state: "Claimed", claimID: "first"}
	s.claims["first"] = sl
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	start := func(path string, args ...string) *supervisor {
		t.Helper()
		dir, err := os.MkdirTemp(s.execute, "dir_")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeScratch(dir) })
		spec := jobshim.Spec{Path: path, Args: append([]string{path}, args...), Dir: dir}
		if spec.Mounts, err = scratchMounts(dir, iso.mounts); err != nil {
			t.Fatal(err)
		}
		p, err := s.startOnResident("slot1", "first", spec, [3]*os.File{null, null, null})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	const died = `msg="the claim's job supervisor died"`

	p := start("/bin/sleep", "60")
	if err := syscall.Kill(p.pid(), syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	p.wait()
	<-p.res.exited
	if p.final != nil {
		t.Fatalf("the job's end was reported after its supervisor died: %+v", p.final)
	}
	got := log.String()
	line := ""
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, died) {
			line = l
		}
	}
	for _, want := range []string{"slot=slot1", "claim=" + claimRef("first"), "stderr=", "goroutine ", "jobshim."} {
		if !strings.Contains(line, want) {
			t.Errorf("the log of the supervisor's death lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(line, "claim=first") {
		t.Errorf("the log gives the claim's ID away: %s", line)
	}
	if n := len(p.res.stderr.String()); n > stderrTail+len("...") {
		t.Errorf("kept %d bytes of the supervisor's standard error, want %d at most", n, stderrTail)
	}

	// Killed by the startd with its job, then closed with the claim.
	q := start("/bin/sleep", "60")
	q.kill()
	q.wait()
	<-q.res.exited
	r := start("/bin/true")
	r.wait()
	if r.final == nil || r.final.ExitCode != 0 {
		t.Fatalf("job ended with %+v (%v)", r.final, r.waitErr)
	}
	eventuallyTrue(t, 5*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.residents["first"] == r.res
	})
	s.mu.Lock()
	s.releaseLocked(sl)
	s.mu.Unlock()
	select {
	case <-r.res.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the released claim's supervisor did not exit")
	}
	s.shutdown()
	if n := strings.Count(log.String(), died); n != 1 {
		t.Errorf("the log says %d times that a supervisor died, want once:\n%s", n, log.String())
	}
}

// TestTail keeps the last stderrTail bytes of what is written.
func TestTail(t *testing.T) {
	big := strings.Repeat("a", stderrTail-1) + "z"
	for _, tt := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"short", []string{"panic: ", "boom\n"}, "panic: boom\n"},
		{"exactly full", []string{big}, big},
		{"one write too long", []string{"x" + big}, "..." + big},
		{"overflowing writes", []string{"head", big[:10], big[10:]}, "..." + big},
		{"many small writes", append(slices.Repeat([]string{"b"}, 2*stderrTail), "end"), "..." + strings.Repeat("b", stderrTail-3) + "end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var tl tail
			for _, w := range tt.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", len(w), n, err)
				}
			}
			if got := tl.String(); got != tt.want {
				t.Errorf("kept %d bytes %.20q..., want %d bytes %.20q...", len(got), got, len(tt.want), tt.want)
			}
		})
	}
}

// residentThreads lists the mount namespace of each thread of the process
// pid.
func residentThreads(t *testing.T, pid int) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, task := range tasks {
		if l, err := os.Readlink(filepath.Join(dir, task.Name(), "ns", "mnt")); err == nil {
			ns = append(ns, l)
		}
	}
	return ns
}

// TestResidentSupervisorThreads counts the threads of a resident
// supervisor, each a process id of the host, idle, while a job that forks
// and leaves processes behind runs, and after jobs one after the other:
// never more than jobshim.ResidentThreads, and every one of them back in
// the supervisor's own mount namespace once a job (started in one of its
// own) has started.
func TestResidentSupervisorThreads(t *testing.T) {
	iso := residentIsolation(t)
	res, err := startResident(slog.New(slog.DiscardHandler), "claim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.kill(); <-res.exited })
	pid := res.cmd.Process.Pid
	most := 0
	var home string
	look := func(when string) {
		t.Helper()
		ns := residentThreads(t, pid)
		most = max(most, len(ns))
		if len(ns) > jobshim.ResidentThreads {
			t.Errorf("%s: the supervisor has %d threads, want at most %d", when, len(ns), jobshim.ResidentThreads)
		}
		for _, n := range ns {
			if home == "" {
				home = n
			}
			if n != home {
				t.Errorf("%s: a thread of the supervisor is in mount namespace %s, not its own %s", when, n, home)
			}
		}
	}
	// The runtime starts its threads as the supervisor starts.
	time.Sleep(200 * time.Millisecond)
	look("idle")
	for i := range 5 {
		script := `for n in 1 2 3 4 5 6 7 8; do sleep 600 & done; ( setsid sleep 600 & ); echo up > $D/up; sleep 0.3`
		p, ok, out := residentJob(t, iso, res, script, func(p *supervisor, dir string) {
			waitFile(t, filepath.Join(dir, "up"))
			job, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", childrenOf(p.pid())[0]))
			if err != nil {
				t.Fatal(err)
			}
			if job == home {
				t.Errorf("job %d runs in the supervisor's mount namespace, not one of its own", i)
			}
			for range 10 {
				look(fmt.Sprintf("job %d running", i))
				time.Sleep(20 * time.Millisecond)
			}
		})
		if p.final == nil || p.final.ExitCode != 0 || !ok {
			t.Fatalf("job %d ended with %+v (%v): %s", i, p.final, p.waitErr, out)
		}
		look(fmt.Sprintf("after job %d", i))
	}
	t.Logf("the supervisor had at most %d threads", most)
}
