// Command pondctl provisions and operates HTCondor-family pools, flocks and
// pools on demand declared in HCL. "pondctl agent" is the node agent. Run
// under the name of one of HTCondor's commands (condor_q, condor_submit,
// ...: links "pondctl condor install-tools" makes), it is that command.
package main

import (
	"os"

	"github.com/pond-htc/pond/cmd/internal/cli"
)

func main() {
	os.Exit(cli.MainNamed(os.Args[0], os.Args[1:]))
}
