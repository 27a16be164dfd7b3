// Package batchtest holds what the tests of batch-system sites share: a
// login node (an sshd, logging in as a user other than the one the tests
// run as) in front of a test cluster of any batch system.
package batchtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// LoginUser is the local user a LoginNode logs in as: not the user the
// tests run as, as on a cluster whose login node pond reaches over SSH.
// Every batch system's tests log in as it.
const LoginUser = "pondlogin"

// LoginNode is an sshd in front of a test cluster, as its login node: a
// session finds the cluster's commands (the cluster's environment is in
// its own), and logs in as LoginUser.
type LoginNode struct {
	// SSH is the sshd (one host).
	SSH *sshtest.Servers
	// Host and Port are where it listens.
	Host string
	Port int
	// User is LoginUser; UID and GID are its IDs.
	User     string
	UID, GID int
	// WorkDir is a directory of User's, for the site's work_dir: the
	// login node's and the execution hosts' (this machine's).
	WorkDir string
}

// Login is how a site reaches ln: as its User, with the sshd's key and
// known hosts.
func (ln *LoginNode) Login() *batch.Login {
	return &batch.Login{Host: ln.Host, Port: ln.Port, User: ln.User,
		PrivateKeyFile: ln.SSH.KeyFile, KnownHostsFile: ln.SSH.KnownHosts}
}

// StartLogin makes LoginUser when it does not exist yet, opens the
// directories open (mode 0755) to it, and starts an sshd whose sessions
// have env (KEY=VALUE each, the cluster's environment). name (the test
// helper's package) starts its messages. It skips (fails under CI)
// without root or useradd.
func StartLogin(t testing.TB, name string, env, open []string) *LoginNode {
	t.Helper()
	testenv.NeedRoot(t, name+": a login node's user is made with useradd")
	u, err := ensureUser(LoginUser)
	if err != nil {
		testenv.SkipOrFailf(t, "%s: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range open {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	srv := sshtest.StartWith(t, 1, sshtest.Options{Env: vars})
	// sshd reads the authorized keys as the user logging in.
	for _, d := range []string{filepath.Dir(srv.Dir), srv.Dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := os.Chmod(filepath.Join(srv.Dir, "authorized_keys"), 0o644); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	work, err := os.MkdirTemp("", name+"login")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chown(work, uid, gid); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(srv.Hosts[0])
	p, _ := strconv.Atoi(port)
	return &LoginNode{SSH: srv, Host: host, Port: p, User: u.Username, UID: uid, GID: gid, WorkDir: filepath.Join(work, "work")}
}

// ensureUser returns the local user name, made (without a home, with
// /bin/sh and a password that matches none, so that sshd lets it log in
// with a key) if it does not exist. Tests running side by side may both
// make it: the loser of that race finds it made.
func ensureUser(name string) (*user.User, error) {
	if u, err := user.Lookup(name); err == nil {
		return u, nil
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		return nil, errors.New("useradd is missing: the login node's user cannot be made")
	}
	out, err := exec.Command("useradd", "-M", "-s", "/bin/sh", "-p", "*", name).CombinedOutput()
	if u, lerr := user.Lookup(name); lerr == nil {
		return u, nil
	}
	return nil, fmt.Errorf("useradd %s: %v: %s", name, err, out)
}
