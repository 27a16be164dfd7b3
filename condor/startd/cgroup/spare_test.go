package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// inodes are the inode numbers of g's directories: the same inodes, the
// same cgroup.
func inodes(t *testing.T, g *Group) []uint64 {
	t.Helper()
	var out []uint64
	for _, d := range g.all {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st.Sys().(*syscall.Stat_t).Ino)
	}
	return out
}

// TestKeptCgroupServesTheNextJob: the cgroup of a slot's ended job serves
// the slot's next job with the same limits, its accounting that job's
// alone; one with other limits gets a new cgroup.
func TestKeptCgroupServesTheNextJob(t *testing.T) {
	t.Parallel()
	m := open(t)
	if !m.Reusable() {
		t.Skip("cgroup v2: a job's cgroup is not kept for the next")
	}
	lim := Limits{MemoryBytes: 256 << 20, MaxPids: 100, CPUs: 1}
	g, err := m.Acquire("slot1_1", lim)
	if err != nil {
		t.Fatal(err)
	}
	first := inodes(t, g)
	// A job that held 40 MiB, spent CPU and left a process running.
	cmd, out := runIn(t, g, "x=$(head -c 40000000 /dev/zero | tr '\\0' a); i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 1000 &")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err, out)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.UserCPU < 50*time.Millisecond || st.PeakMemoryBytes < 40<<20 || st.Pids != 1 {
		t.Fatalf("the first job's use: %+v, want its CPU, its 40 MiB and its process left", st)
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	if pids, err := g.Pids(); err != nil || len(pids) != 0 {
		t.Fatalf("processes left in the kept cgroup: %v, %v", pids, err)
	}

	g2, err := m.Acquire("slot1_1", lim)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(inodes(t, g2)) != fmt.Sprint(first) || g2.Serial() != g.Serial() {
		t.Fatalf("the next job of the slot, with the same limits, got a new cgroup (serial %d, before %d)", g2.Serial(), g.Serial())
	}
	st, err = g2.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.UserCPU+st.SysCPU > 10*time.Millisecond || st.PeakMemoryBytes > 4<<20 || st.OOMKills != 0 {
		t.Fatalf("the next job's use before it runs: %+v, want none of the first job's", st)
	}
	cmd, out = runIn(t, g2, "head -c 8M /dev/zero | tail")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err, out)
	}
	if st, err = g2.Stats(); err != nil {
		t.Fatal(err)
	}
	if st.PeakMemoryBytes < 8<<20 || st.PeakMemoryBytes > 30<<20 {
		t.Fatalf("the next job's peak memory %d, want its own 8 MiB", st.PeakMemoryBytes)
	}
	if err := g2.Release(); err != nil {
		t.Fatal(err)
	}

	// A job that leaves memory charged to its cgroup (the page cache of
	// a file it wrote and kept): the next job gets a new cgroup, whose
	// use is its own.
	g2, err = m.Acquire("slot1_1", lim)
	if err != nil {
		t.Fatal(err)
	}
	cmd, out = runIn(t, g2, "head -c 8M /dev/zero > "+filepath.Join(t.TempDir(), "kept"))
	if err := cmd.Wait(); err != nil {
		t.Fatal(err, out)
	}
	if err := g2.Release(); err != nil {
		t.Fatal(err)
	}
	g2, err = m.Acquire("slot1_1", lim)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(inodes(t, g2)) == fmt.Sprint(first) || g2.Serial() == g.Serial() {
		t.Fatalf("the job after one that left 8 MiB charged to the slot's cgroup got that cgroup (serial %d)", g2.Serial())
	}
	if st, err = g2.Stats(); err != nil || st.PeakMemoryBytes > 4<<20 || st.MemoryBytes > 4<<20 {
		t.Fatalf("the next job's use before it runs: %+v, %v; want none of the last job's", st, err)
	}
	if err := g2.Release(); err != nil {
		t.Fatal(err)
	}
	first = inodes(t, g2)

	// Other limits: a new cgroup, limited as asked.
	g3, err := m.Acquire("slot1_1", Limits{MemoryBytes: 64 << 20, MaxPids: 100, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g3.Remove()
	if fmt.Sprint(inodes(t, g3)) == fmt.Sprint(first) {
		t.Fatal("a job with other limits got the last job's cgroup")
	}
	b, err := os.ReadFile(g3.dirs["memory"] + "/memory.limit_in_bytes")
	if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(64<<20) {
		t.Fatalf("memory.limit_in_bytes = %q, %v", b, err)
	}
}

// TestKeptCgroupCountsOnlyItsJobsOOMKills: the kernel's count of
// processes killed over the memory limit is the cgroup's since it was
// made; the job after one killed so sees none of its own.
func TestKeptCgroupCountsOnlyItsJobsOOMKills(t *testing.T) {
	t.Parallel()
	m := open(t)
	if !m.Reusable() {
		t.Skip("cgroup v2: a job's cgroup is not kept for the next")
	}
	lim := Limits{MemoryBytes: 32 << 20}
	g, err := m.Acquire("slot1_2", lim)
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := runIn(t, g, "head -c 200M /dev/zero | tail")
	if cmd.Wait() == nil {
		t.Fatal("a job of 200 MiB ran to its end under a limit of 32 MiB")
	}
	if st, err := g.Stats(); err != nil || st.OOMKills < 1 {
		t.Fatalf("OOMKills = %+v, %v; want at least 1", st, err)
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	g, err = m.Acquire("slot1_2", lim)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	cmd, out := runIn(t, g, "true")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err, out)
	}
	if st, err := g.Stats(); err != nil || st.OOMKills != 0 {
		t.Fatalf("the next job's OOMKills = %+v, %v; want 0", st, err)
	}
}

