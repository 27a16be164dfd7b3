// Package sshtest starts real OpenSSH servers for tests: several sshd, each
// on its own loopback address and port, with generated host keys and one
// authorized user key, for the current user. Every process started through
// them is killed, and every file removed, when the test ends.
//
// A test that needs sshd skips when /usr/sbin/sshd is missing, unless the
// environment variable CI is set, in which case it fails: CI installs
// Debian's openssh-server.
package sshtest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/overlay/internal/procenv"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHD is where Debian's openssh-server installs the server.
const SSHD = "/usr/sbin/sshd"

// MarkerEnv is set by every sshd of a Servers in the sessions it starts,
// to the Servers' directory, so that the processes they leave behind are
// found (Processes) and killed when the test ends.
const MarkerEnv = "POND_SSHTEST"

// Servers is a set of running sshd, one per host.
type Servers struct {
	// Hosts are the hosts' addresses, "127.0.0.N:PORT", in order.
	Hosts []string
	// User is the user the key logs in as: the current user.
	User string
	// KeyFile is the private key (OpenSSH format, mode 0600) authorized
	// on every host.
	KeyFile string
	// Signer is the same key.
	Signer ssh.Signer
	// KnownHosts is a known_hosts file listing every host's key.
	KnownHosts string
	// HostKeys are the hosts' public keys, in the order of Hosts.
	HostKeys []ssh.PublicKey
	// Dir holds the servers' files; sessions' processes carry it in
	// MarkerEnv.
	Dir string

	t     testing.TB
	opts  Options
	mu    sync.Mutex
	sshds []*sshd
}

type sshd struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  bytes.Buffer
}

// Options change the servers Start makes.
type Options struct {
	// Env is set in every session (sshd's SetEnv), after sshd's own
	// variables: PATH, say, to give the hosts fewer commands.
	Env map[string]string
}

// Start starts n sshd, on 127.0.0.2, 127.0.0.3, ... each with a port of
// its own, and stops them, kills what their sessions started and removes
// their files when the test ends.
func Start(t testing.TB, n int) *Servers {
	t.Helper()
	return StartWith(t, n, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, n int, opts Options) *Servers {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		testenv.SkipOrFailf(t, "sshtest: %s is missing: install Debian's openssh-server to run this test", SSHD)
	}
	if n < 1 || n > 200 {
		t.Fatalf("sshtest: %d hosts: want 1 to 200", n)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatalf("sshtest: current user: %v", err)
	}
	if os.Geteuid() == 0 {
		// sshd run as root insists on its privilege separation directory,
		// which the package's service creates at boot.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshtest: sshd's privilege separation directory: %v", err)
		}
	}
	dir := t.TempDir()
	s := &Servers{User: u.Username, Dir: dir, t: t, opts: opts}
	t.Cleanup(s.stopAll)

	s.KeyFile = filepath.Join(dir, "id_ed25519")
	s.Signer = GenerateKey(t, s.KeyFile)
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(s.Signer.PublicKey()), 0o600); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	var known bytes.Buffer
	for i := range n {
		hdir := filepath.Join(dir, fmt.Sprintf("host%d", i+1))
		if err := os.Mkdir(hdir, 0o700); err != nil {
			t.Fatalf("sshtest: %v", err)
		}
		hostKey := GenerateKey(t, filepath.Join(hdir, "ssh_host_ed25519_key"))
		ip := fmt.Sprintf("127.0.0.%d", i+2)
		addr, d, err := s.startOne(hdir, ip, authorized)
		if err != nil {
			t.Fatalf("sshtest: host %d: %v", i+1, err)
		}
		s.mu.Lock()
		s.sshds = append(s.sshds, d)
		s.mu.Unlock()
		s.Hosts = append(s.Hosts, addr)
		s.HostKeys = append(s.HostKeys, hostKey.PublicKey())
		known.WriteString(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostKey.PublicKey()) + "\n")
	}
	s.KnownHosts = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(s.KnownHosts, known.Bytes(), 0o600); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return s
}

// startOne starts the sshd of one host, retrying with another port when
// someone took the one it picked.
func (s *Servers) startOne(hdir, ip, authorized string) (string, *sshd, error) {
	var last error
	for range 10 {
		port, err := freePort(ip)
		if err != nil {
			return "", nil, err
		}
		conf := filepath.Join(hdir, "sshd_config")
		text := strings.Join([]string{
			"Port " + strconv.Itoa(port),
			"ListenAddress " + ip,
			"HostKey " + filepath.Join(hdir, "ssh_host_ed25519_key"),
			"PidFile " + filepath.Join(hdir, "sshd.pid"),
			"AuthorizedKeysFile " + authorized,
			"PermitRootLogin prohibit-password",
			"StrictModes no",
			"UsePAM no",
			"PubkeyAuthentication yes",
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"UseDNS no",
			"MaxSessions 32",
			"MaxStartups 64",
			"LogLevel INFO",
			"SetEnv " + strings.Join(s.setEnv(), " "),
			"",
		}, "\n")
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return "", nil, err
		}
		d, err := startSSHD(conf)
		if err == nil {
			return net.JoinHostPort(ip, strconv.Itoa(port)), d, nil
		}
		last = err
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	return "", nil, last
}

