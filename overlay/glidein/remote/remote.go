// Package remote runs a batch system's commands for a glidein site: on
// this machine (Local), or on a cluster's login node over one multiplexed
// SSH connection (SSH), whose host key is checked against a known_hosts
// file. A site speaks to its batch system (sbatch, qsub, bsub) through a
// Runner and does not care which.
//
// A command whose connection went away while it ran fails with ErrLost:
// whether it ran, and what it said, are unknown. A site then finds out
// from the batch system itself (the job's name), never by running the
// command again blindly.
package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Cmd is one command to run.
type Cmd struct {
	// Path is the program: a path, or a name looked up in PATH.
	Path string
	// Args are its arguments, without the program's name.
	Args []string
	// Env is added to its environment (NAME=VALUE).
	Env []string
	// Stdin is its standard input; nil for none.
	Stdin io.Reader
}

// Runner runs commands: on this machine or on a login node.
type Runner interface {
	// Run runs c and returns its standard output and standard error.
	// A command that ran and failed gives an *ExitError (standard error
	// holds what it said); one whose connection was lost meanwhile an
	// error wrapping ErrLost.
	Run(ctx context.Context, c Cmd) (stdout, stderr []byte, err error)
	// Where says where the commands run, for messages: "this machine",
	// "login node user@host:22".
	Where() string
	// Close ends the connection, if any. Run may connect again.
	Close() error
}

// Errors of Run and of connecting, wrapped with the host's name.
var (
	// ErrLost: the connection went away while the command ran.
	ErrLost = errors.New("connection lost while the command ran: whether it ran is unknown")
	// ErrUnknownHost: the host's key is not in the known_hosts file.
	ErrUnknownHost = errors.New("host key unknown")
	// ErrHostKeyChanged: the host presented a key other than the one the
	// known_hosts file has for it, which may be an attack.
	ErrHostKeyChanged = errors.New("host key changed")
	// ErrKeyRejected: the host refused the key.
	ErrKeyRejected = errors.New("key rejected")
	// ErrUnreachable: no SSH connection could be made to the host.
	ErrUnreachable = errors.New("host unreachable")
)

// ExitError is a command that ran and failed.
type ExitError struct {
	// Status is its exit status; -1 when a signal ended it.
	Status int
	// NotFound reports that the program was not found (exit status 127
	// of a remote shell, or exec's ErrNotFound here).
	NotFound bool
	err      error
}

func (e *ExitError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.Status)
}

func (e *ExitError) Unwrap() error { return e.err }

// IsNotFound reports whether err says that the program was not found.
func IsNotFound(err error) bool {
	var ee *ExitError
	if errors.As(err, &ee) && ee.NotFound {
		return true
	}
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist)
}

// Local runs commands on this machine, in this process's environment
// with Cmd.Env added.
type Local struct{}

var _ Runner = Local{}

// Run implements Runner.
func (Local) Run(ctx context.Context, c Cmd) ([]byte, []byte, error) {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = c.Stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		err = &ExitError{Status: ee.ExitCode(), err: err}
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		err = &ExitError{Status: 127, NotFound: true, err: err}
	}
	return stdout.Bytes(), stderr.Bytes(), err
}

// Where implements Runner.
func (Local) Where() string { return "this machine" }

// Close implements Runner.
func (Local) Close() error { return nil }

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CommandLine is c as one line for a remote POSIX shell: env NAME=VALUE
// ... PATH ARGS, each word quoted.
func CommandLine(c Cmd) string {
	var b strings.Builder
	if len(c.Env) > 0 {
		b.WriteString("env")
		for _, kv := range c.Env {
			b.WriteString(" " + ShellQuote(kv))
		}
		b.WriteString(" ")
	}
	b.WriteString(ShellQuote(c.Path))
	for _, a := range c.Args {
		b.WriteString(" " + ShellQuote(a))
	}
	return b.String()
}
