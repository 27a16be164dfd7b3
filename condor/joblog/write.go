package joblog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/internal/plainfile"
)

// TimeLayout is the ISO form of event times HTCondor writes by default.
const TimeLayout = "2006-01-02 15:04:05"

// Format renders ev in HTCondor's text format, ending with the "..." line.
// Times are written in loc (time.Local when nil), as HTCondor writes local
// time.
func Format(ev Event, loc *time.Location) ([]byte, error) {
	if loc == nil {
		loc = time.Local
	}
	if ev.Cluster < 0 || ev.Proc < 0 || ev.Subproc < 0 {
		return nil, fmt.Errorf("event %s: negative job id %d.%d.%d", ev.Type, ev.Cluster, ev.Proc, ev.Subproc)
	}
	t := ev.Time
	if t.IsZero() {
		t = time.Now()
	}
	var w eventWriter
	fmt.Fprintf(&w.b, "%03d (%03d.%03d.%03d) %s ", int(ev.Type), ev.Cluster, ev.Proc, ev.Subproc, t.In(loc).Format(TimeLayout))
	write := eventTypes[ev.Type].write
	if write == nil {
		write = writeOther
	}
	if err := write(&w, &ev); err != nil {
		return nil, err
	}
	w.b.WriteString("...\n")
	return w.b.Bytes(), nil
}

// eventWriter writes the text of one event after its time.
type eventWriter struct {
	b bytes.Buffer
}

// header writes the rest of the header line.
func (w *eventWriter) header(format string, args ...any) {
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

// line writes a body line indented with a tab.
func (w *eventWriter) line(format string, args ...any) {
	w.b.WriteByte('\t')
	w.header(format, args...)
}

// indented writes a body line indented with four spaces, as HTCondor
// indents some event types' lines.
func (w *eventWriter) indented(format string, args ...any) {
	w.b.WriteString("    ")
	w.header(format, args...)
}

// usage writes a "usage  -  label" line.
func (w *eventWriter) usage(u Usage, label string) {
	w.line("\t%s  -  %s", formatUsage(u), label)
}

// bytes writes a "count  -  label" line.
func (w *eventWriter) bytes(n int64, label string) {
	w.line("%d  -  %s", n, label)
}

// resources writes the "Partitionable Resources" table, if any.
func (w *eventWriter) resources(rs []Resource) {
	if len(rs) == 0 {
		return
	}
	w.b.WriteString("\tPartitionable Resources :    Usage  Request Allocated\n")
	for _, r := range rs {
		fmt.Fprintf(&w.b, "\t   %-20s : %8s %8s %9s\n", r.Name, r.Usage, r.Request, r.Allocated)
	}
}

// oneLine keeps a value on its line.
func oneLine(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ") }

// Writer appends events to a job event log file. Every Write opens the
// file with O_APPEND, takes an exclusive flock, writes whole events in a
// single write and closes the file, so that several writers (processes
// or goroutines) sharing one log never interleave events.
type Writer struct {
	path string
	loc  *time.Location
	sync bool
	mu   sync.Mutex
}

// WriterOptions tune a Writer.
type WriterOptions struct {
	Location *time.Location // time zone of event times (time.Local when nil)
	Sync     bool           // fsync after every write
}

// NewWriter returns a Writer appending to path (created with mode 0644).
func NewWriter(path string, opts WriterOptions) *Writer {
	return &Writer{path: path, loc: opts.Location, sync: opts.Sync}
}

// openLog opens the log at path for appending, creating it. A symbolic
// link as its last component is followed only where the kernel's
// fs.protected_symlinks would follow it, whatever that setting is here: in
// a directory every user may write to and only its owners delete from
// (/tmp), a link made by someone other than the writer (the log's owner,
// whose rights it is written with) or the directory's owner is not
// followed, so that another user cannot have a job's events appended to a
// file of the job's owner that the link names.
func openLog(path string) (*os.File, error) {
	const flags = os.O_WRONLY | os.O_APPEND | os.O_CREATE
	f, err := plainfile.Open(path, flags|syscall.O_NOFOLLOW, 0o644)
	if err == nil {
		return f, nil
	}
	// A link refuses O_NOFOLLOW with ELOOP, or, in a sticky directory,
	// with EACCES as it would be created.
	var st syscall.Stat_t
	if !errors.Is(err, syscall.ELOOP) && (syscall.Lstat(path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFLNK) {
		return nil, err
	}
	if err := trustedLink(path); err != nil {
		return nil, err
	}
	return plainfile.Open(path, flags, 0o644)
}

// trustedLink says whether the symbolic link at path may be followed by
// this thread's user, as fs.protected_symlinks says.
func trustedLink(path string) error {
	var link, dir syscall.Stat_t
	if err := syscall.Lstat(path, &link); err != nil {
		return &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	if link.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return fmt.Errorf("%s changed while it was opened", path)
	}
	parent := filepath.Dir(path)
	if err := syscall.Stat(parent, &dir); err != nil {
		return &os.PathError{Op: "stat", Path: parent, Err: err}
	}
	shared := dir.Mode&syscall.S_ISVTX != 0 && dir.Mode&0o002 != 0
	if shared && link.Uid != uint32(syscall.Geteuid()) && link.Uid != dir.Uid {
		return fmt.Errorf("%s is a symbolic link another user (uid %d) made in the shared directory %s: not followed", path, link.Uid, parent)
	}
	return nil
}

// Path returns the log file's path.
func (w *Writer) Path() string { return w.path }

// Write appends events atomically with respect to other writers.
func (w *Writer) Write(events ...Event) error {
	var buf bytes.Buffer
	for _, ev := range events {
		b, err := Format(ev, w.loc)
		if err != nil {
			return fmt.Errorf("job log %s: %w", w.path, err)
		}
		buf.Write(b)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	f, err := openLog(w.path)
	if err != nil {
		return fmt.Errorf("job log: %w", err)
	}
	// Closing the file releases the lock.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return fmt.Errorf("job log %s: lock: %w", w.path, err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("job log %s: %w", w.path, err)
	}
	if w.sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("job log %s: sync: %w", w.path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("job log %s: %w", w.path, err)
	}
	return nil
}
