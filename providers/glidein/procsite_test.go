package glidein

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	site "github.com/pond-htc/pond/overlay/glidein"
)

// Environment of a process site's glideins.
const (
	// glideinIDEnv carries the glidein's ID; with siteTagEnv it finds the
	// glidein's process in /proc whatever its state.
	glideinIDEnv = "POND_TEST_GLIDEIN_ID"
	siteTagEnv   = "POND_TEST_SITE_TAG"
)

// procSite is a real glidein site on this machine: each glidein is a
// process it starts (in a session of its own, so that it outlives the
// process that submitted it), with a directory DIR/ID that is its marker.
// Submit makes the marker (mkdir, so a second Submit of an ID fails with
// ErrDuplicate) and records the submitter before it starts anything;
// List tells a glidein's state from the marker and from /proc, where the
// glidein's process carries its ID and the site's tag in its environment,
// as `ps` on an SSH host would.
type procSite struct {
	dir string
	tag string
	// role is the test role of the glideins' processes (roleEnv).
	role string
	// fresh holds, by ID, the Request.New of each Submit.
	fresh sync.Map
}

func newProcSite(dir, role string) *procSite {
	return &procSite{dir: dir, tag: randomText(10), role: role}
}

func (s *procSite) Kind() string { return "process" }

func (s *procSite) Check(ctx context.Context) error {
	fi, err := os.Stat(s.dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", s.dir)
	}
	return nil
}

func (s *procSite) marker(id string) string { return filepath.Join(s.dir, id) }

