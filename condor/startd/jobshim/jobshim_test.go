package jobshim

import (
	"os/exec"
	"slices"
	"testing"
)

// TestDedupEnvAsOSExec: the job's environment is what os/exec would have
// given it: the last value of a name wins (the startd's TMPDIR over the
// job's), entries that are not NAME=VALUE stay, an entry with a NUL is
// refused.
func TestDedupEnvAsOSExec(t *testing.T) {
	tests := [][]string{
		{},
		{"A=1"},
		{"TMPDIR=/job", "PATH=/bin", "TMPDIR=/scratch", "HOME=/h"},
		{"A=1", "B=2", "A=3", "B=4", "C="},
		{"=C:=x", "=C:=y", "novalue", "", "X=a=b"},
		{"A=1", "B=\x00", "C=3"},
	}
	for _, env := range tests {
		want := (&exec.Cmd{Path: "/bin/true", Env: env}).Environ()
		got, err := dedupEnv(env)
		if !slices.Equal(got, want) {
			t.Errorf("dedupEnv(%q) = %q, want %q", env, got, want)
		}
		if nul := slices.ContainsFunc(env, func(kv string) bool { return indexByte(kv, 0, 0) >= 0 }); nul != (err != nil) {
			t.Errorf("dedupEnv(%q): error %v", env, err)
		}
	}
}
