// Package joblog writes and reads the HTCondor job event log (the file a
// submit file's log command names) in HTCondor's text format, so that
// HTCondor's own tools and bindings can read what pond writes, and pond
// can read logs HTCondor writes.
//
// Each event is a header line
//
//	005 (001.000.000) 2026-11-22 12:00:05 Job terminated.
//
// followed by indented body lines and a line holding only "...".
package joblog

import (
	"fmt"
	"strings"
	"time"
)

// EventType is an event's number in the log.
type EventType int

// Event types pond writes and reads.
const (
	Submit          EventType = 0
	Execute         EventType = 1
	ExecutableError EventType = 2
	Checkpointed    EventType = 3
	Evicted         EventType = 4
	Terminated      EventType = 5
	ImageSize       EventType = 6
	ShadowException EventType = 7
	Generic         EventType = 8
	Aborted         EventType = 9
	Suspended       EventType = 10
	Unsuspended     EventType = 11
	Held            EventType = 12
	Released        EventType = 13
	// JobDisconnected: the schedd lost contact with the job's execute
	// node and waits for the job's lease to reconnect.
	JobDisconnected EventType = 22
	// JobReconnected: the execute node of a disconnected job came back
	// within the job's lease; the job goes on running there.
	JobReconnected EventType = 23
	// JobReconnectFailed: the job's lease ran out before its execute
	// node came back; the job is rescheduled.
	JobReconnectFailed EventType = 24
	FileTransfer       EventType = 40
)

// String returns HTCondor's name for the event type (its MyType).
func (t EventType) String() string {
	if et, ok := eventTypes[t]; ok {
		return et.name
	}
	return fmt.Sprintf("Event%03d", int(t))
}

// Executable error kinds (ExecutableError events).
const (
	ErrNotExecutable = 0 // "Job file not executable."
	ErrBadLink       = 1 // "Job not properly linked for Condor."
)

// File transfer kinds (FileTransfer events), as HTCondor numbers them.
const (
	TransferInputStarted   = 2
	TransferInputFinished  = 3
	TransferOutputStarted  = 5
	TransferOutputFinished = 6
)

// Usage is CPU time as the log prints it: "Usr d hh:mm:ss, Sys d hh:mm:ss".
type Usage struct {
	User, Sys time.Duration
}

// Resource is one row of the "Partitionable Resources" table of a
// terminated or evicted event. Empty strings are blank cells.
type Resource struct {
	Name      string // "Cpus", "Disk (KB)", "Memory (MB)", ...
	Usage     string
	Request   string
	Allocated string
}

// Event is one job event. Fields apply to the event types noted; the
// others stay zero.
type Event struct {
	Type    EventType
	Cluster int
	Proc    int
	Subproc int
	Time    time.Time

	Host string // Submit: submit host; Execute: execute host; FileTransfer: peer host; JobReconnected: startd address (sinful strings)
	// StarterHost is JobReconnected's starter address (a sinful string).
	StarterHost string
	Notes       string // Submit: submit event notes
	SlotName    string // Execute: slot name

	// Message is Generic's text, ShadowException's message, Aborted's,
	// Released's and Held's reason, JobDisconnected's and
	// JobReconnectFailed's reason. These two also name the execute slot
	// (SlotName) and, for JobDisconnected, its host (Host); JobReconnected
	// names the slot it reconnected to (SlotName) and its startd (Host).
	Message string

	ErrorKind int // ExecutableError: ErrNotExecutable or ErrBadLink

	Checkpointed bool // Evicted
	// TerminatedAndRequeued is an Evicted event of a job that ran to its
	// end and that its OnExitRemove kept in the queue (max_retries): it
	// says how the job ended (TerminatedNormally, ReturnValue, Signal,
	// CoreFile) and why it was kept (Message).
	TerminatedAndRequeued bool

	// Terminated (and Evicted with TerminatedAndRequeued):
	TerminatedNormally bool
	ReturnValue        int    // exit code when TerminatedNormally
	Signal             int    // terminating signal otherwise
	CoreFile           string // core file path, if any
	RunRemote          Usage
	RunLocal           Usage
	TotalRemote        Usage
	TotalLocal         Usage
	SentBytes          int64
	ReceivedBytes      int64
	TotalSentBytes     int64
	TotalReceivedBytes int64
	Resources          []Resource

	// ImageSize:
	ImageSizeKB       int64
	MemoryUsageMB     int64
	ResidentSetSizeKB int64

	// Held:
	HoldCode    int
	HoldSubCode int

	NumPIDs int // Suspended

	TransferKind  int   // FileTransfer: TransferInputStarted, ...
	QueueingDelay int64 // FileTransfer: seconds spent in the transfer queue

	// Body holds the body lines of event types this package does not
	// interpret, without their leading tab.
	Body []string
}

// ID returns the job id as "cluster.proc".
func (e Event) ID() string { return fmt.Sprintf("%d.%d", e.Cluster, e.Proc) }

func formatUsage(u Usage) string {
	return "Usr " + formatDur(u.User) + ", Sys " + formatDur(u.Sys)
}

func formatDur(d time.Duration) string {
	s := int64(d / time.Second)
	if s < 0 {
		s = 0
	}
	return fmt.Sprintf("%d %02d:%02d:%02d", s/86400, s%86400/3600, s%3600/60, s%60)
}

func parseUsage(s string) (Usage, error) {
	var u Usage
	var ud, uh, um, us, sd, sh, sm, ss int64
	n, err := fmt.Sscanf(strings.TrimSpace(s), "Usr %d %d:%d:%d, Sys %d %d:%d:%d", &ud, &uh, &um, &us, &sd, &sh, &sm, &ss)
	if err != nil || n != 8 {
		return u, fmt.Errorf("bad usage %q (want \"Usr d hh:mm:ss, Sys d hh:mm:ss\")", s)
	}
	u.User = time.Duration(((ud*24+uh)*60+um)*60+us) * time.Second
	u.Sys = time.Duration(((sd*24+sh)*60+sm)*60+ss) * time.Second
	return u, nil
}
