package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestEveryCommandTakesNoColor checks that -no-color is accepted wherever a
// user may add it, as Terraform accepts it: the command parses past it and
// stops at the next, unknown, flag.
func TestEveryCommandTakesNoColor(t *testing.T) {
	for _, cmd := range [][]string{
		{"init"}, {"validate"}, {"plan"}, {"apply"}, {"destroy"}, {"refresh"}, {"show"}, {"output"},
		{"import"}, {"fmt"}, {"force-unlock"}, {"version"},
		{"state", "list"}, {"state", "show"}, {"state", "rm"}, {"state", "mv"}, {"state", "pull"}, {"state", "push"},
		{"sea", "members"}, {"sea", "keys"}, {"sea", "query"}, {"sea", "relays"},
	} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append(append([]string(nil), cmd...), "-no-color", "-not-a-flag")
			code := Run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, []string{"PWD=" + t.TempDir()})
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if !strings.Contains(stderr.String(), "flag provided but not defined: -not-a-flag") {
				t.Errorf("stderr:\n%s", stderr.String())
			}
		})
	}
}

// TestCommandGroupsHelp checks that a command with subcommands prints its
// usage on stdout and exits 0 when asked for help, and exits 1 with the
// usage on stderr when given none.
func TestCommandGroupsHelp(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		out  string // the stream holding the usage
	}{
		{[]string{"sea", "-h"}, 0, "stdout"},
		{[]string{"sea", "--help"}, 0, "stdout"},
		{[]string{"sea"}, 1, "stderr"},
		{[]string{"state", "-help"}, 0, "stdout"},
		{[]string{"state"}, 1, "stderr"},
		{[]string{"condor", "-h"}, 0, "stdout"},
		{[]string{"condor", "frobnicate"}, 1, "stderr"},
		{[]string{"-h"}, 0, "stdout"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr, []string{"PWD=" + t.TempDir()})
			if code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			got := map[string]string{"stdout": stdout.String(), "stderr": stderr.String()}[tt.out]
			if !strings.Contains(got, "Usage: pondctl") {
				t.Errorf("%s lacks the usage:\nstdout:\n%s\nstderr:\n%s", tt.out, stdout.String(), stderr.String())
			}
		})
	}
}
