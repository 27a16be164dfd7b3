package cli

import (
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
