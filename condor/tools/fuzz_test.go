package tools

import (
	"strings"
	"testing"
)

// FuzzParseArgs checks that no argument list makes the tools' argument
// parser panic, and that what it accepts keeps every positional argument.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"-pool 127.0.0.1:9618 -af Owner Cmd 12", "-constraint Owner==\"a\" -l", "-json -nobatch 1.0 alice",
		"-af", "-pool", "-limit 3 -match", "-reason x -all", "-af:jh Owner -format %d ClusterId", "-totals -allusers -const x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Fields(s)
		c, err := parseArgs(args, specQ, []string{"POND_POOL_ADDR=x:1"}, true)
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

// FuzzPoolFromEnv checks that no COLLECTOR_HOST (a host list, a sinful
// string, macros) given in the environment makes the pool lookup panic,
// and that the address it finds is one address.
func FuzzPoolFromEnv(f *testing.F) {
	for _, s := range []string{"cm:9618", "<10.0.0.1:9618?sock=collector>", "a:1, b:2", "$(CONDOR_HOST):9618", "$(X", "<", "?"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsAny(s, "\x00\n\r") {
			return
		}
		addr, err := poolFromEnv([]string{"CONDOR_CONFIG=ONLY_ENV", "_CONDOR_CONDOR_HOST=cm:1", "_CONDOR_COLLECTOR_HOST=" + s})
		if err != nil {
			return
		}
		if strings.ContainsAny(addr, "<>?, \t") {
			t.Fatalf("poolFromEnv with COLLECTOR_HOST %q = %q", s, addr)
		}
	})
}
