package slurmtest

import (
	"path/filepath"
	"testing"

	"github.com/pond-htc/pond/overlay/glidein/batch/batchtest"
)

// LoginUser is the local user a LoginNode logs in as (batchtest.LoginUser).
const LoginUser = batchtest.LoginUser

// LoginNode is an sshd in front of a cluster, as its login node: a
// session finds the cluster's Slurm commands (SLURM_CONF and a Shared
// test's partition are in its environment), and logs in as LoginUser.
type LoginNode = batchtest.LoginNode

// StartLogin makes LoginUser when it does not exist yet, opens the
// cluster's configuration and munge socket to it, and starts an sshd
// whose sessions reach c. It skips (fails under CI) without root or
// useradd.
func StartLogin(t testing.TB, c *Cluster) *LoginNode {
	t.Helper()
	// The other user reads slurm.conf and talks to munged (the key stays
	// root's), and its jobs' scripts are in the nodes' spool directories.
	open := []string{c.Dir, filepath.Dir(c.MungeSocket), filepath.Join(c.Dir, "spool")}
	spools, _ := filepath.Glob(filepath.Join(c.Dir, "spool", "*"))
	return batchtest.StartLogin(t, "slurmtest", c.Env(), append(open, spools...))
}
