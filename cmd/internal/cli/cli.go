// Package cli implements pondctl's command line: argument parsing, the
// subcommands, and how their results are printed.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/pond-htc/pond/overlay/agent"
)

// Main runs pondctl with args (without the program name) and returns the
// exit code.
func Main(args []string) int {
	return run(context.Background(), args, os.Stdout, os.Stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: pondctl <command> [args]")
		return 1
	}
	switch args[0] {
	case "agent":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return agent.Main(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "pondctl: unknown command %q\n", args[0])
	return 1
}
