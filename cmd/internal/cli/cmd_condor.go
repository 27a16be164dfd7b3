package cli

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pond-htc/pond/condor/tools"
)

func (m *meta) cmdCondor(ctx context.Context, args []string) int {
	all := tools.Tools()
	if len(args) == 0 || all[args[0]] == nil {
		names := make([]string, 0, len(all))
		for n := range all {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(args) > 0 {
			fmt.Fprintf(m.stderr, "pondctl condor: unknown tool %q\n", args[0])
		}
		fmt.Fprintf(m.stderr, "Usage: pondctl condor <%s> [-pool ADDR] [options]\n", strings.Join(names, "|"))
		return 1
	}
	for _, a := range args[1:] {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprintln(m.stdout, tools.Usage(args[0]))
			return 0
		}
	}
	// The tools resolve relative paths (submit files, Iwd) against PWD:
	// the working directory, or the one -chdir names.
	env := append(slices.Clone(m.env), "PWD="+m.dir)
	return all[args[0]](ctx, args[1:], m.stdout, m.stderr, env)
}
