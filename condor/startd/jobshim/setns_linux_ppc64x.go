//go:build linux && (ppc64 || ppc64le)

package jobshim

// sysSetns is setns(2)'s system call number here (the syscall package has
// none).
const sysSetns = 350
