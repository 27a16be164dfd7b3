package joblog

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
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
	var b bytes.Buffer
	fmt.Fprintf(&b, "%03d (%03d.%03d.%03d) %s ", int(ev.Type), ev.Cluster, ev.Proc, ev.Subproc, t.In(loc).Format(TimeLayout))
	line := func(format string, args ...any) {
		b.WriteByte('\t')
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	oneLine := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ") }
	switch ev.Type {
	case Submit:
		fmt.Fprintf(&b, "Job submitted from host: %s\n", oneLine(ev.Host))
		if ev.Notes != "" {
			fmt.Fprintf(&b, "    %s\n", oneLine(ev.Notes))
		}
	case Execute:
		fmt.Fprintf(&b, "Job executing on host: %s\n", oneLine(ev.Host))
		if ev.SlotName != "" {
			line("SlotName: %s", oneLine(ev.SlotName))
		}
	case ExecutableError:
		switch ev.ErrorKind {
		case ErrBadLink:
			fmt.Fprintf(&b, "(%d) Job not properly linked for Condor.\n", ErrBadLink)
		default:
			fmt.Fprintf(&b, "(%d) Job file not executable.\n", ErrNotExecutable)
		}
	case Evicted:
		b.WriteString("Job was evicted.\n")
		if ev.Checkpointed {
			line("(1) Job was checkpointed.")
		} else {
			line("(0) Job was not checkpointed.")
		}
		line("\t%s  -  Run Remote Usage", formatUsage(ev.RunRemote))
		line("\t%s  -  Run Local Usage", formatUsage(ev.RunLocal))
		line("%d  -  Run Bytes Sent By Job", ev.SentBytes)
		line("%d  -  Run Bytes Received By Job", ev.ReceivedBytes)
		writeResources(&b, ev.Resources)
	case Terminated:
		b.WriteString("Job terminated.\n")
		if ev.TerminatedNormally {
			line("(1) Normal termination (return value %d)", ev.ReturnValue)
		} else {
			line("(0) Abnormal termination (signal %d)", ev.Signal)
			if ev.CoreFile != "" {
				line("(1) Corefile in: %s", oneLine(ev.CoreFile))
			} else {
				line("(0) No core file")
			}
		}
		line("\t%s  -  Run Remote Usage", formatUsage(ev.RunRemote))
		line("\t%s  -  Run Local Usage", formatUsage(ev.RunLocal))
		line("\t%s  -  Total Remote Usage", formatUsage(ev.TotalRemote))
		line("\t%s  -  Total Local Usage", formatUsage(ev.TotalLocal))
		line("%d  -  Run Bytes Sent By Job", ev.SentBytes)
		line("%d  -  Run Bytes Received By Job", ev.ReceivedBytes)
		line("%d  -  Total Bytes Sent By Job", ev.TotalSentBytes)
		line("%d  -  Total Bytes Received By Job", ev.TotalReceivedBytes)
		writeResources(&b, ev.Resources)
	case ImageSize:
		fmt.Fprintf(&b, "Image size of job updated: %d\n", ev.ImageSizeKB)
		line("%d  -  MemoryUsage of job (MB)", ev.MemoryUsageMB)
		line("%d  -  ResidentSetSize of job (KB)", ev.ResidentSetSizeKB)
	case ShadowException:
		b.WriteString("Shadow exception!\n")
		line("%s", oneLine(ev.Message))
		line("%d  -  Run Bytes Sent By Job", ev.SentBytes)
		line("%d  -  Run Bytes Received By Job", ev.ReceivedBytes)
	case Generic:
		fmt.Fprintf(&b, "%s\n", oneLine(ev.Message))
	case Aborted:
		b.WriteString("Job was aborted.\n")
		if ev.Message != "" {
			line("%s", oneLine(ev.Message))
		}
	case Suspended:
		b.WriteString("Job was suspended.\n")
		line("Number of processes actually suspended: %d", ev.NumPIDs)
	case Unsuspended:
		b.WriteString("Job was unsuspended.\n")
	case Held:
		b.WriteString("Job was held.\n")
		msg := ev.Message
		if msg == "" {
			msg = "Reason unspecified"
		}
		line("%s", oneLine(msg))
		line("Code %d Subcode %d", ev.HoldCode, ev.HoldSubCode)
	case Released:
		b.WriteString("Job was released.\n")
		if ev.Message != "" {
			line("%s", oneLine(ev.Message))
		}
	case JobDisconnected:
		b.WriteString("Job disconnected, attempting to reconnect\n")
		// HTCondor indents these two events' lines with four spaces.
		fmt.Fprintf(&b, "    %s\n", oneLine(ev.Message))
		fmt.Fprintf(&b, "    Trying to reconnect to %s %s\n", oneLine(ev.SlotName), oneLine(ev.Host))
	case JobReconnected:
		fmt.Fprintf(&b, "Job reconnected to %s\n", oneLine(ev.SlotName))
		fmt.Fprintf(&b, "    startd address: %s\n", oneLine(ev.Host))
		fmt.Fprintf(&b, "    starter address: %s\n", oneLine(ev.StarterHost))
	case JobReconnectFailed:
		b.WriteString("Job reconnection failed\n")
		fmt.Fprintf(&b, "    %s\n", oneLine(ev.Message))
		fmt.Fprintf(&b, "    Can not reconnect to %s, rescheduling job\n", oneLine(ev.SlotName))
	case FileTransfer:
		what, ok := map[int]string{
			TransferInputStarted: "Started transferring input files", TransferInputFinished: "Finished transferring input files",
			TransferOutputStarted: "Started transferring output files", TransferOutputFinished: "Finished transferring output files",
		}[ev.TransferKind]
		if !ok {
			return nil, fmt.Errorf("file transfer event: unknown kind %d", ev.TransferKind)
		}
		b.WriteString(what + "\n")
		if ev.QueueingDelay > 0 {
			line("Seconds spent in queue: %d", ev.QueueingDelay)
		}
		if ev.Host != "" {
			line("Transferring to host: %s", oneLine(ev.Host))
		}
	default:
		if len(ev.Body) == 0 {
			return nil, fmt.Errorf("cannot write event type %d without a body", int(ev.Type))
		}
		fmt.Fprintf(&b, "%s\n", oneLine(ev.Body[0]))
		for _, l := range ev.Body[1:] {
			line("%s", oneLine(l))
		}
	}
	b.WriteString("...\n")
	return b.Bytes(), nil
}

func writeResources(b *bytes.Buffer, rs []Resource) {
	if len(rs) == 0 {
		return
	}
	b.WriteString("\tPartitionable Resources :    Usage  Request Allocated\n")
	for _, r := range rs {
		fmt.Fprintf(b, "\t   %-20s : %8s %8s %9s\n", r.Name, r.Usage, r.Request, r.Allocated)
	}
}

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
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
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
