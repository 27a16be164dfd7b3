package glidein

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/hostinfo"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
)

// The types of validation checks.
const (
	// CheckDisk passes when the file system of the data directory has at
	// least MinMB MiB free.
	CheckDisk = "disk"
	// CheckMemory passes when the machine has at least MinMB MiB of
	// memory available (MemAvailable).
	CheckMemory = "memory"
	// CheckCPUs passes when the process may run on at least Min CPUs (its
	// affinity: what a batch system's cpuset gives it).
	CheckCPUs = "cpus"
	// CheckArch passes when the machine's architecture is one of Allow:
	// HTCondor's names (X86_64, aarch64) or Go's (amd64, arm64), in any
	// case.
	CheckArch = "arch"
	// CheckOS passes when the operating system is one of Allow: HTCondor's
	// names (LINUX) or Go's (linux), in any case.
	CheckOS = "os"
	// CheckCentralManager passes when the glidein's central manager
	// answers an authenticated call (GET /v1/self with the glidein's token
	// and certificate) and belongs to the glidein's pool; it tries again
	// every second until its Timeout (default 30s).
	CheckCentralManager = "central_manager"
	// CheckCommand passes when Command (or Shell, run by /bin/sh -c) exits
	// 0 within its Timeout (default 60s); it runs in the data directory
	// with POND_GLIDEIN_ID and POND_DATA_DIR in its environment.
	CheckCommand = "command"
)

// Check is one validation check of a glidein. The validation file
// (-validate) is a JSON list of them, such as
//
//	[{"type": "disk", "min_mb": 1024},
//	 {"type": "memory", "min_mb": 2048},
//	 {"type": "cpus", "min": 2},
//	 {"type": "arch", "allow": ["X86_64"]},
//	 {"type": "os", "allow": ["LINUX"]},
//	 {"type": "central_manager", "timeout": "20s"},
//	 {"type": "command", "name": "cvmfs", "shell": "test -d /cvmfs/sw", "timeout": "30s"}]
type Check struct {
	// Type is one of the Check* constants.
	Type string `json:"type"`
	// Name labels the check in the status and the logs; its type (and
	// for a command, its first word) when empty.
	Name string `json:"name,omitempty"`
	// MinMB is the least MiB free (disk) or available (memory).
	MinMB int64 `json:"min_mb,omitempty"`
	// Min is the least number of CPUs (cpus).
	Min int `json:"min,omitempty"`
	// Allow lists the accepted architectures (arch) or systems (os).
	Allow []string `json:"allow,omitempty"`
	// Command is the program and its arguments (command), run without a
	// shell; Shell is a command line for /bin/sh -c instead. One of the
	// two.
	Command []string `json:"command,omitempty"`
	Shell   string   `json:"shell,omitempty"`
	// Timeout bounds a command or the central manager's check: a duration
	// such as "30s" or a number of seconds.
	Timeout string `json:"timeout,omitempty"`
}

// Default timeouts of the checks that wait.
const (
	DefaultCommandTimeout = 60 * time.Second
	DefaultCMTimeout      = 30 * time.Second
)

// maxOutput is how much of a failed command's output its reason keeps
// (the end of it).
const maxOutput = 2048

// label is how the check is named in results.
func (c Check) label() string {
	if c.Name != "" {
		return c.Name
	}
	if c.Type == CheckCommand {
		if len(c.Command) > 0 {
			return "command " + c.Command[0]
		}
		if f := strings.Fields(c.Shell); len(f) > 0 {
			return "command " + f[0]
		}
	}
	return c.Type
}

// timeout is the check's Timeout, or def.
func (c Check) timeout(def time.Duration) time.Duration {
	if c.Timeout == "" {
		return def
	}
	d, err := knobs.ParseDuration(c.Timeout)
	if err != nil || d == 0 {
		return def // ParseChecks refused it
	}
	return d
}

