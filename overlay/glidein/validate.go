package glidein

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/hostinfo"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
)

// Default timeouts of the checks that wait.
const (
	DefaultCommandTimeout = 60 * time.Second
	DefaultCMTimeout      = 30 * time.Second
)

// maxOutput is how much of a failed command's output its reason keeps
// (the end of it).
const maxOutput = 2048

// checkTimeout is the check's Timeout, or def.
func checkTimeout(c api.ValidationCheck, def time.Duration) time.Duration {
	if c.Timeout == "" {
		return def
	}
	d, err := knobs.ParseDuration(c.Timeout)
	if err != nil || d == 0 {
		return def // ParseChecks refused it
	}
	return d
}

// ReadChecks reads the validation file at path.
func ReadChecks(path string) ([]api.ValidationCheck, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	checks, err := api.ParseValidationChecks(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return checks, nil
}

// Env is what the checks run against.
type Env struct {
	// ID is the glidein's ID, given to commands as POND_GLIDEIN_ID.
	ID string
	// DataDir is where disk space is measured and commands run (the
	// current directory when empty).
	DataDir string
	// CentralManager makes one authenticated call to the glidein's
	// central manager and says what is wrong; nil when the glidein has
	// none, which fails the check.
	CentralManager func(ctx context.Context) error
}

// OtherPoolError is the answer of a central manager that belongs to
// another pool than the glidein's: the central_manager check fails at once
// on it rather than asking again until its timeout, since asking again
// gives the same answer.
type OtherPoolError struct {
	// Addr is the central manager's address; Name and Pool, the agent
	// that answered there and its pool; Want, the glidein's pool.
	Addr, Name, Pool, Want string
}

func (e *OtherPoolError) Error() string {
	return fmt.Sprintf("central manager %s: the agent there (%s) belongs to pool %q, not %q", e.Addr, e.Name, e.Pool, e.Want)
}

// ValidationError is the error of a validation that failed: the checks
// that did not pass.
type ValidationError struct {
	Failed []api.GlideinCheck
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, c := range e.Failed {
		parts[i] = "check " + c.Name + ": " + c.Detail
	}
	return "validation failed: " + strings.Join(parts, "; ")
}

// Validate runs every check, in order, and returns their results; the
// error is a *ValidationError when one of them failed (all of them run,
// so that the status says everything that is wrong).
func Validate(ctx context.Context, checks []api.ValidationCheck, env Env) ([]api.GlideinCheck, error) {
	results := make([]api.GlideinCheck, 0, len(checks))
	var failed []api.GlideinCheck
	for _, c := range checks {
		began := time.Now()
		detail, err := run(ctx, c, env)
		r := api.GlideinCheck{Name: c.Label(), OK: err == nil, Detail: detail, Took: time.Since(began)}
		if err != nil {
			r.Detail = err.Error()
			failed = append(failed, r)
		}
		results = append(results, r)
	}
	if ctx.Err() != nil {
		return results, fmt.Errorf("validation interrupted: %w", ctx.Err())
	}
	if len(failed) > 0 {
		return results, &ValidationError{Failed: failed}
	}
	return results, nil
}

// run runs one check: what it found, or why it failed.
func run(ctx context.Context, c api.ValidationCheck, env Env) (string, error) {
	switch c.Type {
	case api.CheckDisk:
		kib, err := hostinfo.DiskFreeKiB(env.DataDir)
		if err != nil {
			return "", err
		}
		return atLeast(kib/1024, c.MinMB, "MiB free in "+dirName(env.DataDir))
	case api.CheckMemory:
		mib, err := hostinfo.AvailableMemoryMiB()
		if err != nil {
			return "", err
		}
		return atLeast(mib, c.MinMB, "MiB of memory available")
	case api.CheckCPUs:
		return atLeast(int64(hostinfo.CPUs()), int64(c.Min), "CPUs")
	case api.CheckArch:
		return oneOf(hostinfo.Arch(), hostinfo.ArchName, c.Allow, "architecture")
	case api.CheckOS:
		return oneOf(hostinfo.OpSys(), hostinfo.OpSysName, c.Allow, "operating system")
	case api.CheckCentralManager:
		return checkCentralManager(ctx, env, checkTimeout(c, DefaultCMTimeout))
	case api.CheckCommand:
		return runCommand(ctx, c, env)
	}
	return "", fmt.Errorf("unknown check type %q", c.Type)
}

func dirName(dir string) string {
	if dir == "" {
		return "the current directory"
	}
	return dir
}

func atLeast(have, want int64, what string) (string, error) {
	msg := fmt.Sprintf("%d %s", have, what)
	if have < want {
		return "", fmt.Errorf("%s, want at least %d", msg, want)
	}
	return msg, nil
}

// oneOf checks have (an HTCondor name) against allow, whose names may
// also be Go's, translated by name.
func oneOf(have string, name func(string) string, allow []string, what string) (string, error) {
	for _, a := range allow {
		if strings.EqualFold(a, have) || strings.EqualFold(name(strings.ToLower(a)), have) {
			return what + " " + have, nil
		}
	}
	return "", fmt.Errorf("%s %s, want one of %s", what, have, strings.Join(allow, ", "))
}

// checkCentralManager calls the central manager until it answers or
// timeout has passed.
func checkCentralManager(ctx context.Context, env Env, timeout time.Duration) (string, error) {
	if env.CentralManager == nil {
		return "", errors.New("the glidein has no central manager to reach (-condor-host)")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tries := 0
	var last error
	for {
		tries++
		err := env.CentralManager(ctx)
		switch {
		case err == nil:
			return "answered", nil
		case errors.As(err, new(*OtherPoolError)):
			return "", err
		case last == nil || ctx.Err() == nil:
			// A call the timeout cut short says less than the one
			// before it did.
			last = err
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("no answer in %s (%d tries): %w", timeout, tries, last)
		case <-t.C:
		}
	}
}

// runCommand runs a command check in its own process group, which is
// killed whole when the timeout passes.
func runCommand(ctx context.Context, c api.ValidationCheck, env Env) (string, error) {
	timeout := checkTimeout(c, DefaultCommandTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := c.Command
	if c.Shell != "" {
		argv = []string{"/bin/sh", "-c", c.Shell}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = env.DataDir
	cmd.Env = append(os.Environ(), "POND_GLIDEIN_ID="+env.ID, "POND_DATA_DIR="+env.DataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	switch {
	case err == nil:
		return text, nil
	case ctx.Err() == context.DeadlineExceeded:
		err = fmt.Errorf("did not end within %s", timeout)
	}
	if text != "" {
		return "", fmt.Errorf("%w: %s", err, text)
	}
	return "", err
}

// tailBuffer keeps the last maxOutput bytes written to it.
type tailBuffer struct {
	buf   []byte
	total int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.total += len(p)
	b.buf = append(b.buf, p...)
	if len(b.buf) > maxOutput {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-maxOutput:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	if b.total > len(b.buf) {
		return "..." + string(b.buf)
	}
	return string(b.buf)
}
