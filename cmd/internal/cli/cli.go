// Package cli implements pondctl's command line: argument parsing, the
// subcommands, and how their results are printed.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/awssdk"
)

const usage = `Usage: pondctl [-chdir=DIR] <command> [args]

Main commands:
  init          Prepare the working directory
  validate      Check whether the configuration is valid
  plan          Show the changes the configuration requires
  apply         Create or update pools and ponds
  destroy       Return every node to the sea or terminate it

Other commands:
  fmt           Rewrite configuration files in the canonical format
  force-unlock  Remove a stuck state lock
  history       Who changed what: the commands that wrote the state
  import        Bring an existing pool under pond's management
  output        Show output values from the state
  refresh       Update the state to match what is running
  show          Show the current state or a saved plan
  state         Advanced state management (list, show, rm, mv, pull, push)
  test          Run the *.pondtest.hcl tests against real pools, then destroy them
  version       Show the pond version

Sea, pools and nodes:
  agent         Run a node agent
  sea           Members of the sea, tree queries, gossip keys
  token         Tokens of the working directory: create, list, revoke, prune
  cert          Certificates of the sea's CA for agents: create, factory
  condor        HTCondor-style tools: submit, q, status, rm, hold, release, history, wait, config_val,
                reconfig; client-config, install-tools (condor_* command names)
  classad       Evaluate ClassAd expressions (classad eval)
  metrics       Prometheus scraping of a pool's agents: targets (file_sd, token, CA)
`

// Main runs pondctl with args (without the program name) and returns the
// exit code.
func Main(args []string) int {
	// Writes to a closed pipe (pondctl plan | head) return an error instead
	// of killing the process, so locks are always released.
	signal.Ignore(syscall.SIGPIPE)
	return Run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr, os.Environ())
}

// Run runs pondctl with explicit streams and environment.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "pondctl: %v\n", err)
		return 1
	}
	m := &meta{dir: wd, stdin: stdin, stdout: stdout, stderr: stderr, env: env}
	m.color = isTerminal(stdout) && m.getenv("NO_COLOR") == ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		a := args[0]
		switch {
		case strings.HasPrefix(a, "-chdir="):
			dir := strings.TrimPrefix(a, "-chdir=")
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(wd, dir)
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				fmt.Fprintf(stderr, "pondctl: -chdir: %s is not a directory\n", dir)
				return 1
			}
			m.dir = dir
		case isHelp(a):
			fmt.Fprint(stdout, usage)
			return 0
		case a == "-v" || a == "-version" || a == "--version":
			return m.cmdVersion(nil)
		case a == "-no-color":
			m.color = false
		default:
			fmt.Fprintf(stderr, "pondctl: unknown global option %q\n\n%s", a, usage)
			return 1
		}
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 1
	}
	cmd, rest := args[0], args[1:]
	if cmd != "agent" {
		tuneGC()
		closeLog, ok := m.setUpLogging()
		if !ok {
			return 1
		}
		defer closeLog()
		// What the AWS SDK says (the S3 backend loading its credentials)
		// goes to pond's log, at POND_LOG's level, not to the terminal.
		ctx = awssdk.NewContext(ctx, m.logger)
	}
	switch cmd {
	case "agent":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		logs, closeLog, err := agentLogging(m.getenv, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "pondctl agent: %v\n", err)
			return 1
		}
		defer closeLog()
		return agent.Main(ctx, rest, stdout, stderr, logs)
	case "init":
		return m.cmdInit(ctx, rest)
	case "validate":
		return m.cmdValidate(ctx, rest)
	case "plan":
		return m.cmdPlan(ctx, rest)
	case "apply":
		return m.cmdApply(ctx, rest, "apply")
	case "destroy":
		return m.cmdApply(ctx, rest, "destroy")
	case "refresh":
		return m.cmdApply(ctx, rest, "refresh")
	case "fmt":
		return m.cmdFmt(rest)
	case "version":
		return m.cmdVersion(rest)
	case "show":
		return m.cmdShow(ctx, rest)
	case "output":
		return m.cmdOutput(ctx, rest)
	case "import":
		return m.cmdImport(ctx, rest)
	case "history":
		return m.cmdHistory(ctx, rest)
	case "force-unlock":
		return m.cmdForceUnlock(ctx, rest)
	case "state":
		return m.cmdState(ctx, rest)
	case "test":
		return m.cmdTest(ctx, rest)
	case "sea":
		return m.cmdSea(ctx, rest)
	case "token":
		return m.cmdToken(ctx, rest)
	case "cert":
		return m.cmdCert(ctx, rest)
	case "classad":
		return m.cmdClassad(rest)
	case "condor":
		return m.cmdCondor(ctx, rest)
	case "metrics":
		return m.cmdMetrics(ctx, rest)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "pondctl: unknown command %q\n\n%s", cmd, usage)
	return 1
}

// tuneGC makes the garbage collector less eager for pondctl's short-lived
// commands, which allocate much and keep little: a plan of 10,000 resources
// spends a third of its time collecting at the default setting. The soft
// limit keeps the heap under the 500 MiB budget. The long-running agent
// keeps the defaults.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(450 << 20)
	}
}

// isHelp reports whether a command-line argument asks for help.
func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }
