// Package cgroup contains a startd's jobs in control groups of their own,
// as HTCondor's startd does: each job's processes in one cgroup whose
// memory is limited to the job's request, whose CPU weight follows its
// requested CPUs, and whose number of processes is bounded; whose use is
// read from the kernel's accounting; and which is killed whole when the
// job ends, whatever processes escaped the job's session.
//
// Both layouts are supported: the unified hierarchy of cgroup v2
// (memory.max, cpu.weight, pids.max, cgroup.kill) and the per-controller
// hierarchies of cgroup v1 (memory.limit_in_bytes, cpu.shares, pids.max,
// the freezer). A job's cgroups lie below the agent's own, in a directory
// named after the agent, so that agents of one host never touch each
// other's and the host's own limits still apply to the jobs.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/internal/plainfile"
)

// Root is where the cgroup file systems are mounted.
const Root = "/sys/fs/cgroup"

// AgentLeaf is the cgroup, below its own, a v2 agent whose cgroup holds
// processes moves itself to, so that its cgroup may hand its controllers
// to the jobs' cgroups (v2 lets only a cgroup without processes do so).
const AgentLeaf = "pond.agent"

// Manager creates the cgroups of one agent's jobs.
type Manager struct {
	v2 bool
	// base is the directory of the agent's jobs' cgroups in each
	// hierarchy, by controller ("" for the unified hierarchy); home the
	// agent's own cgroup there.
	base, home map[string]string
	// unifiedKill is the base directory in a unified hierarchy without
	// controllers (a hybrid host) whose cgroup.kill kills a job whole;
	// empty when there is none.
	unifiedKill, unifiedHome string
	// back is the leaf of its v2 cgroup the agent moved to (see
	// AgentLeaf), where the job's supervisor returns; empty when it did
	// not move.
	back string
	// name is the base directories' path below the homes; controllers
	// what a v2 base hands to its children.
	name, controllers string

	// mu guards live (the jobs' cgroups made and not yet removed),
	// ensured (the base directories are known made) and idle, the timer
	// that removes the base directories once no job has had a cgroup
	// for tidyAfter: a job that follows another within it does not make
	// them again.
	mu        sync.Mutex
	live      int
	ensured   bool
	idle      *time.Timer
	tidyAfter time.Duration
	// serial numbers the cgroups made (Group.Serial).
	serial atomic.Uint64
	// spares are the cgroups of ended jobs kept for the next job of the
	// same name, a slot's (see Group.Release), by name; keepSpare how
	// long one is kept unused.
	spares    map[string]*spare
	keepSpare time.Duration
	// expiring are the names whose kept cgroup is being removed, its
	// time up: Acquire of that name waits for the removal, which would
	// otherwise remove the new cgroup made at the same paths.
	expiring map[string]chan struct{}
	// expireHook, when set (tests), is called as a kept cgroup's removal
	// starts.
	expireHook func(name string)
	// closed says the manager was closed: no cgroup is kept since.
	closed bool
}

// keepBases is how long the base directories stay once the last job's
// cgroup is removed (Manager.tidyAfter).
const keepBases = 5 * time.Second

// release counts a job's cgroup removed; the last one's removal has the
// base directories removed after tidyAfter, unless a job's cgroup is made
// meanwhile.
func (m *Manager) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live--
	if m.live > 0 {
		return
	}
	if m.tidyAfter <= 0 {
		m.tidyLocked()
		return
	}
	var t *time.Timer
	t = time.AfterFunc(m.tidyAfter, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.live == 0 && m.idle == t {
			m.tidyLocked()
		}
	})
	m.idle = t
}

// tidyLocked removes the base directories (tidy) and stops the timer that
// would; m.mu is held.
func (m *Manager) tidyLocked() {
	if m.idle != nil {
		m.idle.Stop()
		m.idle = nil
	}
	m.ensured = false
	m.tidy()
}

// ensure makes the base directories (each level handing the controllers
// on, in v2, down to the jobs' cgroups, the leaves).
func (m *Manager) ensure() error {
	homes := map[string]string{}
	for c, b := range m.base {
		homes[b] = m.home[c]
	}
	if m.unifiedKill != "" {
		homes[m.unifiedKill] = m.unifiedHome
	}
	for b, h := range homes {
		dir := h
		if m.v2 {
			if err := write(filepath.Join(dir, "cgroup.subtree_control"), m.controllers); err != nil {
				return fmt.Errorf("handing the controllers to the jobs' cgroups: %w", err)
			}
		}
		rel, err := filepath.Rel(h, b)
		if err != nil {
			return err
		}
		if err := m.ensureBase(h, dir, rel); err != nil {
			return err
		}
	}
	return nil
}

// ensureBase makes the directories of rel below dir, in home, level by
// level. Another agent's tidy may remove a shared parent between two
// levels (it was empty for an instant): the making starts again then.
func (m *Manager) ensureBase(home, dir, rel string) error {
	var err error
	for range mkdirTries {
		d := dir
		for _, part := range strings.Split(rel, "/") {
			d = filepath.Join(d, part)
			if err = os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				break
			}
			err = nil
			if m.v2 {
				if err := write(filepath.Join(d, "cgroup.subtree_control"), m.controllers); err != nil {
					return fmt.Errorf("handing the controllers to the jobs' cgroups: %w", err)
				}
			}
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return fmt.Errorf("making %s below %s: %w", rel, home, err)
}

// mkdirTries is how many times a cgroup directory is made when its parent
// vanishes meanwhile: agents of one host share the parent of their bases
// and each removes it, when empty, as it tidies (tidy).
const mkdirTries = 10

// mkdirAll is os.MkdirAll, made again when a parent it found or made was
// removed before its child was made (see mkdirTries).
func mkdirAll(dir string) error {
	var err error
	for range mkdirTries {
		if err = os.MkdirAll(dir, 0o755); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return err
}

// tidy removes the base directories that hold no job's cgroup, and their
// parents up to the homes that are empty: nothing of the agent is left
// behind between jobs.
func (m *Manager) tidy() {
	for c, b := range m.base {
		tidy(m.home[c], b)
	}
	if m.unifiedKill != "" {
		tidy(m.unifiedHome, m.unifiedKill)
	}
}

func tidy(home, dir string) {
	for dir != home && strings.HasPrefix(dir, home+"/") {
		if syscall.Rmdir(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// v1Controllers are the cgroup v1 controllers a job is put under: memory is
// required, the others used where mounted.
var v1Controllers = []string{"memory", "cpu", "cpuacct", "pids", "freezer"}

// Open finds the cgroup hierarchies this process may create cgroups in,
// and makes the directory name (a path relative to the process's own
// cgroup) in each, for the cgroups of the jobs. It fails, saying why,
// when no memory controller can be written: jobs are then not contained.
func Open(name string) (*Manager, error) {
	if name == "" || filepath.IsAbs(name) || !filepath.IsLocal(name) {
		return nil, fmt.Errorf("cgroup directory %q is not a relative path", name)
	}
	mounts, err := readMounts("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	own, err := readOwn("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	var why []error
	if m, err := openV2(mounts, own, name); err == nil {
		return m, nil
	} else {
		why = append(why, err)
	}
	m, err := openV1(mounts, own, name)
	if err == nil {
		return m, nil
	}
	return nil, errors.Join(append(why, err)...)
}

// mount is a cgroup file system's mount.
type mount struct {
	dir, root string
	v2        bool
	opts      map[string]bool // v1: the controllers of the hierarchy
}

// readMounts reads the cgroup mounts of a mountinfo file.
func readMounts(path string) ([]mount, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the mounts: %w", err)
	}
	return parseMounts(b), nil
}

// parseMounts parses mountinfo, keeping the cgroup mounts.
func parseMounts(b []byte) []mount {
	var out []mount
	for line := range strings.Lines(string(b)) {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := mount{dir: unescape(f[4]), root: unescape(f[3]), opts: map[string]bool{}}
		switch g[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				m.opts[o] = true
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readOwn reads a process's cgroups: by v1 controller, and "" for the
// unified hierarchy.
func readOwn(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the agent's cgroups: %w", err)
	}
	return parseOwn(b), nil
}

// parseOwn parses /proc/PID/cgroup.
func parseOwn(b []byte) map[string]string {
	own := map[string]string{}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			own[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			own[c] = f[2]
		}
	}
	return own
}

// dirOf is the directory of the cgroup path p (as /proc/self/cgroup names
// it) in the hierarchy mounted as m.
func dirOf(m mount, p string) string {
	rel := p
	if m.root != "/" {
		rel = strings.TrimPrefix(p, m.root)
	}
	return filepath.Join(m.dir, rel)
}

// openV2 uses a unified hierarchy whose memory and pids controllers the
// agent's cgroup may hand to its children.
func openV2(mounts []mount, own map[string]string, name string) (*Manager, error) {
	var m *mount
	for i := range mounts {
		if mounts[i].v2 {
			m = &mounts[i]
			break
		}
	}
	p, ok := own[""]
	if m == nil || !ok {
		return nil, errors.New("cgroup v2: no unified hierarchy")
	}
	home := dirOf(*m, p)
	have, err := os.ReadFile(filepath.Join(home, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	avail := map[string]bool{}
	for _, c := range strings.Fields(string(have)) {
		avail[c] = true
	}
	if !avail["memory"] || !avail["pids"] {
		return nil, fmt.Errorf("cgroup v2: %s lacks the memory and pids controllers (it has %q)", home, strings.TrimSpace(string(have)))
	}
	want := "+memory +pids"
	if avail["cpu"] {
		want += " +cpu"
	}
	mgr := &Manager{v2: true, name: name, controllers: want, tidyAfter: keepBases, keepSpare: keepSpare,
		base: map[string]string{"": filepath.Join(home, name)}, home: map[string]string{"": home}}
	err = write(filepath.Join(home, "cgroup.subtree_control"), want)
	if errors.Is(err, syscall.EBUSY) && filepath.Clean(home) != filepath.Clean(m.dir) {
		// A v2 cgroup that holds processes hands no controller on (a
		// service's cgroup): the agent moves to a leaf of its own in it.
		leaf := filepath.Join(home, AgentLeaf)
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		if err := write(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
			return nil, fmt.Errorf("cgroup v2: moving the agent to a leaf of its cgroup: %w", err)
		}
		mgr.back = leaf
	}
	if err := mgr.ensure(); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			err = fmt.Errorf("%w (processes other than the agent's share its cgroup %s: run it in a cgroup of its own, such as a systemd service with Delegate=yes)", err, home)
		}
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	mgr.tidy()
	return mgr, nil
}

// openV1 uses the v1 hierarchies: memory's is required.
func openV1(mounts []mount, own map[string]string, name string) (*Manager, error) {
	mgr := &Manager{name: name, base: map[string]string{}, home: map[string]string{}, tidyAfter: keepBases, keepSpare: keepSpare}
	defer mgr.tidy()
	for _, c := range v1Controllers {
		for _, m := range mounts {
			if m.v2 || !m.opts[c] {
				continue
			}
			p, ok := own[c]
			if !ok {
				continue
			}
			home := dirOf(m, p)
			base := filepath.Join(home, name)
			if err := mkdirAll(base); err != nil {
				if c == "memory" {
					return nil, fmt.Errorf("cgroup v1: %w", err)
				}
				continue
			}
			mgr.base[c], mgr.home[c] = base, home
			break
		}
	}
	if mgr.base["memory"] == "" {
		return nil, errors.New("cgroup v1: no memory hierarchy")
	}
	// A hybrid host's unified hierarchy, without controllers, still kills
	// a cgroup whole.
	for _, m := range mounts {
		if p, ok := own[""]; ok && m.v2 {
			home := dirOf(m, p)
			base := filepath.Join(home, name)
			probe := filepath.Join(base, "probe")
			if mkdirAll(probe) == nil {
				if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err == nil {
					mgr.unifiedKill, mgr.unifiedHome = base, home
				}
				_ = os.Remove(probe)
				tidy(home, base)
			}
			break
		}
	}
	return mgr, nil
}

// Name is the path, below the agent's own cgroup, of the directory of the
// jobs' cgroups: Open(Name()) in a new run of the agent finds them.
func (m *Manager) Name() string { return m.name }

// Version is "v2" or "v1".
func (m *Manager) Version() string {
	if m.v2 {
		return "v2"
	}
	return "v1"
}

// Home are the cgroup.procs files of the agent's own cgroups, which a
// process started in a job's cgroup returns to.
func (m *Manager) Home() []string {
	if m.back != "" {
		return []string{filepath.Join(m.back, "cgroup.procs")}
	}
	dirs := uniq(m.home)
	if m.unifiedHome != "" {
		dirs = append(dirs, m.unifiedHome)
	}
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// bases are the distinct base directories.
func (m *Manager) bases() []string {
	out := uniq(m.base)
	if m.unifiedKill != "" {
		out = append(out, m.unifiedKill)
	}
	return out
}

// uniq is the distinct values of dirs (v1 controllers mounted together
// share one), in a fixed order.
func uniq(dirs map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range append([]string{""}, v1Controllers...) {
		if d, ok := dirs[c]; ok && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// Limits are what a job's cgroup allows.
type Limits struct {
	// MemoryBytes is the job's memory limit, 0 for none; with
	// SoftMemory the kernel reclaims from the job over it first rather
	// than kill it (memory.high, memory.soft_limit_in_bytes).
	MemoryBytes int64
	SoftMemory  bool
	// CPUs is the job's share of the CPU relative to other jobs
	// (cpu.weight 100, cpu.shares 1024, per CPU); 0 leaves the default.
	CPUs float64
	// MaxPids bounds the job's processes and threads; 0 for no bound.
	MaxPids int64
}

// Group is one job's cgroup.
type Group struct {
	m    *Manager
	dirs map[string]string // by controller, "" the unified hierarchy
	all  []string          // the distinct directories
	// limit is the memory limit set, 0 for none; lim the limits the
	// group was made with.
	limit int64
	lim   Limits
	// oomBase is the kernel's count of processes killed over the memory
	// limit when the group was readied for its current job (v1 counts
	// over the cgroup's life; see Group.ready).
	oomBase int64
	// f are the files of the group kept open.
	f files
	// serial tells the group from others made at its paths (Serial).
	serial uint64
	// counted says the group is among its manager's live ones (made by
	// Create, not yet removed).
	counted bool
}

// Create makes the cgroup name (a single path element) with limits lim.
// A cgroup of that name left by an earlier run is killed and replaced.
func (m *Manager) Create(name string, lim Limits) (*Group, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup name %q is not a single path element", name)
	}
	g := &Group{m: m, dirs: map[string]string{}}
	m.mu.Lock()
	m.live++
	if m.idle != nil {
		m.idle.Stop()
		m.idle = nil
	}
	m.mu.Unlock()
	made := false
	defer func() {
		if !made {
			m.release()
		}
	}()
	for c, b := range m.base {
		g.dirs[c] = filepath.Join(b, name)
	}
	if m.unifiedKill != "" {
		g.dirs["unified"] = filepath.Join(m.unifiedKill, name)
	}
	seen := map[string]bool{}
	for _, c := range append([]string{"", "unified"}, v1Controllers...) {
		if d, ok := g.dirs[c]; ok && !seen[d] {
			seen[d] = true
			g.all = append(g.all, d)
		}
	}
	if err := g.remove(); err != nil {
		return nil, err
	}
	if err := g.make(); err != nil {
		_ = g.remove()
		return nil, fmt.Errorf("creating the job's cgroup: %w", err)
	}
	if err := g.limit0(lim); err != nil {
		_ = g.remove()
		return nil, fmt.Errorf("setting the job's cgroup limits: %w", err)
	}
	made, g.counted, g.lim = true, true, lim
	g.serial = m.serial.Add(1)
	return g, nil
}

// Serial is the group's number among the cgroups its manager made, from
// 1: a cgroup made again at the same paths (after a removal, or beside
// one renamed aside) has another, a kept one readied for a next job the
// same.
func (g *Group) Serial() uint64 { return g.serial }

// make makes the job's cgroup directories, and the base directories
// first: another job's end may remove those meanwhile (tidy), and make
// tries again.
func (g *Group) make() error {
	m := g.m
	var err error
	for range 10 {
		m.mu.Lock()
		ensured := m.ensured
		m.mu.Unlock()
		err = nil
		if !ensured {
			if err = m.ensure(); err == nil {
				m.mu.Lock()
				m.ensured = true
				m.mu.Unlock()
			}
		}
		if err == nil {
			err = g.mkdirs()
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		m.mu.Lock()
		m.ensured = false
		m.mu.Unlock()
	}
	return err
}

func (g *Group) mkdirs() error {
	for _, d := range g.all {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

func (g *Group) limit0(lim Limits) error {
	if g.m.v2 {
		d := g.dirs[""]
		if lim.MemoryBytes > 0 {
			file := "memory.max"
			if lim.SoftMemory {
				file = "memory.high"
			} else {
				g.limit = lim.MemoryBytes
			}
			if err := write(filepath.Join(d, file), strconv.FormatInt(lim.MemoryBytes, 10)); err != nil {
				return err
			}
			// A job over its memory does not swap instead.
			if err := writeIfExists(filepath.Join(d, "memory.swap.max"), "0"); err != nil {
				return err
			}
		}
		if lim.CPUs > 0 {
			w := min(max(int64(lim.CPUs*100), 1), 10000)
			if err := writeIfExists(filepath.Join(d, "cpu.weight"), strconv.FormatInt(w, 10)); err != nil {
				return err
			}
		}
		if lim.MaxPids > 0 {
			return write(filepath.Join(d, "pids.max"), strconv.FormatInt(lim.MaxPids, 10))
		}
		return nil
	}
	if lim.MemoryBytes > 0 {
		d := g.dirs["memory"]
		if lim.SoftMemory {
			if err := write(filepath.Join(d, "memory.soft_limit_in_bytes"), strconv.FormatInt(lim.MemoryBytes, 10)); err != nil {
				return err
			}
		} else {
			g.limit = lim.MemoryBytes
			if err := write(filepath.Join(d, "memory.limit_in_bytes"), strconv.FormatInt(lim.MemoryBytes, 10)); err != nil {
				return err
			}
			if err := writeIfExists(filepath.Join(d, "memory.memsw.limit_in_bytes"), strconv.FormatInt(lim.MemoryBytes, 10)); err != nil {
				return err
			}
		}
	}
	if d, ok := g.dirs["cpu"]; ok && lim.CPUs > 0 {
		if err := write(filepath.Join(d, "cpu.shares"), strconv.FormatInt(max(int64(lim.CPUs*1024), 2), 10)); err != nil {
			return err
		}
	}
	if lim.MaxPids > 0 {
		d, ok := g.dirs["pids"]
		if !ok {
			return errors.New("no pids controller to bound the job's processes")
		}
		return write(filepath.Join(d, "pids.max"), strconv.FormatInt(lim.MaxPids, 10))
	}
	return nil
}

// MemoryLimit is the job's hard memory limit in bytes, 0 for none.
func (g *Group) MemoryLimit() int64 { return g.limit }

// Procs are the cgroup.procs files a process writes itself to (its pid, or
// 0) to join the job's cgroup.
func (g *Group) Procs() []string {
	out := make([]string, len(g.all))
	for i, d := range g.all {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// Add moves the process pid into the job's cgroup.
func (g *Group) Add(pid int) error {
	for _, p := range g.Procs() {
		if err := write(p, strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("moving process %d into the job's cgroup: %w", pid, err)
		}
	}
	return nil
}

// Pids lists the processes in the job's cgroup.
// It opens the file each time: v1 keeps the list an open file read
// first, and a read again from its start shows that list.
func (g *Group) Pids() ([]int, error) {
	return readPids(filepath.Join(g.primary(), "cgroup.procs"))
}

// primary is the directory of the group whose processes and times stand
// for the group's: the unified hierarchy's in v2, the memory
// controller's in v1.
func (g *Group) primary() string {
	if g.m.v2 {
		return g.dirs[""]
	}
	return g.dirs["memory"]
}

func readPids(path string) ([]int, error) {
	b, err := plainfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// Stats is what a job used, from its cgroup's accounting.
type Stats struct {
	MemoryBytes     int64 // now
	PeakMemoryBytes int64 // the most at once, 0 when the kernel does not say
	RSSBytes        int64 // anonymous memory now
	UserCPU, SysCPU time.Duration
	Pids            int64 // processes and threads now
	OOMKills        int64 // processes the kernel killed over the memory limit
}

// Stats reads the job's use.
func (g *Group) Stats() (Stats, error) {
	var st Stats
	var err error
	if g.m.v2 {
		d := g.dirs[""]
		if st.MemoryBytes, err = g.f.readInt(filepath.Join(d, "memory.current")); err != nil {
			return st, err
		}
		st.PeakMemoryBytes, _ = g.f.readInt(filepath.Join(d, "memory.peak"))
		ms, _ := g.f.readKV(filepath.Join(d, "memory.stat"))
		st.RSSBytes = ms["anon"]
		ev, _ := g.f.readKV(filepath.Join(d, "memory.events"))
		st.OOMKills = ev["oom_kill"]
		cs, _ := g.f.readKV(filepath.Join(d, "cpu.stat"))
		st.UserCPU = time.Duration(cs["user_usec"]) * time.Microsecond
		st.SysCPU = time.Duration(cs["system_usec"]) * time.Microsecond
		st.Pids, _ = g.f.readInt(filepath.Join(d, "pids.current"))
	} else {
		d := g.dirs["memory"]
		if st.MemoryBytes, err = g.f.readInt(filepath.Join(d, "memory.usage_in_bytes")); err != nil {
			return st, err
		}
		st.PeakMemoryBytes, _ = g.f.readInt(filepath.Join(d, "memory.max_usage_in_bytes"))
		ms, _ := g.f.readKV(filepath.Join(d, "memory.stat"))
		st.RSSBytes = ms["total_rss"]
		oc, _ := g.f.readKV(filepath.Join(d, "memory.oom_control"))
		st.OOMKills = max(oc["oom_kill"]-g.oomBase, 0)
		if a, ok := g.dirs["cpuacct"]; ok {
			u, uerr := g.f.readInt(filepath.Join(a, "cpuacct.usage_user"))
			s, serr := g.f.readInt(filepath.Join(a, "cpuacct.usage_sys"))
			if uerr == nil && serr == nil {
				st.UserCPU, st.SysCPU = time.Duration(u), time.Duration(s)
			} else if cs, err := g.f.readKV(filepath.Join(a, "cpuacct.stat")); err == nil {
				// USER_HZ, 100 on every Linux architecture.
				st.UserCPU = time.Duration(cs["user"]) * 10 * time.Millisecond
				st.SysCPU = time.Duration(cs["system"]) * 10 * time.Millisecond
			}
		}
		if p, ok := g.dirs["pids"]; ok {
			st.Pids, _ = g.f.readInt(filepath.Join(p, "pids.current"))
		}
	}
	return st, nil
}

// killWait is how long Kill tries before it gives up on processes that do
// not die (stuck in the kernel).
const killWait = 10 * time.Second

// Kill kills every process in the job's cgroup, including those that left
// the job's session or process group, and waits until none is left: with
// cgroup.kill where the kernel has it, else frozen first (v1's freezer, v2's
// cgroup.freeze) so that nothing forks while it is killed.
func (g *Group) Kill() error {
	deadline := time.Now().Add(killWait)
	killFile := ""
	if d, ok := g.dirs[""]; ok {
		killFile = filepath.Join(d, "cgroup.kill")
	} else if d, ok := g.dirs["unified"]; ok {
		killFile = filepath.Join(d, "cgroup.kill")
	}
	for delay := time.Millisecond; ; delay = min(delay*2, 100*time.Millisecond) {
		pids, err := g.Pids()
		if errors.Is(err, fs.ErrNotExist) || err == nil && len(pids) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("killing the job's cgroup: %w", err)
		}
		if killFile == "" || write(killFile, "1") != nil {
			g.freezeKill(pids)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("killing the job's cgroup: %d processes still alive after %v", len(pids), killWait)
		}
		time.Sleep(delay)
	}
}

// freezeKill kills pids with the cgroup frozen, where it can be.
func (g *Group) freezeKill(pids []int) {
	var thaw func()
	if d, ok := g.dirs["freezer"]; ok && !g.m.v2 {
		if write(filepath.Join(d, "freezer.state"), "FROZEN") == nil {
			thaw = func() { _ = write(filepath.Join(d, "freezer.state"), "THAWED") }
			for range 100 {
				b, _ := os.ReadFile(filepath.Join(d, "freezer.state"))
				if strings.TrimSpace(string(b)) != "FREEZING" {
					break
				}
				time.Sleep(time.Millisecond)
			}
			// What forked before it froze.
			if more, err := g.Pids(); err == nil {
				pids = more
			}
		}
	} else if d, ok := g.dirs[""]; ok {
		if write(filepath.Join(d, "cgroup.freeze"), "1") == nil {
			thaw = func() { _ = write(filepath.Join(d, "cgroup.freeze"), "0") }
			if more, err := g.Pids(); err == nil {
				pids = more
			}
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if thaw != nil {
		// SIGKILL is delivered as the cgroup thaws.
		thaw()
	}
}

// Rename moves the job's cgroup, with the processes in it, to the name
// it has with suffix appended (a single path element still), so that a
// cgroup of its old name can be made while this one's processes linger.
func (g *Group) Rename(suffix string) error {
	if strings.ContainsAny(suffix, "/\x00") {
		return fmt.Errorf("cgroup suffix %q is not part of a path element", suffix)
	}
	g.f.close()
	var errs []error
	for i, d := range g.all {
		if err := os.Rename(d, d+suffix); err != nil {
			// Where the kernel refuses the rename, the processes move
			// to a new cgroup of that name.
			if err := moveProcs(d, d+suffix); err != nil {
				errs = append(errs, fmt.Errorf("renaming the job's cgroup: %w", err))
				continue
			}
		}
		for c, cd := range g.dirs {
			if cd == d {
				g.dirs[c] = d + suffix
			}
		}
		g.all[i] = d + suffix
	}
	return errors.Join(errs...)
}

// moveProcs makes the cgroup to, moves the processes of from into it
// and removes from.
func moveProcs(from, to string) error {
	if err := os.Mkdir(to, 0o755); err != nil {
		return err
	}
	pids, err := readPids(filepath.Join(from, "cgroup.procs"))
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := write(filepath.Join(to, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return rmdir(from)
}

// Remove kills what is left in the job's cgroup and removes it, and the
// agent's directories when no other job's cgroup is left in them.
func (g *Group) Remove() error {
	err := g.remove()
	if g.counted {
		g.counted = false
		g.m.release()
	} else {
		g.m.tidy()
	}
	return err
}

func (g *Group) remove() error {
	err := g.Kill()
	g.f.close()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range g.all {
		if err := rmdir(d); err != nil {
			errs = append(errs, fmt.Errorf("removing the job's cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// rmdir removes a cgroup directory, retrying a little: the kernel frees a
// cgroup shortly after its last process is reaped.
func rmdir(d string) error {
	var err error
	for i := range 50 {
		err = syscall.Rmdir(d)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return err
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
	return err
}

// Sweep kills and removes the cgroups of jobs an earlier run of the agent
// left (it died without ending them), and returns their names.
func (m *Manager) Sweep() ([]string, error) {
	return m.sweep(func(*Group) bool { return true })
}

// sweep kills and removes the cgroups in m's base directories that keep
// says to, and returns their names.
func (m *Manager) sweep(keep func(*Group) bool) ([]string, error) {
	names := map[string]bool{}
	for _, b := range m.bases() {
		ents, err := os.ReadDir(b)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing the jobs' cgroups: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				names[e.Name()] = true
			}
		}
	}
	var out []string
	var errs []error
	for n := range names {
		g := m.group(n)
		if !keep(g) {
			continue
		}
		if err := g.remove(); err != nil {
			errs = append(errs, err)
		}
		out = append(out, n)
	}
	m.tidy()
	return out, errors.Join(errs...)
}

// group is the cgroup name of m's, whether it exists or not.
func (m *Manager) group(name string) *Group {
	g := &Group{m: m, dirs: map[string]string{}}
	for c, b := range m.base {
		g.dirs[c] = filepath.Join(b, name)
	}
	if m.unifiedKill != "" {
		g.dirs["unified"] = filepath.Join(m.unifiedKill, name)
	}
	g.all = uniq(g.dirs)
	if d, ok := g.dirs["unified"]; ok {
		g.all = append(g.all, d)
	}
	return g
}

// SweepAbandoned removes the cgroups that other agents' directories next
// to m's hold (BASE_CGROUP's other startd-* directories) that have had no
// process for longer than idle: those of jobs of agents killed and never
// started again. A live agent's job's cgroup holds its processes from a
// moment after it is made until the job ends, when the agent removes it;
// one that has stayed empty that long is no one's. It returns the paths
// removed.
func (m *Manager) SweepAbandoned(idle time.Duration) ([]string, error) {
	own := filepath.Base(m.name)
	parent := filepath.Dir(m.name)
	var siblings []string
	primary := m.base["memory"]
	if m.v2 {
		primary = m.base[""]
	}
	ents, err := os.ReadDir(filepath.Dir(primary))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the cgroups of other agents: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && e.Name() != own && strings.HasPrefix(e.Name(), sweepPrefix(own)) {
			siblings = append(siblings, e.Name())
		}
	}
	var out []string
	var errs []error
	for _, sib := range siblings {
		other := &Manager{v2: m.v2, name: filepath.Join(parent, sib), controllers: m.controllers,
			base: map[string]string{}, home: m.home, unifiedHome: m.unifiedHome}
		for c, b := range m.base {
			other.base[c] = filepath.Join(filepath.Dir(b), sib)
		}
		if m.unifiedKill != "" {
			other.unifiedKill = filepath.Join(filepath.Dir(m.unifiedKill), sib)
		}
		names, err := other.sweep(func(g *Group) bool {
			pids, err := g.Pids()
			if err != nil || len(pids) > 0 {
				return false
			}
			fi, err := os.Stat(g.primary())
			return err == nil && time.Since(fi.ModTime()) > idle
		})
		for _, n := range names {
			out = append(out, filepath.Join(sib, n))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// sweepPrefix is what the names of the directories of agents like the one
// named own begin with: up to its last '-' (startd-<hash>: startd-).
func sweepPrefix(own string) string {
	if i := strings.LastIndexByte(own, '-'); i >= 0 {
		return own[:i+1]
	}
	return own
}

// Close removes the cgroups kept for slots' next jobs and the agent's
// directories that no job's cgroup is left in.
func (m *Manager) Close() {
	m.removeSpares()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tidyLocked()
}

// Join moves the calling process into the cgroups whose cgroup.procs files
// are procs.
func Join(procs []string) error {
	for _, p := range procs {
		if err := write(p, "0"); err != nil {
			return err
		}
	}
	return nil
}

func write(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s to %s: %w", v, path, err)
	}
	return nil
}

func writeIfExists(path, v string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return write(path, v)
}

// parseKV parses "name value" lines; lines that are not are skipped.
func parseKV(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[f[0]] = n
		}
	}
	return out
}
