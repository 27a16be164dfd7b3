package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pond-htc/pond/overlay/glidein"
)

// The marker file is the glidein's record on its host, in its directory:
// a header line, then one KEY=VALUE per line. Submit writes the first
// part; the wrapper appends the process it runs as when it starts, and
// its exit status when the agent ends. A last line without its newline is
// a write in progress and is ignored.
//
//	pond-glidein 1
//	id=pond-3f2a
//	host=node1:22
//	submitted=1764052800
//	lifetime=3600
//	binary=<sha256 of the binary>
//	pid=4242
//	start=123456          process start time, clock ticks since boot
//	boot=<the host's boot id>
//	started=1764052801
//	sid=4242              the session of every process of the glidein
//	status=0
//	ended=1764056400
const markerHeader = "pond-glidein 1"

// The files of a glidein's directory that are the site's own; names
// starting with "glidein." are refused in Request.Files.
const (
	markerFile  = "glidein.marker"
	wrapperFile = "glidein.run"
	envFile     = "glidein.env"
	logFile     = "glidein.log"
)

// marker is a parsed marker file.
type marker struct {
	ID        string
	Host      string
	Submitted time.Time
	Lifetime  time.Duration
	Binary    string
	// Set by the wrapper when it starts; SID is zero until then.
	PID, SID int
	Start    uint64
	Boot     string
	Started  time.Time
	// Set by the wrapper when the agent ended.
	HasStatus bool
	Status    int
	Ended     time.Time
}

// formatMarker returns the part of the marker Submit writes.
func formatMarker(m marker) []byte {
	var b strings.Builder
	b.WriteString(markerHeader + "\n")
	fmt.Fprintf(&b, "id=%s\n", m.ID)
	if m.Host != "" {
		fmt.Fprintf(&b, "host=%s\n", m.Host)
	}
	if !m.Submitted.IsZero() {
		fmt.Fprintf(&b, "submitted=%d\n", m.Submitted.Unix())
	}
	if m.Lifetime != 0 {
		fmt.Fprintf(&b, "lifetime=%d\n", int64(m.Lifetime/time.Second))
	}
	if m.Binary != "" {
		fmt.Fprintf(&b, "binary=%s\n", m.Binary)
	}
	return []byte(b.String())
}

// parseMarker parses a marker file. Unknown keys are ignored, so that a
// newer wrapper's marker is still read; a key given twice is an error.
func parseMarker(data []byte) (marker, error) {
	var m marker
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return m, fmt.Errorf("marker: first line is not %q", markerHeader)
	}
	lines := strings.Split(string(data[:end]), "\n")
	if lines[0] != markerHeader {
		return m, fmt.Errorf("marker: first line is not %q", markerHeader)
	}
	seen := map[string]bool{}
	for n, line := range lines[1:] {
		where := fmt.Sprintf("marker line %d", n+2)
		key, val, ok := strings.Cut(line, "=")
		if !ok || !validKey(key) {
			return m, fmt.Errorf("%s: %q is not KEY=VALUE", where, line)
		}
		if seen[key] {
			return m, fmt.Errorf("%s: %s given twice", where, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "id":
			if err = validID(val); err == nil {
				m.ID = val
			}
		case "host":
			if strings.ContainsAny(val, " \t\r") || val == "" {
				err = errors.New("not a host")
			}
			m.Host = val
		case "submitted":
			m.Submitted, err = parseUnix(val)
		case "started":
			m.Started, err = parseUnix(val)
		case "ended":
			m.Ended, err = parseUnix(val)
		case "lifetime":
			var s int64
			if s, err = parseInt(val, 0, 100*365*24*3600); err == nil {
				m.Lifetime = time.Duration(s) * time.Second
			}
		case "binary":
			if len(val) != 64 || strings.Trim(val, "0123456789abcdef") != "" {
				err = errors.New("not a sha256")
			}
			m.Binary = val
		case "pid":
			var v int64
			v, err = parseInt(val, 1, 1<<31-1)
			m.PID = int(v)
		case "sid":
			var v int64
			v, err = parseInt(val, 1, 1<<31-1)
			m.SID = int(v)
		case "start":
			m.Start, err = strconv.ParseUint(val, 10, 64)
		case "boot":
			if strings.ContainsAny(val, " \t\r") {
				err = errors.New("not a boot id")
			}
			m.Boot = val
		case "status":
			var v int64
			v, err = parseInt(val, 0, 255)
			m.Status, m.HasStatus = int(v), err == nil
		}
		if err != nil {
			return m, fmt.Errorf("%s: %s=%q: %v", where, key, val, err)
		}
	}
	if m.ID == "" {
		return m, errors.New("marker: no id")
	}
	return m, nil
}

