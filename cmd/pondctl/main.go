// Command pondctl provisions and operates HTCondor-family pools, flocks and
// pools on demand declared in HCL. "pondctl agent" is the node agent.
package main

import (
	"os"

	"github.com/pond-htc/pond/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
