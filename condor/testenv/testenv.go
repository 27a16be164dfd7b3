// Package testenv decides what a test does when a part of its environment
// is missing: a real component (HTCondor's Python bindings, moto, sshd,
// Slurm, serf), a privilege (root) or a kernel feature (namespaces).
//
// On a developer's machine such a test skips, saying what to install. In
// continuous integration (CI set in the environment, as .ci/run does) it
// fails instead: a green run then means that every part of the product
// was tested, not that the parts whose components were missing were left
// out. The few skips that are right on every machine (-short, figures
// regenerated on demand) call t.Skip directly and are listed in .ci/skips.
package testenv

import (
	"fmt"
	"os"
	"strings"
)

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Log(args ...any)
	Skip(args ...any)
	Fatal(args ...any)
}

// CI reports whether the tests run in continuous integration: CI is set
// to anything but "", "0" or "false".
func CI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "0", "false":
		return false
	}
	return true
}

// SkipOrFail skips the test because of reason (what is missing and how to
// get it), or fails it when CI is set.
func SkipOrFail(t TB, reason string) {
	t.Helper()
	if CI() {
		t.Fatal(reason + " (CI is set: this fails instead of skipping)")
		return
	}
	t.Skip(reason)
}

// LogOrFail is SkipOrFail for a check that is a part of a test: the test
// logs that the check did not run (because of reason) and goes on, or
// fails when CI is set.
func LogOrFail(t TB, reason string) {
	t.Helper()
	if CI() {
		t.Fatal(reason + " (CI is set: this fails instead of leaving the check out)")
		return
	}
	t.Log(reason)
}

// SkipOrFailf is SkipOrFail with a formatted reason.
func SkipOrFailf(t TB, format string, args ...any) {
	t.Helper()
	SkipOrFail(t, fmt.Sprintf(format, args...))
}

// NeedRoot skips the test unless it runs as root, or fails it when CI is
// set; why says what needs root.
func NeedRoot(t TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, why+": run the tests as root")
	}
}
