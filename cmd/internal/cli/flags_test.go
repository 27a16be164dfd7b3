package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestNoArgsCommands checks that the commands taking no arguments refuse
// one, naming it, before they read anything or call an agent; and that a
// bad flag fails the same way.
func TestNoArgsCommands(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range [][]string{
		{"cert", "create", "-name", "n"},
		{"sea", "factory"},
		{"sea", "relays"},
		{"sea", "failover"},
		{"token", "create", "-subject", "u", "-scope", "READ"},
		{"token", "list"},
		{"token", "prune"},
	} {
		for _, tc := range []struct {
			extra []string
			want  string
		}{
			{[]string{"extra"}, `Unexpected argument "extra"`},
			{[]string{"-nope"}, "flag provided but not defined: -nope"},
		} {
			args := append([]string{"-chdir=" + dir}, cmd...)
			args = append(args, tc.extra...)
			var out, errOut bytes.Buffer
			code := Run(context.Background(), args, strings.NewReader(""), &out, &errOut, nil)
			if code != 1 || !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("%q: exit %d, %q; want 1 and %q", args[1:], code, errOut.String(), tc.want)
			}
		}
	}
}
