package sshtest_test

import (
	"strings"
	"testing"

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