func (s *procSite) Submit(ctx context.Context, req site.Request) (site.Glidein, error) {
	if !validID(req.ID) {
		return site.Glidein{}, fmt.Errorf("invalid glidein id %q", req.ID)
	}
	s.fresh.Store(req.ID, req.New)
	m := s.marker(req.ID)
	if err := os.Mkdir(m, 0o700); errors.Is(err, fs.ErrExist) {
		return site.Glidein{}, site.ErrDuplicate
	} else if err != nil {
		return site.Glidein{}, err
	}
	// The lock is held from here until the glidein's process has written
	// its pid file: by this process, and by the child it forks (fd 3),
	// whose shell lets it go before it execs the glidein.
	lock, err := os.OpenFile(filepath.Join(m, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return site.Glidein{}, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return site.Glidein{}, err
	}
	run := filepath.Join(m, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		return site.Glidein{}, err
	}
	for name, data := range req.Files {
		if strings.ContainsRune(name, '/') {
			return site.Glidein{}, fmt.Errorf("file name %q", name)
		}
		if err := os.WriteFile(filepath.Join(run, name), data, 0o600); err != nil {
			return site.Glidein{}, err
		}
	}
	args := make([]string, len(req.Args))
	for i, a := range req.Args {
		args[i] = strings.ReplaceAll(a, "{dir}", run)
	}
	log, err := os.OpenFile(filepath.Join(m, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return site.Glidein{}, err
	}
	defer log.Close()
	pidFile := filepath.Join(m, "pid")
	cmd := exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec 3>&- && exec "$@"`, pidFile, req.Binary}, args...)...)
	cmd.ExtraFiles = []*os.File{lock}
	cmd.Dir = run
	cmd.Env = append(os.Environ(), glideinIDEnv+"="+req.ID, siteTagEnv+"="+s.tag, roleEnv+"="+s.role)
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return site.Glidein{}, err
	}
	go cmd.Wait()
	for range 200 {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	host, _ := os.Hostname()
	return site.Glidein{ID: req.ID, SiteID: "pid:" + strconv.Itoa(cmd.Process.Pid), Host: host, State: site.Running, Submitted: time.Now()}, nil
}

// procs returns the pids of the site's glidein processes by ID: those
// whose environment holds the site's tag.
func (s *procSite) procs() map[string][]int {
	out := map[string][]int{}
	// A process that ends while /proc is read may cut the listing short
	// with an error: what was read is kept.
	des, _ := os.ReadDir("/proc")
	tag := []byte(siteTagEnv + "=" + s.tag)
	for _, d := range des {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err != nil || !hasVar(env, tag) {
			continue
		}
		if st, err := procState(pid); err != nil || st == 'Z' || st == 'X' {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if id, ok := bytes.CutPrefix(kv, []byte(glideinIDEnv+"=")); ok {
				out[string(id)] = append(out[string(id)], pid)
			}
		}
	}
	// A glidein's process is the one whose parent is not among its
	// own: not the children it runs (the shell's mv, an agent's
	// daemons), which inherit its environment.
	for id, pids := range out {
		var leaders []int
		for _, pid := range pids {
			if f, err := statFields(pid); err == nil {
				if pp, err := strconv.Atoi(f[1]); err == nil && !slices.Contains(pids, pp) {
					leaders = append(leaders, pid)
				}
			}
		}
		out[id] = leaders
	}
	return out
}

func hasVar(env, kv []byte) bool {
	for _, x := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(x, kv) {
			return true
		}
	}
	return false
}

func (s *procSite) List(ctx context.Context, prefix string) ([]site.Glidein, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	procs := s.procs()
	host, _ := os.Hostname()
	var out []site.Glidein
	for _, d := range des {
		id := d.Name()
		if !d.IsDir() || !strings.HasPrefix(id, prefix) {
			continue
		}
		m := s.marker(id)
		g := site.Glidein{ID: id, Host: host}
		if fi, err := d.Info(); err == nil {
			g.Submitted = fi.ModTime()
		}
		if data, err := os.ReadFile(filepath.Join(m, "pid")); err == nil {
			g.SiteID = "pid:" + strings.TrimSpace(string(data))
		}
		_, cancelled := os.Stat(filepath.Join(m, "cancelled"))
		switch {
		case len(procs[id]) > 0 || s.execing(m, id):
			// Running, even if a Cancel was cut short.
			g.State = site.Running
		case cancelled == nil:
			g.State = site.Cancelled
		case g.SiteID != "":
			g.State, g.Reason = site.Failed, "its process exited"
			if data, err := os.ReadFile(filepath.Join(m, "log")); err == nil && len(bytes.TrimSpace(data)) > 0 {
				lines := strings.Split(strings.TrimSpace(string(data)), "\n")
				g.Reason += ": " + lines[len(lines)-1]
			}
		case s.starting(m):
			g.State = site.Queued
		default:
			g.State, g.Reason = site.Failed, "its submitter died before starting it"
		}
		out = append(out, g)
	}
	return out, nil
}

// execing reports whether the process of the pid file in marker m is
// alive and either is the glidein's or cannot show its environment yet:
// /proc/PID/environ reads empty while the shell execs the glidein.
func (s *procSite) execing(m, id string) bool {
	data, err := os.ReadFile(filepath.Join(m, "pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return false
	}
	if st, err := procState(pid); err != nil || st == 'Z' || st == 'X' {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err != nil || len(env) == 0 || hasVar(env, []byte(glideinIDEnv+"="+id))
}

// starting reports whether the glidein of marker m may still start: its
// lock is held, by the submitter or by the process it forked, which lets
// it go once it has written its pid file. A glidein whose lock is free
// and which has no pid file never starts.
func (s *procSite) starting(m string) bool {
	f, err := os.Open(filepath.Join(m, "lock"))
	if err != nil {
		// Not made yet: the submitter is between mkdir and the lock.
		return time.Since(modTime(m)) < 5*time.Second
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	// Free: started (pid file written before the lock was let go), or
	// never to start.
	_, err = os.Stat(filepath.Join(m, "pid"))
	return err == nil
}

func modTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

func (s *procSite) Cancel(ctx context.Context, id string) error {
	m := s.marker(id)
	if _, err := os.Stat(m); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(m, "cancelled"), nil, 0o600); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	sig := syscall.SIGTERM
	for {
		pids := s.procs()[id]
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sig = syscall.SIGKILL
		}
		for _, pid := range pids {
			_ = syscall.Kill(-pid, sig)
			_ = syscall.Kill(pid, sig)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return os.RemoveAll(filepath.Join(m, "run"))
}

func procState(pid int) (byte, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return f[0][0], nil
}

// statFields returns the fields of /proc/PID/stat after the command name:
// field 3 (state) first.
func statFields(pid int) ([]string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return f, nil
}

var _ site.Site = (*procSite)(nil)
