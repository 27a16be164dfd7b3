package sgetest

import (
	"testing"

	"github.com/pond-htc/pond/overlay/glidein/batch/batchtest"
)

// LoginUser is the local user a LoginNode logs in as (batchtest.LoginUser).
const LoginUser = batchtest.LoginUser

// LoginNode is an sshd in front of a cell, as its login node: a session
// finds the cell's Grid Engine commands (the cell's Env is in its
// environment), and logs in as LoginUser.
type LoginNode = batchtest.LoginNode

// StartLogin makes LoginUser when it does not exist yet and starts an
// sshd whose sessions reach c. It skips (fails under CI) without root or
// useradd.
func StartLogin(t testing.TB, c *Cell) *LoginNode {
	t.Helper()
	return batchtest.StartLogin(t, "sgetest", c.Env(), nil)
}
