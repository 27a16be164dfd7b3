//go:build linux && s390x

package jobshim

// sysSetns is setns(2)'s system call number here (the syscall package has
// none).
const sysSetns = 339
