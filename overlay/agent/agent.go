// Package agent is the pond node agent run by "pondctl agent": serf
// membership in the sea, the node's HTTP API, and the daemons it hosts.
package agent

import (
	"context"
	"fmt"
	"io"
)

// Main runs the agent with command-line arguments args (without the
// "agent" word) until ctx is done or the agent is told to leave, and returns
// the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "pondctl agent: not built yet")
	return 1
}
