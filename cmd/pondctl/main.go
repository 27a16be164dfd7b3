// Command pondctl provisions and operates HTCondor-family pools, flocks and
// pools on demand declared in HCL. "pondctl agent" is the node agent. Run
// under the name of one of HTCondor's commands (condor_q, condor_submit,
// ...: links "pondctl condor install-tools" makes), it is that command.
package main

import (
	"fmt"
	"os"

	"github.com/pond-htc/pond/cmd/internal/cli"
	"github.com/pond-htc/pond/condor/inherit"
)

func main() {
	// Files the caller left open (a shell's descriptor 9, a runner's
	// pipe) stay this process's, and reach no agent, supervisor or job.
	if err := inherit.Seal(); err != nil {
		fmt.Fprintln(os.Stderr, "pondctl:", err)
		os.Exit(1)
	}
	os.Exit(cli.MainNamed(os.Args[0], os.Args[1:]))
}