// validate says what is wrong with the check, naming the field.
func (c Check) validate() error {
	want := func(ok bool, field, msg string) error {
		if !ok {
			return fmt.Errorf("%s: %s", field, msg)
		}
		return nil
	}
	unused := func(fields ...string) error {
		set := map[string]bool{"min_mb": c.MinMB != 0, "min": c.Min != 0, "allow": len(c.Allow) > 0,
			"command": len(c.Command) > 0, "shell": c.Shell != "", "timeout": c.Timeout != ""}
		for f, isSet := range set {
			if isSet && !slices.Contains(fields, f) {
				return fmt.Errorf("%s: not a field of a %s check", f, c.Type)
			}
		}
		return nil
	}
	if c.Timeout != "" {
		d, err := knobs.ParseDuration(c.Timeout)
		if err != nil {
			return fmt.Errorf("timeout %q: %w", c.Timeout, err)
		}
		if d == 0 {
			return fmt.Errorf("timeout %q: must be more than zero", c.Timeout)
		}
	}
	switch c.Type {
	case CheckDisk, CheckMemory:
		return errors.Join(unused("min_mb"), want(c.MinMB > 0, "min_mb", "want a number of MiB of at least 1"))
	case CheckCPUs:
		return errors.Join(unused("min"), want(c.Min > 0, "min", "want a number of CPUs of at least 1"))
	case CheckArch, CheckOS:
		err := want(len(c.Allow) > 0 && !slices.Contains(c.Allow, ""), "allow", "want a list of names, none empty")
		return errors.Join(unused("allow"), err)
	case CheckCentralManager:
		return unused("timeout")
	case CheckCommand:
		err := want((len(c.Command) > 0) != (c.Shell != ""), "command", "give either command (a list: the program and its arguments) or shell (a command line), not both")
		if err == nil && len(c.Command) > 0 && c.Command[0] == "" {
			err = errors.New("command: the program is empty")
		}
		return errors.Join(unused("command", "shell", "timeout"), err)
	case "":
		return errors.New("type: missing; want disk, memory, cpus, arch, os, central_manager or command")
	}
	return fmt.Errorf("type %q: want disk, memory, cpus, arch, os, central_manager or command", c.Type)
}

// ParseChecks reads a validation file's content: a JSON list of checks.
// An error names the check at fault (by its position, from 1) and why.
func ParseChecks(data []byte) ([]Check, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var checks []Check
	if err := dec.Decode(&checks); err != nil {
		return nil, fmt.Errorf("want a JSON list of checks such as [{\"type\": \"disk\", \"min_mb\": 1024}]: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("want one JSON list of checks, found more after it")
	}
	if checks == nil {
		return nil, errors.New("want a JSON list of checks, found null")
	}
	for i, c := range checks {
		if err := c.validate(); err != nil {
			return nil, fmt.Errorf("check %d (%s): %w", i+1, c.label(), err)
		}
	}
	return checks, nil
}

// ReadChecks reads the validation file at path.
func ReadChecks(path string) ([]Check, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	checks, err := ParseChecks(data)
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
func Validate(ctx context.Context, checks []Check, env Env) ([]api.GlideinCheck, error) {
	results := make([]api.GlideinCheck, 0, len(checks))
	var failed []api.GlideinCheck
	for _, c := range checks {
		began := time.Now()
		detail, err := run(ctx, c, env)
		r := api.GlideinCheck{Name: c.label(), OK: err == nil, Detail: detail, Took: time.Since(began)}
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
func run(ctx context.Context, c Check, env Env) (string, error) {
	switch c.Type {
	case CheckDisk:
		kib, err := hostinfo.DiskFreeKiB(env.DataDir)
		if err != nil {
			return "", err
		}
		return atLeast(kib/1024, c.MinMB, "MiB free in "+dirName(env.DataDir))
	case CheckMemory:
		mib, err := hostinfo.AvailableMemoryMiB()
		if err != nil {
			return "", err
		}
		return atLeast(mib, c.MinMB, "MiB of memory available")
	case CheckCPUs:
		return atLeast(int64(hostinfo.CPUs()), int64(c.Min), "CPUs")
	case CheckArch:
		return oneOf(hostinfo.Arch(), hostinfo.ArchName, c.Allow, "architecture")
	case CheckOS:
		return oneOf(hostinfo.OpSys(), hostinfo.OpSysName, c.Allow, "operating system")
	case CheckCentralManager:
		return checkCentralManager(ctx, env, c.timeout(DefaultCMTimeout))
	case CheckCommand:
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
	for {
		tries++
		err := env.CentralManager(ctx)
		if err == nil {
			return "answered", nil
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("no answer in %s (%d tries): %w", timeout, tries, err)
		case <-t.C:
		}
	}
}

// runCommand runs a command check in its own process group, which is
// killed whole when the timeout passes.
func runCommand(ctx context.Context, c Check, env Env) (string, error) {
	timeout := c.timeout(DefaultCommandTimeout)
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