func validKey(k string) bool {
	if k == "" || len(k) > 32 {
		return false
	}
	for _, c := range k {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func parseInt(s string, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("not a number")
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("out of range [%d, %d]", lo, hi)
	}
	return v, nil
}

func parseUnix(s string) (time.Time, error) {
	v, err := parseInt(s, 0, 1<<40)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(v, 0).UTC(), nil
}

// validID checks a glidein ID as glidein.Request documents it.
func validID(id string) error {
	if !strings.HasPrefix(id, glidein.IDPrefix) || len(id) == len(glidein.IDPrefix) {
		return fmt.Errorf("glidein id %q does not start with %q and a name", id, glidein.IDPrefix)
	}
	if len(id) > 64 {
		return fmt.Errorf("glidein id %q is longer than 64 characters", id)
	}
	if !validName(id, "-") {
		return fmt.Errorf("glidein id %q: only letters, digits and '-' are allowed", id)
	}
	return nil
}

// validName reports whether s holds only ASCII letters, digits and the
// characters of extra.
func validName(s, extra string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && !strings.ContainsRune(extra, c) {
			return false
		}
	}
	return true
}

// proc is a live process on a host, from /proc/PID/stat.
type proc struct {
	PID, SID int
	Start    uint64
	State    string
}

// startGrace is how long a glidein whose wrapper has not yet recorded
// its process counts as starting rather than failed.
const startGrace = 2 * time.Minute

// judge says what state a glidein is in, from its marker and the host's
// processes (those of its session, and the one with its leader's PID).
func judge(m marker, bootID string, procs []proc, now time.Time) (glidein.State, string) {
	if m.SID == 0 {
		if now.Sub(m.Submitted) < startGrace {
			return glidein.Queued, "starting"
		}
		return glidein.Failed, "never started: its submission was interrupted before its process began"
	}
	rebooted := m.Boot != "" && m.Boot != "-" && bootID != "" && bootID != "-" && m.Boot != bootID
	alive := false
	if !rebooted {
		recycled := false
		for _, p := range procs {
			if p.PID == m.SID && p.Start != m.Start {
				recycled = true
			}
		}
		for _, p := range procs {
			if !recycled && p.SID == m.SID && p.Start >= m.Start && p.State != "Z" {
				alive = true
			}
		}
	}
	if alive {
		if m.HasStatus {
			return glidein.Running, fmt.Sprintf("its agent ended (status %d) but processes of its session remain", m.Status)
		}
		return glidein.Running, ""
	}
	if !m.HasStatus {
		if rebooted {
			return glidein.Failed, "the host rebooted while it ran"
		}
		return glidein.Cancelled, "its processes ended without recording an exit status: killed on the host"
	}
	return exitState(m)
}

// exitState classifies the exit status the wrapper recorded: the shell's
// status, 128+N for a signal N, 124 when timeout ended the agent.
func exitState(m marker) (glidein.State, string) {
	atLifetime := m.Lifetime > 0 && !m.Started.IsZero() && !m.Ended.IsZero() && m.Ended.Sub(m.Started) >= m.Lifetime
	switch {
	case m.Status == 0:
		return glidein.Done, "exited with status 0"
	case m.Status == 124 || (m.Status > 128 && atLifetime):
		return glidein.Failed, fmt.Sprintf("killed at the end of its lifetime (%s)", m.Lifetime)
	case m.Status > 128:
		sig := unix.Signal(m.Status - 128)
		name := unix.SignalName(sig)
		if name == "" {
			name = "signal " + strconv.Itoa(int(sig))
		}
		switch sig {
		case unix.SIGHUP, unix.SIGINT, unix.SIGKILL, unix.SIGTERM:
			return glidein.Cancelled, fmt.Sprintf("killed by %s on the host", name)
		}
		return glidein.Failed, fmt.Sprintf("killed by %s", name)
	}
	return glidein.Failed, fmt.Sprintf("exited with status %d", m.Status)
}

// listing is what the list script reports about one host.
type listing struct {
	OS, Machine, BootID string
	// Base is the base directory, made absolute.
	Base string
	// Binaries are the checksums of the binaries in BASE/bin.
	Binaries []string
	Glideins []listed
	Procs    []proc
}

// listed is one glidein directory of a listing.
type listed struct {
	Name   string
	Marker []byte
	// NoMarker is set when the directory has no marker file; Made is
	// then when the directory was made.
	NoMarker bool
	Made     time.Time
	// Status holds its status files (glidein.StatusFile in its directory
	// and in data/), at most maxStatusFile bytes of each without their
	// control characters, when its marker records glidein.ExitValidation.
	Status [][]byte
}

// maxStatusFile is the most bytes of a glidein's status file the list
// script reads.
const maxStatusFile = 64 << 10

// parseListing parses the output of listScript:
//
//	@host OS MACHINE BOOTID
//	@base DIR
//	@bin SHA256
//	@glidein NAME
//	<the marker file's bytes>\n@end
//	@glidein NAME
//	@status <a status file's bytes, on one line>
//	@glidein NAME
//	@nomarker MTIME
//	@proc PID SID START STATE
//
// A glidein may be listed twice; the later listing holds.
func parseListing(out []byte) (listing, error) {
	var l listing
	rest := out
	for len(rest) > 0 {
		line, after, _ := bytes.Cut(rest, []byte("\n"))
		rest = after
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "@host":
			if len(f) != 4 {
				return l, fmt.Errorf("listing: bad line %q", line)
			}
			l.OS, l.Machine, l.BootID = f[1], f[2], f[3]
		case "@bin":
			if len(f) != 2 {
				return l, fmt.Errorf("listing: bad line %q", line)
			}
			l.Binaries = append(l.Binaries, f[1])
		case "@base":
			l.Base = strings.TrimPrefix(string(line), "@base ")
		case "@glidein":
			if len(f) != 2 {
				return l, fmt.Errorf("listing: bad line %q", line)
			}
			g := listed{Name: f[1]}
			if bytes.HasPrefix(rest, []byte("@nomarker ")) {
				line, after, _ := bytes.Cut(rest, []byte("\n"))
				mtime, err := strconv.ParseInt(string(line[len("@nomarker "):]), 10, 64)
				if err != nil || mtime < 0 || mtime > 1<<40 {
					return l, fmt.Errorf("listing: bad line %q", line)
				}
				g.NoMarker, g.Made, rest = true, time.Unix(mtime, 0), after
			} else {
				i := bytes.Index(rest, []byte("\n@end\n"))
				if i < 0 {
					return l, fmt.Errorf("listing: the marker of %s is cut short", f[1])
				}
				g.Marker, rest = rest[:i], rest[i+len("\n@end\n"):]
			}
			// A glidein listed again (its marker read once more after
			// the processes) is as the later reading says.
			l.Glideins = slices.DeleteFunc(l.Glideins, func(o listed) bool { return o.Name == g.Name })
			l.Glideins = append(l.Glideins, g)
		case "@status":
			if len(l.Glideins) == 0 || l.Glideins[len(l.Glideins)-1].NoMarker {
				return l, errors.New("listing: a status file of no glidein")
			}
			g := &l.Glideins[len(l.Glideins)-1]
			if len(g.Status) == 2 || len(line) > len("@status ")+maxStatusFile {
				return l, fmt.Errorf("listing: too many or too long status files of %s", g.Name)
			}
			g.Status = append(g.Status, bytes.TrimPrefix(line, []byte("@status ")))
		case "@proc":
			if len(f) != 5 {
				return l, fmt.Errorf("listing: bad line %q", line)
			}
			pid, err1 := strconv.Atoi(f[1])
			sid, err2 := strconv.Atoi(f[2])
			start, err3 := strconv.ParseUint(f[3], 10, 64)
			if err := errors.Join(err1, err2, err3); err != nil {
				return l, fmt.Errorf("listing: bad line %q", line)
			}
			l.Procs = append(l.Procs, proc{PID: pid, SID: sid, Start: start, State: f[4]})
		default:
			return l, fmt.Errorf("listing: unexpected line %q", line)
		}
	}
	if l.OS == "" {
		return l, errors.New("listing: no @host line")
	}
	return l, nil
}
