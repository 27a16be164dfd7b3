//go:build linux && amd64

package jobshim

// sysSetns is setns(2)'s system call number here (the syscall package has
// none).
const sysSetns = 308
