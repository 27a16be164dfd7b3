package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// open opens a manager of the test's own, removed when the test ends.
func open(t *testing.T) *Manager {
	t.Helper()
	testenv.NeedRoot(t, "creating cgroups")
	name := fmt.Sprintf("pond-test/%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
	m, err := Open(name)
	if err != nil {
		testenv.SkipOrFailf(t, "no writable cgroup hierarchy with a memory controller: %v", err)
	}
	t.Cleanup(func() {
		if _, err := m.Sweep(); err != nil {
			t.Error(err)
		}
		m.Close()
	})
	return m
}

// output is a job's output file: what a process left behind still holding
// it does not keep its parent's Wait waiting.
type output struct{ f *os.File }

func (o output) String() string {
	b, _ := os.ReadFile(o.f.Name())
	return string(b)
}

// runIn starts sh -c script in g, before it runs anything, and returns it.
func runIn(t *testing.T, g *Group, script string) (*exec.Cmd, output) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read go; "+script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	out := output{f}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	if _, err := in.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

func TestMemoryLimitKillsTheJobAndCountsIt(t *testing.T) {
	t.Parallel()
	m := open(t)
	g, err := m.Create("mem", Limits{MemoryBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	if g.MemoryLimit() != 32<<20 {
		t.Fatalf("MemoryLimit = %d", g.MemoryLimit())
	}
	cmd, out := runIn(t, g, "head -c 200M /dev/zero | tail")
	err = cmd.Wait()
	if err == nil {
		t.Fatalf("a job of 200 MiB ran to its end under a limit of 32 MiB: %s", out)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills < 1 {
		t.Fatalf("OOMKills = %d, want at least 1 (stats %+v)", st.OOMKills, st)
	}
	if st.PeakMemoryBytes != 0 && (st.PeakMemoryBytes > 32<<20 || st.PeakMemoryBytes < 16<<20) {
		t.Fatalf("peak memory %d, want near the limit of %d", st.PeakMemoryBytes, 32<<20)
	}
}

func TestSoftLimitDoesNotKill(t *testing.T) {
	t.Parallel()
	m := open(t)
	g, err := m.Create("soft", Limits{MemoryBytes: 16 << 20, SoftMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	if g.MemoryLimit() != 0 {
		t.Fatalf("a soft limit is a hard one of %d", g.MemoryLimit())
	}
	cmd, out := runIn(t, g, "head -c 40M /dev/zero | tail | wc -c")
	if err := cmd.Wait(); err != nil || strings.TrimSpace(out.String()) != strconv.Itoa(40<<20) {
		t.Fatalf("job under a soft limit: %v: %s", err, out)
	}
}

func TestPidsLimitStopsAForkBomb(t *testing.T) {
	t.Parallel()
	m := open(t)
	g, err := m.Create("bomb", Limits{MaxPids: 20})
	if err != nil {
		t.Fatal(err)
	}
	cmd, out := runIn(t, g, "i=0; while [ $i -lt 500 ]; do sleep 60 & i=$((i+1)); done; wait")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the fork bomb forked 500 processes: %s", out)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the fork bomb did not stop")
	}
	st, _ := g.Stats()
	if st.Pids > 20 {
		t.Fatalf("%d processes in a cgroup bounded to 20", st.Pids)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.all[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the cgroup is still there: %v", err)
	}
}

func TestKillCatchesEscapedProcesses(t *testing.T) {
	t.Parallel()
	m := open(t)
	g, err := m.Create("escape", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// A process in a session of its own, orphaned to init.
	cmd, out := runIn(t, g, "setsid sh -c 'sleep 1000 & echo $!' </dev/null & wait")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("escaped pid: %q", out)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the escaped process is already gone")
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d escaped the job's session and survived its end", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive says that pid runs (a zombie, reaped by init later, does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && !bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z"))
}

func TestStatsAndCPUWeight(t *testing.T) {
	t.Parallel()
	m := open(t)
	g, err := m.Create("stats", Limits{CPUs: 2, MaxPids: 100, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	if m.v2 {
		if b, _ := os.ReadFile(filepath.Join(g.dirs[""], "cpu.weight")); len(b) > 0 && strings.TrimSpace(string(b)) != "200" {
			t.Fatalf("cpu.weight = %s", b)
		}
	} else if d, ok := g.dirs["cpu"]; ok {
		if b, _ := os.ReadFile(filepath.Join(d, "cpu.shares")); strings.TrimSpace(string(b)) != "2048" {
			t.Fatalf("cpu.shares = %s", b)
		}
	}
	cmd, out := runIn(t, g, "head -c 30M /dev/zero | tail; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err, out)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.UserCPU < 50*time.Millisecond {
		t.Fatalf("CPU %v user + %v system, want the user time of the job's 300,000 turns of a loop", st.UserCPU, st.SysCPU)
	}
	if st.PeakMemoryBytes < 30<<20 {
		t.Fatalf("peak memory %d, want the 30 MiB the job held", st.PeakMemoryBytes)
	}
	if st.OOMKills != 0 {
		t.Fatalf("OOMKills = %d under the limit", st.OOMKills)
	}
}

func TestManyJobsLeaveNoCgroups(t *testing.T) {
	t.Parallel()
	m := open(t)
	m.tidyAfter = 300 * time.Millisecond
	for i := range 40 {
		g, err := m.Create("job"+strconv.Itoa(i), Limits{MemoryBytes: 64 << 20, MaxPids: 50, CPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		cmd, _ := runIn(t, g, "sleep 100 & true")
		_ = cmd.Wait()
		if err := g.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	// The agent's directories stay a while for a next job, and hold no
	// job's cgroup.
	for _, b := range m.bases() {
		ents, err := os.ReadDir(b)
		if err != nil {
			t.Errorf("%s just after the last job: %v; want kept", b, err)
		}
		for _, e := range ents {
			if e.IsDir() {
				t.Errorf("%s just after the last job holds the cgroup %s", b, e.Name())
			}
		}
	}
	// Then nothing of the agent is left, not even its directories.
	time.Sleep(m.tidyAfter + 200*time.Millisecond)
	for _, b := range m.bases() {
		if _, err := os.Stat(b); !errors.Is(err, fs.ErrNotExist) {
			ents, _ := os.ReadDir(b)
			t.Errorf("%s is left, with %d entries: %v", b, len(ents), err)
		}
	}
}

// TestBasesKeptBetweenJobs: a job whose cgroup is made within
// tidyAfter of the last one's removal finds the agent's directories made
// (none is made again), and the removal timer set by the first job's end
// does not remove them under it.
func TestBasesKeptBetweenJobs(t *testing.T) {
	t.Parallel()
	m := open(t)
	m.tidyAfter = 200 * time.Millisecond
	g, err := m.Create("one", Limits{MaxPids: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	inode := map[string]uint64{}
	for _, b := range m.bases() {
		st, err := os.Stat(b)
		if err != nil {
			t.Fatalf("%s removed at once after the job: %v", b, err)
		}
		inode[b] = st.Sys().(*syscall.Stat_t).Ino
	}
	g, err = m.Create("two", Limits{MaxPids: 10})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(m.tidyAfter + 200*time.Millisecond) // past the first job's timer
	for _, b := range m.bases() {
		st, err := os.Stat(b)
		if err != nil {
			t.Fatalf("%s removed while a job's cgroup is in it: %v", b, err)
		}
		if ino := st.Sys().(*syscall.Stat_t).Ino; ino != inode[b] {
			t.Errorf("%s made again for the next job", b)
		}
	}
	cmd, _ := runIn(t, g, "true")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}

func TestSweepRemovesWhatACrashLeft(t *testing.T) {
	t.Parallel()
	m := open(t)
	g, err := m.Create("left", Limits{MaxPids: 10})
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := runIn(t, g, "sleep 1000")
	// A new run of the agent: the same directory.
	m2, err := Open(m.name)
	if err != nil {
		t.Fatal(err)
	}
	names, err := m2.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "left" {
		t.Fatalf("swept %q, want [left]", names)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the job of the crashed run was not killed")
	}
	for _, d := range g.all {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s is still there: %v", d, err)
		}
	}
}

func TestCreateRefusesBadNames(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"", ".", "..", "a/b", "../x"} {
		if _, err := (&Manager{}).Create(n, Limits{}); err == nil {
			t.Errorf("Create(%q) did not fail", n)
		}
	}
	for _, n := range []string{"", "/abs", "../up"} {
		if _, err := Open(n); err == nil {
			t.Errorf("Open(%q) did not fail", n)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	mi := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /host /sys/fs/cgroup/mem\040ory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	ms := parseMounts([]byte(mi))
	if len(ms) != 3 || !ms[0].opts["cpuacct"] || ms[1].dir != "/sys/fs/cgroup/mem ory" || !ms[2].v2 {
		t.Fatalf("parseMounts = %+v", ms)
	}
	if d := dirOf(ms[1], "/host/job"); d != "/sys/fs/cgroup/mem ory/job" {
		t.Fatalf("dirOf = %s", d)
	}
	own := parseOwn([]byte("4:memory:/a/b\n2:cpu,cpuacct:/\n0::/u\n"))
	if own["memory"] != "/a/b" || own["cpuacct"] != "/" || own[""] != "/u" {
		t.Fatalf("parseOwn = %v", own)
	}
	kv := parseKV([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\nbad\n"))
	if kv["oom_kill"] != 3 || len(kv) != 3 {
		t.Fatalf("parseKV = %v", kv)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"), []byte("4:memory:/a\n0::/\n"))
	f.Fuzz(func(t *testing.T, mi, own []byte) {
		for _, m := range parseMounts(mi) {
			_ = dirOf(m, "/x")
		}
		_ = parseOwn(own)
		_ = parseKV(mi)
	})
}

func TestSweepAbandonedTakesOnlyOthersLongEmptyCgroups(t *testing.T) {
	t.Parallel()
	m := open(t)
	// Another agent's, next to m's.
	other, err := Open(fmt.Sprintf("%s-%d", m.name[:strings.LastIndexByte(m.name, '-')], time.Now().UnixNano()+1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = other.Sweep() })
	empty, err := other.Create("empty", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := other.Create("busy", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := runIn(t, busy, "sleep 1000")
	defer func() { _ = busy.Remove(); _ = cmd.Wait() }()
	mine, err := m.Create("mine", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Remove()

	if got, err := m.SweepAbandoned(time.Hour); err != nil || len(got) != 0 {
		t.Fatalf("SweepAbandoned(an hour) = %q, %v: it took cgroups empty for less", got, err)
	}
	got, err := m.SweepAbandoned(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || filepath.Base(got[0]) != "empty" {
		t.Fatalf("SweepAbandoned(0) = %q, want the other agent's empty cgroup only", got)
	}
	for _, d := range empty.all {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s is still there", d)
		}
	}
	for _, g := range []*Group{busy, mine} {
		if _, err := os.Stat(g.all[0]); err != nil {
			t.Fatalf("%s was removed: %v", g.all[0], err)
		}
	}
	if syscall.Kill(cmd.Process.Pid, 0) != nil {
		t.Fatal("the busy cgroup's process was killed")
	}
}

// TestRenameMovesTheJobAside renames a job's cgroup with a process in it:
// the process stays in it, a cgroup of the old name can be made beside it,
// and Remove kills the process and removes the renamed cgroup.
func TestRenameMovesTheJobAside(t *testing.T) {
	t.Parallel()
	m := open(t)
	g, err := m.Create("aside", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := runIn(t, g, "exec sleep 1000")
	before, err := g.Pids()
	if err != nil || len(before) == 0 {
		t.Fatalf("the job's processes: %v, %v", before, err)
	}
	if err := g.Rename(".killed-1"); err != nil {
		t.Fatal(err)
	}
	if err := g.Rename("/x"); err == nil {
		t.Error("Rename accepted a suffix with a slash")
	}
	after, err := g.Pids()
	if err != nil || len(after) != len(before) {
		t.Fatalf("after the rename the cgroup holds %v (%v); before, %v", after, err, before)
	}
	again, err := m.Create("aside", Limits{})
	if err != nil {
		t.Fatalf("a cgroup of the old name: %v", err)
	}
	if err := again.Remove(); err != nil {
		t.Fatal(err)
	}
	if !alive(before[0]) {
		t.Fatal("making a cgroup of the old name killed the renamed one's process")
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, d := range g.all {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", d, err)
		}
	}
}

// TestAgentsSharingAParent opens, uses and tidies the managers of several
// agents whose bases share a parent, all at once, as the agents of one
// host starting together do. Each tidy removes the shared parent when it
// is empty for an instant; no agent's open or job's cgroup fails for it,
// and every job gets its pids limit.
func TestAgentsSharingAParent(t *testing.T) {
	testenv.NeedRoot(t, "creating cgroups")
	parent := fmt.Sprintf("pond-test/%s-%d", t.Name(), time.Now().UnixNano())
	if m, err := Open(parent + "/probe"); err != nil {
		testenv.SkipOrFailf(t, "no writable cgroup hierarchy with a memory controller: %v", err)
	} else {
		m.Close()
	}
	const agents, rounds = 8, 30
	errs := make(chan error, agents*rounds)
	var wg sync.WaitGroup
	for a := range agents {
		wg.Go(func() {
			for r := range rounds {
				m, err := Open(fmt.Sprintf("%s/startd-%d", parent, a))
				if err != nil {
					errs <- fmt.Errorf("agent %d, round %d: open: %w", a, r, err)
					continue
				}
				m.tidyAfter = 0
				g, err := m.Create("job", Limits{MemoryBytes: 64 << 20, MaxPids: 50})
				if err != nil {
					errs <- fmt.Errorf("agent %d, round %d: a job's cgroup: %w", a, r, err)
				} else if err := g.Remove(); err != nil {
					errs <- fmt.Errorf("agent %d, round %d: removing a job's cgroup: %w", a, r, err)
				}
				m.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if n > 5 {
		t.Errorf("... %d failures in all", n)
	}
}
