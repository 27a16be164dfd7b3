// Package hostinfo reports the facts of the machine pond runs on, spelled
// as HTCondor advertises them: the static ones (cpus, total memory, ARCH,
// OPSYS) behind condor/config's DETECTED_* macros, the startd's slots and
// the agent's machine ad, and the live ones (load average, available
// memory, free disk) those ads refresh.
//
// The /proc files are read by parsers that take the file's contents, so
// that they can be tested and fuzzed without the files.
package hostinfo

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The Linux files the live facts come from.
const (
	procLoadAvg = "/proc/loadavg"
	procMeminfo = "/proc/meminfo"
	procUptime  = "/proc/uptime"
)

// CPUs returns the number of logical cpus the process may use, HTCondor's
// DETECTED_CPUS.
func CPUs() int { return runtime.NumCPU() }

// TotalMemoryMiB returns the machine's physical memory in MiB (MemTotal of
// /proc/meminfo), HTCondor's DETECTED_MEMORY.
func TotalMemoryMiB() (int64, error) { return meminfoMiB("MemTotal") }

// AvailableMemoryMiB returns the memory available to new processes without
// swapping, in MiB (MemAvailable of /proc/meminfo).
func AvailableMemoryMiB() (int64, error) { return meminfoMiB("MemAvailable") }

func meminfoMiB(field string) (int64, error) {
	data, err := os.ReadFile(procMeminfo)
	if err != nil {
		return 0, err
	}
	kib, err := ParseMeminfo(data, field)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", procMeminfo, err)
	}
	return kib / 1024, nil
}

// LoadAvg returns the one-minute load average (the first field of
// /proc/loadavg), HTCondor's TotalLoadAvg.
func LoadAvg() (float64, error) {
	data, err := os.ReadFile(procLoadAvg)
	if err != nil {
		return 0, err
	}
	v, err := ParseLoadAvg(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", procLoadAvg, err)
	}
	return v, nil
}

// Uptime returns how long the machine has been up (the first field of
// /proc/uptime).
func Uptime() (time.Duration, error) {
	data, err := os.ReadFile(procUptime)
	if err != nil {
		return 0, err
	}
	d, err := ParseUptime(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", procUptime, err)
	}
	return d, nil
}

// Arch returns the machine's architecture as HTCondor spells ARCH.
func Arch() string { return ArchName(runtime.GOARCH) }

// ArchName spells a Go architecture (GOARCH) as HTCondor's ARCH: the names
// HTCondor translates (X86_64, INTEL, PPC64) in upper case, the others as
// uname(2) reports the machine (aarch64, ppc64le), which HTCondor passes
// through unchanged.
func ArchName(goarch string) string {
	switch goarch {
	case "amd64":
		return "X86_64"
	case "386":
		return "INTEL"
	case "ppc64":
		return "PPC64"
	case "arm64":
		return "aarch64"
	case "loong64":
		return "loongarch64"
	case "mips64le":
		return "mips64"
	}
	return goarch
}

// OpSys returns the machine's operating system as HTCondor spells OPSYS.
func OpSys() string { return OpSysName(runtime.GOOS) }

// OpSysName spells a Go operating system (GOOS) as HTCondor's OPSYS:
// LINUX, OSX, FREEBSD, WINDOWS, and the others in upper case.
func OpSysName(goos string) string {
	switch goos {
	case "darwin":
		return "OSX"
	}
	return strings.ToUpper(goos)
}

// ParseLoadAvg returns the one-minute load average of the contents of
// /proc/loadavg ("0.52 0.58 0.59 1/467 12345").
func ParseLoadAvg(data []byte) (float64, error) {
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, errors.New("empty load average")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("load average %q is not a number of at least 0", f[0])
	}
	return v, nil
}

// ParseMeminfo returns field (such as MemTotal or MemAvailable) of the
// contents of /proc/meminfo, in KiB ("MemTotal:  16318480 kB").
func ParseMeminfo(data []byte, field string) (int64, error) {
	prefix := []byte(field + ":")
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) == 0 || len(f) > 2 || len(f) == 2 && f[1] != "kB" {
			return 0, fmt.Errorf("%s: want a number of kB, got %q", field, bytes.TrimSpace(rest))
		}
		kib, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kib < 0 {
			return 0, fmt.Errorf("%s: %q is not a number of kB", field, f[0])
		}
		return kib, nil
	}
	return 0, fmt.Errorf("no %s field", field)
}

// maxUptime bounds the seconds ParseUptime accepts (about 146 years), well
// inside what a time.Duration holds.
const maxUptime = math.MaxInt64 / 2 / float64(time.Second)

// ParseUptime returns the time since boot of the contents of /proc/uptime
// ("350735.47 234388.90").
func ParseUptime(data []byte) (time.Duration, error) {
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, errors.New("empty uptime")
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(s) || s < 0 || s > maxUptime {
		return 0, fmt.Errorf("uptime %q is not a number of seconds", f[0])
	}
	return time.Duration(s * float64(time.Second)), nil
}
