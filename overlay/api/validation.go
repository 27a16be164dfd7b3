package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pond-htc/pond/overlay/knobs"
)

// The types of validation checks (ValidationCheck.Type).
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

// ValidationCheck is one validation check of a glidein (overlay/glidein).
// The validation file (-validate) is a JSON list of them, such as
//
//	[{"type": "disk", "min_mb": 1024},
//	 {"type": "memory", "min_mb": 2048},
//	 {"type": "cpus", "min": 2},
//	 {"type": "arch", "allow": ["X86_64"]},
//	 {"type": "os", "allow": ["LINUX"]},
//	 {"type": "central_manager", "timeout": "20s"},
//	 {"type": "command", "name": "cvmfs", "shell": "test -d /cvmfs/sw", "timeout": "30s"}]
type ValidationCheck struct {
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

// Label is how the check is named in results.
func (c ValidationCheck) Label() string {
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

// Validate says what is wrong with the check, naming the field.
func (c ValidationCheck) Validate() error {
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

// ParseValidationChecks reads a validation file's content: a JSON list of checks.
// An error names the check at fault (by its position, from 1) and why.
func ParseValidationChecks(data []byte) ([]ValidationCheck, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var checks []ValidationCheck
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
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("check %d (%s): %w", i+1, c.Label(), err)
		}
	}
	return checks, nil
}
