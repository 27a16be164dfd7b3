package sshtest_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// TestServers logs in to every host with the key, checking its host key
// against the known_hosts file, and runs a command that carries the
// marker; after Stop, the host refuses connections.
func TestServers(t *testing.T) {
	s := sshtest.Start(t, 2)
	cb, err := knownhosts.New(s.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	for i, addr := range s.Hosts {
		c, err := ssh.Dial("tcp", addr, &ssh.ClientConfig{
			User:            s.User,
			Auth:            []ssh.AuthMethod{ssh.PublicKeys(s.Signer)},
			HostKeyCallback: cb,
		})
		if err != nil {
			t.Fatalf("host %d (%s): %v\n%s", i, addr, err, s.Log(i))
		}
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		out, err := sess.Output("echo $" + sshtest.MarkerEnv)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != s.Dir {
			t.Errorf("host %d: %s = %q, want %q", i, sshtest.MarkerEnv, got, s.Dir)
		}
		c.Close()
	}
	s.Stop(1)
	if _, err := ssh.Dial("tcp", s.Hosts[1], &ssh.ClientConfig{
		User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(s.Signer)}, HostKeyCallback: cb,
	}); err == nil {
		t.Errorf("host 1 still answers after Stop")
	}
}

// TestCleanup: what a session left running, detached, is killed when the
// test ends, and the servers' files are removed.
func TestCleanup(t *testing.T) {
	var pid int
	var dir string
	t.Run("inner", func(t *testing.T) {
		s := sshtest.Start(t, 1)
		dir = s.Dir
		cb, err := knownhosts.New(s.KnownHosts)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ssh.Dial("tcp", s.Hosts[0], &ssh.ClientConfig{User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(s.Signer)}, HostKeyCallback: cb})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		out, err := sess.Output("setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
		if err != nil {
			t.Fatal(err)
		}
		if pid, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
			t.Fatalf("pid %q: %v", out, err)
		}
		if pids, err := s.Processes(); err != nil || len(pids) == 0 {
			t.Errorf("Processes: %v, %v", pids, err)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d left by a session still runs after the test", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s remains (%v)", dir, err)
	}
}
