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
		{"sea", "members"}, {"sea", "keys"}, {"sea", "query"},
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
