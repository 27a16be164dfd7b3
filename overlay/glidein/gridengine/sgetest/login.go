package sgetest

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
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// LoginUser is the local user a LoginNode logs in as: not the user the
// tests run as, as on a cluster whose login node pond reaches over SSH.
// It is the Slurm tests' login user too (slurmtest.LoginUser).
const LoginUser = "pondlogin"

// LoginNode is an sshd in front of a cell, as its login node: a session
// finds the cell's Grid Engine commands (the cell's Env is in its
// environment), and logs in as LoginUser.
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
	// login node's and the execution host's (this machine's).
	WorkDir string
}

// StartLogin makes LoginUser when it does not exist yet and starts an
// sshd whose sessions reach c. It skips (fails under CI) without root or
// useradd.
func StartLogin(t testing.TB, c *Cell) *LoginNode {
	t.Helper()
	testenv.NeedRoot(t, "sgetest: a login node's user is made with useradd")
	u, err := ensureUser(LoginUser)
	if err != nil {
		testenv.SkipOrFailf(t, "sgetest: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	env := map[string]string{}
	for _, kv := range c.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	srv := sshtest.StartWith(t, 1, sshtest.Options{Env: env})
	// sshd reads the authorized keys as the user logging in.
	for _, d := range []string{filepath.Dir(srv.Dir), srv.Dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatalf("sgetest: %v", err)
		}
	}
	if err := os.Chmod(filepath.Join(srv.Dir, "authorized_keys"), 0o644); err != nil {
		t.Fatalf("sgetest: %v", err)
	}
	work, err := os.MkdirTemp("", "sgelogin")
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