// TestKeptCgroupGoesAfterAWhile: a kept cgroup no job takes is removed,
// and the agent's directories after it; one removed under the agent (by
// another agent's sweep) is replaced by a new one.
func TestKeptCgroupGoesAfterAWhile(t *testing.T) {
	t.Parallel()
	m := open(t)
	if !m.Reusable() {
		t.Skip("cgroup v2: a job's cgroup is not kept for the next")
	}
	m.keepSpare, m.tidyAfter = 200*time.Millisecond, 200*time.Millisecond
	g, err := m.Acquire("slot1_3", Limits{MaxPids: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.all {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s not kept: %v", d, err)
		}
	}
	time.Sleep(m.keepSpare + m.tidyAfter + 300*time.Millisecond)
	for _, d := range append(append([]string(nil), g.all...), m.bases()...) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left: %v", d, err)
		}
	}

	m.keepSpare = time.Hour
	g, err = m.Acquire("slot1_3", Limits{MaxPids: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	gone := m.group("slot1_3")
	if err := gone.remove(); err != nil {
		t.Fatal(err)
	}
	g, err = m.Acquire("slot1_3", Limits{MaxPids: 10})
	if err != nil {
		t.Fatalf("a kept cgroup removed meanwhile: %v, want a new one", err)
	}
	cmd, out := runIn(t, g, "true")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err, out)
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	for _, d := range g.all {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left after Close: %v", d, err)
		}
	}
	// A job that ends as the agent stops: its cgroup is not kept.
	g, err = m.Acquire("slot1_3", Limits{MaxPids: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.all {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is kept after Close: %v", d, err)
		}
	}
}

// TestKeptCgroupIsNotAbandoned: another agent starting does not take a
// kept cgroup, made long ago, for one abandoned.
func TestKeptCgroupIsNotAbandoned(t *testing.T) {
	t.Parallel()
	m := open(t)
	if !m.Reusable() {
		t.Skip("cgroup v2: a job's cgroup is not kept for the next")
	}
	other, err := Open(fmt.Sprintf("%s-%d", m.name[:strings.LastIndexByte(m.name, '-')], time.Now().UnixNano()+1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = other.Sweep() })
	g, err := m.Acquire("slot1_4", Limits{MaxPids: 10})
	if err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	for _, d := range g.all {
		if err := os.Chtimes(d, long, long); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	if got, err := other.SweepAbandoned(time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("another agent's SweepAbandoned took %q, %v", got, err)
	}
	if _, err := os.Stat(g.primary()); err != nil {
		t.Fatal(err)
	}
}

// TestKeptCgroupExpiringMeetsANewJob: a slot's next job that comes as its
// kept cgroup's time is up gets a cgroup the removal of the kept one does
// not take: the new one, at the same paths, is made once the kept one is
// gone. Before, the removal could remove the new one's directories as it
// was being set up ("setting the job's cgroup limits: ... no such file or
// directory"), and the machine counted a job it could not start.
func TestKeptCgroupExpiringMeetsANewJob(t *testing.T) {
	t.Parallel()
	m := open(t)
	if !m.Reusable() {
		t.Skip("cgroup v2: a job's cgroup is not kept for the next")
	}
	lim := Limits{MaxPids: 10}
	g, err := m.Acquire("slot1_5", lim)
	if err != nil {
		t.Fatal(err)
	}
	// The kept cgroup's removal starts, and waits until the next job's
	// Acquire has had its chance.
	started, proceed := make(chan struct{}), make(chan struct{})
	m.mu.Lock()
	m.keepSpare = 50 * time.Millisecond
	m.expireHook = func(string) {
		close(started)
		<-proceed
	}
	m.mu.Unlock()
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	<-started
	acquired := make(chan *Group, 1)
	errs := make(chan error, 1)
	go func() {
		g2, err := m.Acquire("slot1_5", lim)
		if err != nil {
			errs <- err
			return
		}
		acquired <- g2
	}()
	var g2 *Group
	select {
	case g2 = <-acquired:
		// Made before the kept one's removal: the removal below must
		// not take it.
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(300 * time.Millisecond):
		// Waiting for the removal, as it should.
	}
	close(proceed)
	if g2 == nil {
		select {
		case g2 = <-acquired:
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatal("the next job's Acquire did not return once the kept cgroup was removed")
		}
	}
	// Let a removal that would take the new directories finish.
	time.Sleep(100 * time.Millisecond)
	for _, d := range g2.all {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("the next job's cgroup %s: %v", d, err)
		}
	}
	cmd, out := runIn(t, g2, "true")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err, out)
	}
	if err := g2.Remove(); err != nil {
		t.Fatal(err)
	}
}
