package cli

import (
	"fmt"

	"github.com/pond-htc/pond/condor/classad/evaltool"
)

func (m *meta) cmdClassad(args []string) int {
	if len(args) == 0 || args[0] != "eval" {
		fmt.Fprintln(m.stderr, "Usage: pondctl classad eval [-quiet] [-my-file F] [-target-file F] AD-OR-EXPR...")
		return 1
	}
	return evaltool.Run(args[1:], m.stdout, m.stderr)
}