// setEnv returns the SetEnv entries of the servers, quoted for
// sshd_config.
func (s *Servers) setEnv() []string {
	env := []string{MarkerEnv + "=" + s.Dir}
	for _, k := range slices.Sorted(maps.Keys(s.opts.Env)) {
		env = append(env, k+"="+s.opts.Env[k])
	}
	for i, e := range env {
		env[i] = strconv.Quote(e)
	}
	return env
}

func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startSSHD starts sshd in the foreground and waits until it listens.
func startSSHD(conf string) (*sshd, error) {
	cmd := exec.Command(SSHD, "-D", "-e", "-f", conf)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	// A test binary that dies without its cleanups (a panic, a timeout)
	// takes its sshd with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", SSHD, err)
	}
	d := &sshd{cmd: cmd, done: make(chan struct{})}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.log.WriteString(line + "\n")
			d.mu.Unlock()
			if strings.Contains(line, "Server listening on") {
				once.Do(func() { close(listening) })
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	select {
	case <-listening:
		return d, nil
	case <-d.done:
		return nil, fmt.Errorf("sshd -f %s exited: %s", conf, strings.TrimSpace(d.logText()))
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-d.done
		return nil, fmt.Errorf("sshd -f %s did not listen within 20 s: %s", conf, strings.TrimSpace(d.logText()))
	}
}

func (d *sshd) logText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

func (d *sshd) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// Stop stops the sshd of host i (from 0), which then refuses connections;
// the sessions it had keep running.
func (s *Servers) Stop(i int) {
	s.mu.Lock()
	d := s.sshds[i]
	s.mu.Unlock()
	d.stop()
}

// CutConnections kills (SIGKILL) the sshd processes that serve the
// connections of host i (from 0), as a network cut or a crashed login
// node would end them: the client sees its connection drop, and what its
// sessions started keeps running. It returns the processes killed.
func (s *Servers) CutConnections(i int) []int {
	listener := s.PID(i)
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// PID (COMM) STATE PPID ...
		j := bytes.LastIndexByte(data, ')')
		if j < 0 || j+2 > len(data) {
			continue
		}
		if f := strings.Fields(string(data[j+2:])); len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	var killed []int
	for pid := range parent {
		under := false
		for q, n := parent[pid], 0; q > 1 && n < 64; q, n = parent[q], n+1 {
			if q == listener {
				under = true
				break
			}
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if under && strings.HasPrefix(string(comm), "sshd") {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
	}
	return killed
}

// PID returns the process ID of the sshd of host i (from 0), the one
// that listens; each connection has its own processes, its children.
func (s *Servers) PID(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sshds[i].cmd.Process.Pid
}

// Log returns what the sshd of host i (from 0) logged.
func (s *Servers) Log(i int) string {
	s.mu.Lock()
	d := s.sshds[i]
	s.mu.Unlock()
	return d.logText()
}

// Processes returns the PIDs of the live processes started through these
// servers' sessions (they carry MarkerEnv), zombies excepted.
func (s *Servers) Processes() ([]int, error) {
	return procenv.Processes(MarkerEnv + "=" + s.Dir)
}

// stopAll kills what the sessions left, then stops every sshd.
func (s *Servers) stopAll() {
	// A process in the middle of an exec (a session's "setsid cmd &" as
	// the session ends) shows no environment for an instant: only a few
	// empty scans in a row mean none is left.
	for empty, i := 0, 0; empty < 5 && i < 100; i++ {
		pids, err := s.Processes()
		if err != nil {
			break
		}
		if len(pids) == 0 {
			empty++
		} else {
			empty = 0
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.mu.Lock()
	ds := s.sshds
	s.mu.Unlock()
	for i, d := range ds {
		d.stop()
		if s.t.Failed() {
			s.t.Logf("sshtest: sshd of host %d logged:\n%s", i+1, d.logText())
		}
	}
}

// GenerateKey writes a new ed25519 private key to path (OpenSSH format,
// mode 0600) and returns it.
func GenerateKey(t testing.TB, path string) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return signer
}

// Agent starts a real ssh-agent holding the servers' key and returns its
// socket; it is stopped when the test ends. It skips (or fails under CI)
// when ssh-agent or ssh-add is missing.
func (s *Servers) Agent(t testing.TB) string {
	t.Helper()
	agentBin, err1 := exec.LookPath("ssh-agent")
	addBin, err2 := exec.LookPath("ssh-add")
	if err := errors.Join(err1, err2); err != nil {
		testenv.SkipOrFailf(t, "sshtest: ssh-agent/ssh-add missing (Debian's openssh-client): %v", err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := exec.Command(agentBin, "-D", "-a", sock)
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
	if err := cmd.Start(); err != nil {
		t.Fatalf("sshtest: start ssh-agent: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshtest: ssh-agent did not create %s", sock)
		}
		time.Sleep(10 * time.Millisecond)
	}
	add := exec.Command(addBin, s.KeyFile)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("sshtest: ssh-add %s: %v: %s", s.KeyFile, err, out)
	}
	return sock
}
