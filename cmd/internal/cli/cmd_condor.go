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
		usage := fmt.Sprintf("Usage: pondctl condor <%s> [-pool ADDR] [options]\n", strings.Join(names, "|"))
		if len(args) > 0 && isHelp(args[0]) {
			fmt.Fprint(m.stdout, usage)
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(m.stderr, "pondctl condor: unknown tool %q\n", args[0])
		}
		fmt.Fprint(m.stderr, usage)
		return 1
	}
	for _, a := range args[1:] {
		if isHelp(a) {
			fmt.Fprintln(m.stdout, tools.Usage(args[0]))
			return 0
		}
	}
	// The tools resolve relative paths (submit files, Iwd) against PWD:
	// the working directory, or the one -chdir names.
	env := append(slices.Clone(m.env), "PWD="+m.dir)
	return all[args[0]](ctx, args[1:], m.stdout, m.stderr, env)
}
