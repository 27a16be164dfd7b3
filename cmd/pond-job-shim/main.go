// Command pond-job-shim is the supervisor a startd runs each job under
// (condor/startd/jobshim), alone. The agent's own binary serves as well,
// but this one, linking nothing else, starts in a fraction of the CPU
// time: a startd uses it when it lies beside the agent's binary, as
// `make build` puts it. The startd starts it; it does nothing run by
// hand.
package main

import (
	"fmt"
	"os"

	// Its init runs the supervisor when the program is started under
	// jobshim.Name, and never returns.
	_ "github.com/pond-htc/pond/condor/startd/jobshim"
)

func main() {
	fmt.Fprintln(os.Stderr, "pond-job-shim: the supervisor of a startd's jobs, started by the startd only")
	os.Exit(2)
}
