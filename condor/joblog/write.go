package joblog

import (
	"bytes"
	"fmt"
	"os"
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
	f, err := plainfile.Open(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
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
