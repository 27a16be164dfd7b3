package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/planner/config"
)

// newFlagSet returns a flag set that reports errors to stderr.
func (m *meta) newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.stderr)
	fs.Usage = func() {
		fmt.Fprintf(m.stderr, "Usage: pondctl %s\n\nOptions:\n", usage)
		fs.PrintDefaults()
	}
	fs.Var(noColorFlag{m}, "no-color", "print without colours")
	return fs
}

// parseNoArgs parses the flags of a command that takes no arguments and
// refuses one that is left. False means it failed and said why (exit 1).
func (m *meta) parseNoArgs(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		m.errorf("Unexpected argument %q", fs.Arg(0))
		return false
	}
	return true
}

// noColorFlag is -no-color, which every command takes.
type noColorFlag struct{ m *meta }

func (f noColorFlag) String() string { return "false" }

func (f noColorFlag) IsBoolFlag() bool { return true }

func (f noColorFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	if v {
		f.m.color = false
	}
	return nil
}

// varFlags holds -var and -var-file in command-line order.
type varFlags struct {
	args []config.VarArg
}

func (v *varFlags) register(fs *flag.FlagSet) {
	fs.Var(config.VarFlag(&v.args), "var", "set a variable: -var 'NAME=VALUE' (repeatable)")
	fs.Var(config.VarFileFlag(&v.args), "var-file", "load variable values from a .pondvars file (repeatable)")
}

// lockFlags are -lock and -lock-timeout.
type lockFlags struct {
	lock    bool
	timeout time.Duration
}

func (l *lockFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.lock, "lock", true, "lock the state while the command runs")
	fs.DurationVar(&l.timeout, "lock-timeout", 0, "how long to wait for a state lock held by someone else")
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// subcommand is one word of a command that has several ("pondctl state
// list").
type subcommand struct {
	name string
	run  func(ctx context.Context, args []string) int
}

// subcommand runs the one of subs that args[0] names, with the rest of
// args; with no word, or an unknown one, it prints the usage and fails, and
// asked for help it prints the usage and succeeds.
func (m *meta) subcommand(ctx context.Context, command string, args []string, subs []subcommand) int {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	usage := fmt.Sprintf("Usage: pondctl %s <%s> [options] [args]", command, strings.Join(names, "|"))
	if len(args) == 0 {
		fmt.Fprintln(m.stderr, usage)
		return 1
	}
	if isHelp(args[0]) {
		fmt.Fprintln(m.stdout, usage)
		return 0
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, args[1:])
		}
	}
	last := len(names) - 1
	return m.errorf("Unknown %s subcommand %q: use %s or %s", command, args[0], strings.Join(names[:last], ", "), names[last])
}
