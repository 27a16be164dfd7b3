package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// entry is one node's journal record. It is written before the node's
// process starts (PID 0: intent) and again right after the fork with the
// PID and the process start time, so that a later run can tell a live node
// from a recycled PID and reap what a crashed run left behind.
type entry struct {
	Pool      string    `json:"pool"`
	Address   string    `json:"address"`
	Node      string    `json:"node"`
	Index     int       `json:"index"`
	Role      string    `json:"role"`
	PID       int       `json:"pid"`
	StartTime uint64    `json:"start_time"`
	DataDir   string    `json:"data_dir"`
	API       string    `json:"api,omitempty"`
	Gossip    string    `json:"gossip,omitempty"`
	Spec      string    `json:"spec"`
	NodeSpec  *spec     `json:"node_spec,omitempty"`
	Created   time.Time `json:"created"`
	// Nonce is unique to one launch and is in the environment of the
	// node's process (LaunchEnv), so the process is found whatever its
	// argv says.
	Nonce string `json:"nonce,omitempty"`
	// Bin, Parent and ParentStart identify the binary and the pondctl
	// (pid and start time) that forked the process: a child forked but not
	// yet exec'd still runs Bin with pondctl's argv and environment.
	Bin         string `json:"bin,omitempty"`
	Parent      int    `json:"parent,omitempty"`
	ParentStart uint64 `json:"parent_start,omitempty"`
}

// LaunchEnv is the environment variable that carries an agent's launch
// nonce.
const LaunchEnv = "POND_LAUNCH_NONCE"

// settleTimeout bounds how long resolve waits for a forked child of a
// pondctl to exec.
const settleTimeout = 3 * time.Second

type journal struct {
	dir string
}

func (j journal) path(node string) string { return filepath.Join(j.dir, node+".json") }

func (j journal) write(e *entry) error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	p := j.path(e.Node)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

func (j journal) remove(node string) error {
	if err := os.Remove(j.path(node)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// all reads every entry, sorted by pool then index.
func (j journal) all() ([]*entry, error) {
	des, err := os.ReadDir(j.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var out []*entry
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(j.dir, de.Name()))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("journal: %w", err)
		}
		var e entry
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, fmt.Errorf("journal: %s: %w", de.Name(), err)
		}
		out = append(out, &e)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Pool != out[b].Pool {
			return out[a].Pool < out[b].Pool
		}
		return out[a].Index < out[b].Index
	})
	return out, nil
}

// pool returns the entries of one pool, sorted by index.
func (j journal) pool(name string) ([]*entry, error) {
	es, err := j.all()
	if err != nil {
		return nil, err
	}
	var out []*entry
	for _, e := range es {
		if e.Pool == name {
			out = append(out, e)
		}
	}
	return out, nil
}

// procStart returns the start time (clock ticks after boot, field 22 of
// /proc/PID/stat) and the state letter of a process.
func procStart(pid int) (uint64, byte, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	fields := strings.Fields(s[end+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	st, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return st, fields[0][0], nil
}

// alive reports whether the entry's process is running: same PID, same
// start time, and not a zombie.
func (e *entry) alive() bool {
	if e.PID <= 0 || e.StartTime == 0 {
		// An intent: pondctl may have died between starting the process
		// and recording its pid. The node's data directory, unique and on
		// its command line, finds it.
		if !e.resolve() {
			return false
		}
	}
	st, state, err := procStart(e.PID)
	if err != nil {
		return false
	}
	return st == e.StartTime && state != 'Z' && state != 'X'
}

// stop ends the entry's process: SIGTERM (the agent leaves the sea
// gracefully), then SIGKILL after timeout. It signals the process group
// (agents run in their own session), and only if the PID still belongs to
// the recorded process.
func (e *entry) stop(timeout time.Duration) {
	if !e.alive() {
		return
	}
	_ = syscall.Kill(-e.PID, syscall.SIGTERM)
	_ = syscall.Kill(e.PID, syscall.SIGTERM)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !e.alive() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e.alive() {
		_ = syscall.Kill(-e.PID, syscall.SIGKILL)
		_ = syscall.Kill(e.PID, syscall.SIGKILL)
	}
	for i := 0; i < 100 && e.alive(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// resolve finds the process of an entry whose pid was never recorded and
// records its pid and start time in e. It reports whether it found one.
//
// The process is the one whose environment holds the entry's nonce, or an
// agent with the entry's -data-dir. A process that may be a child forked by
// the entry's pondctl but not yet exec'd (it runs the same binary, started
// no earlier than that pondctl, and its argv is not yet an agent's) cannot
// be told apart from other pondctl processes: resolve waits for such
// processes to exec, up to settleTimeout, and looks again.
func (e *entry) resolve() bool {
	if e.DataDir == "" && e.Nonce == "" {
		return false
	}
	deadline := time.Now().Add(settleTimeout)
	// Once a process that may become the entry's was seen, the wait goes on
	// until the deadline: a scan that falls inside its exec can see it
	// neither as pondctl's binary nor with its new environment yet.
	waiting := false
	for {
		pid, unsettled := e.scan()
		if pid > 0 {
			st, state, err := procStart(pid)
			if err != nil || state == 'Z' || state == 'X' {
				return false
			}
			e.PID, e.StartTime = pid, st
			return true
		}
		waiting = waiting || unsettled
		if !waiting || time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scan looks once through /proc for the entry's process. It returns its
// pid, or 0 and whether some process may still become it.
func (e *entry) scan() (pid int, unsettled bool) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var bin os.FileInfo
	if e.Bin != "" && e.ParentStart != 0 {
		bin, _ = os.Stat(e.Bin)
	}
	self := os.Getpid()
	nonce := LaunchEnv + "=" + e.Nonce
	var found []int
	for _, d := range procs {
		p, err := strconv.Atoi(d.Name())
		if err != nil || p == self {
			continue
		}
		dir := "/proc/" + d.Name()
		if e.Nonce != "" {
			if env, err := os.ReadFile(dir + "/environ"); err == nil && hasEnv(env, nonce) {
				found = append(found, p)
				continue
			}
		}
		raw, err := os.ReadFile(dir + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if len(args) >= 2 && args[1] == "agent" {
			for i := 2; i+1 < len(args); i++ {
				if e.DataDir != "" && args[i] == "-data-dir" && args[i+1] == e.DataDir {
					found = append(found, p)
				}
			}
			continue
		}
		if bin != nil && !unsettled {
			if exe, err := os.Stat(dir + "/exe"); err == nil && os.SameFile(exe, bin) {
				if st, state, err := procStart(p); err == nil && st >= e.ParentStart && state != 'Z' && state != 'X' {
					unsettled = true
				}
			}
		}
	}
	return leader(found), unsettled
}

// leader returns the process of pids whose parent is not among them: the
// agent rather than the daemons it started, which inherit its environment.
func leader(pids []int) int {
	for _, p := range pids {
		pp, err := procParent(p)
		if err == nil && !slices.Contains(pids, pp) {
			return p
		}
	}
	return 0
}

// procParent returns the parent pid of a process (field 4 of
// /proc/PID/stat).
func procParent(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[end+1:])
	if end < 0 || len(fields) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	return strconv.Atoi(fields[1])
}

// hasEnv reports whether a NUL-separated environment holds kv.
func hasEnv(environ []byte, kv string) bool {
	for _, v := range strings.Split(string(environ), "\x00") {
		if v == kv {
			return true
		}
	}
	return false
}
