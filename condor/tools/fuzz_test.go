package tools

import (
	"strings"
	"testing"
)

// FuzzParseArgs checks that no argument list makes the tools' argument
// parser panic, and that what it accepts keeps every positional argument.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"-pool 127.0.0.1:9618 -af Owner Cmd 12", "-constraint Owner==\"a\" -l", "-json -nobatch 1.0 alice",
		"-af", "-pool", "-limit 3 -match", "-reason x -all"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Fields(s)
		c, err := parseArgs(args, map[string]bool{"limit": true, "reason": true}, []string{"POND_POOL_ADDR=x:1"})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for _, r := range c.rest {
			if strings.HasPrefix(r, "-") && r != "-" {
				t.Fatalf("option %q left positional", r)
			}
		}
	})
}
