//go:build linux && (mips64 || mips64le)

package jobshim

// sysSetns is setns(2)'s system call number here (the syscall package has
// none).
const sysSetns = 5303
