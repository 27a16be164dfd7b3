package joblog

import (
	"fmt"
	"strconv"
	"strings"
)

// eventType is how the log writes and reads one event type: its name,
// the reader that fills an Event from the header's text and the body
// lines, and the writer of the header's text and the body lines.
// A nil reader or writer keeps the text as Body, as for event types this
// package does not interpret.
type eventType struct {
	name  string
	read  func(r *bodyReader, text string) error
	write func(w *eventWriter, ev *Event) error
}

// eventTypes has one entry per event code, in the order of the codes.
var eventTypes = map[EventType]eventType{
	Submit:             {"SubmitEvent", readSubmit, writeSubmit},
	Execute:            {"ExecuteEvent", readExecute, writeExecute},
	ExecutableError:    {"ExecutableErrorEvent", readExecutableError, writeExecutableError},
	Checkpointed:       {"CheckpointedEvent", nil, nil},
	Evicted:            {"JobEvictedEvent", readTermination, writeEvicted},
	Terminated:         {"JobTerminatedEvent", readTermination, writeTerminated},
	ImageSize:          {"JobImageSizeEvent", readImageSize, writeImageSize},
	ShadowException:    {"ShadowExceptionEvent", readShadowException, writeShadowException},
	Generic:            {"GenericEvent", readGeneric, writeGeneric},
	Aborted:            {"JobAbortedEvent", readMessage, writeAborted},
	Suspended:          {"JobSuspendedEvent", readSuspended, writeSuspended},
	Unsuspended:        {"JobUnsuspendedEvent", readUnsuspended, writeUnsuspended},
	Held:               {"JobHeldEvent", readHeld, writeHeld},
	Released:           {"JobReleaseEvent", readMessage, writeReleased},
	JobDisconnected:    {"JobDisconnectedEvent", readDisconnection, writeJobDisconnected},
	JobReconnected:     {"JobReconnectedEvent", readJobReconnected, writeJobReconnected},
	JobReconnectFailed: {"JobReconnectFailedEvent", readDisconnection, writeJobReconnectFailed},
	FileTransfer:       {"FileTransferEvent", readFileTransfer, writeFileTransfer},
}

// Submit (000).

func readSubmit(r *bodyReader, text string) error {
	r.ev.Host = strings.TrimSpace(strings.TrimPrefix(text, "Job submitted from host:"))
	for i, t := range r.trimmed {
		if r.ev.Notes == "" && !strings.HasPrefix(t, "DAG Node:") && t != "" {
			r.ev.Notes = t
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeSubmit(w *eventWriter, ev *Event) error {
	w.header("Job submitted from host: %s", oneLine(ev.Host))
	if ev.Notes != "" {
		w.indented("%s", oneLine(ev.Notes))
	}
	return nil
}

// Execute (001).

func readExecute(r *bodyReader, text string) error {
	r.ev.Host = strings.TrimSpace(strings.TrimPrefix(text, "Job executing on host:"))
	for i, t := range r.trimmed {
		if v, ok := strings.CutPrefix(t, "SlotName:"); ok {
			r.ev.SlotName = strings.TrimSpace(v)
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeExecute(w *eventWriter, ev *Event) error {
	w.header("Job executing on host: %s", oneLine(ev.Host))
	if ev.SlotName != "" {
		w.line("SlotName: %s", oneLine(ev.SlotName))
	}
	return nil
}

// ExecutableError (002).

func readExecutableError(r *bodyReader, text string) error {
	if strings.HasPrefix(text, "(1)") {
		r.ev.ErrorKind = ErrBadLink
	}
	r.keepAll()
	return nil
}

func writeExecutableError(w *eventWriter, ev *Event) error {
	switch ev.ErrorKind {
	case ErrBadLink:
		w.header("(%d) Job not properly linked for Condor.", ErrBadLink)
	default:
		w.header("(%d) Job file not executable.", ErrNotExecutable)
	}
	return nil
}

// Evicted (004) and Terminated (005).

// readTermination reads the body of Evicted and Terminated events: how
// the job ended, its usage, byte counters and resources.
func readTermination(r *bodyReader, _ string) error {
	ev := r.ev
	for i, t := range r.trimmed {
		switch {
		case t == "(1) Job was checkpointed.":
			ev.Checkpointed = true
		case t == "(0) Job was not checkpointed.":
		case t == "(0) Job terminated and was requeued":
			ev.TerminatedAndRequeued = true
		case ev.TerminatedAndRequeued && strings.HasPrefix(t, "The ") && ev.Message == "":
			// Why the job was kept in the queue.
			ev.Message = t
		case strings.HasPrefix(t, "(1) Normal termination (return value "):
			v := strings.TrimSuffix(strings.TrimPrefix(t, "(1) Normal termination (return value "), ")")
			n, err := strconv.Atoi(v)
			if err != nil {
				return r.bad(i, fmt.Sprintf("bad return value %q", v))
			}
			ev.TerminatedNormally, ev.ReturnValue = true, n
		case strings.HasPrefix(t, "(0) Abnormal termination (signal "):
			v := strings.TrimSuffix(strings.TrimPrefix(t, "(0) Abnormal termination (signal "), ")")
			n, err := strconv.Atoi(v)
			if err != nil {
				return r.bad(i, fmt.Sprintf("bad signal %q", v))
			}
			ev.Signal = n
		case t == "(0) No core file":
		case strings.HasPrefix(t, "(1) Corefile in: "):
			ev.CoreFile = strings.TrimPrefix(t, "(1) Corefile in: ")
		default:
			if err := r.sharedOrKeep(i); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeEvicted(w *eventWriter, ev *Event) error {
	w.header("Job was evicted.")
	switch {
	case ev.TerminatedAndRequeued:
		w.line("(0) Job terminated and was requeued")
	case ev.Checkpointed:
		w.line("(1) Job was checkpointed.")
	default:
		w.line("(0) Job was not checkpointed.")
	}
	w.usage(ev.RunRemote, "Run Remote Usage")
	w.usage(ev.RunLocal, "Run Local Usage")
	w.bytes(ev.SentBytes, "Run Bytes Sent By Job")
	w.bytes(ev.ReceivedBytes, "Run Bytes Received By Job")
	if ev.TerminatedAndRequeued {
		writeEnd(w, ev)
		if ev.Message != "" {
			w.line("%s", oneLine(ev.Message))
		}
	}
	w.resources(ev.Resources)
	return nil
}

// writeEnd writes how a job ended: its exit code, or its signal and core
// file.
func writeEnd(w *eventWriter, ev *Event) {
	if ev.TerminatedNormally {
		w.line("(1) Normal termination (return value %d)", ev.ReturnValue)
		return
	}
	w.line("(0) Abnormal termination (signal %d)", ev.Signal)
	if ev.CoreFile != "" {
		w.line("(1) Corefile in: %s", oneLine(ev.CoreFile))
	} else {
		w.line("(0) No core file")
	}
}

func writeTerminated(w *eventWriter, ev *Event) error {
	w.header("Job terminated.")
	writeEnd(w, ev)
	w.usage(ev.RunRemote, "Run Remote Usage")
	w.usage(ev.RunLocal, "Run Local Usage")
	w.usage(ev.TotalRemote, "Total Remote Usage")
	w.usage(ev.TotalLocal, "Total Local Usage")
	w.bytes(ev.SentBytes, "Run Bytes Sent By Job")
	w.bytes(ev.ReceivedBytes, "Run Bytes Received By Job")
	w.bytes(ev.TotalSentBytes, "Total Bytes Sent By Job")
	w.bytes(ev.TotalReceivedBytes, "Total Bytes Received By Job")
	w.resources(ev.Resources)
	return nil
}

// ImageSize (006).

func readImageSize(r *bodyReader, text string) error {
	ev := r.ev
	v := strings.TrimSpace(strings.TrimPrefix(text, "Image size of job updated:"))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return &SyntaxError{Line: r.headerLine, Col: 1, Msg: fmt.Sprintf("bad image size %q", v)}
	}
	ev.ImageSizeKB = n
	for i, t := range r.trimmed {
		v, label, ok := strings.Cut(t, "  -  ")
		if ok && (label == "MemoryUsage of job (MB)" || label == "ResidentSetSize of job (KB)") {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return r.bad(i, fmt.Sprintf("bad number %q", v))
			}
			if label == "MemoryUsage of job (MB)" {
				ev.MemoryUsageMB = n
			} else {
				ev.ResidentSetSizeKB = n
			}
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeImageSize(w *eventWriter, ev *Event) error {
	w.header("Image size of job updated: %d", ev.ImageSizeKB)
	w.line("%d  -  MemoryUsage of job (MB)", ev.MemoryUsageMB)
	w.line("%d  -  ResidentSetSize of job (KB)", ev.ResidentSetSizeKB)
	return nil
}

// ShadowException (007).

func readShadowException(r *bodyReader, _ string) error {
	for i, t := range r.trimmed {
		ok, err := r.shared(i)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		if r.ev.Message == "" {
			r.ev.Message = t
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeShadowException(w *eventWriter, ev *Event) error {
	w.header("Shadow exception!")
	w.line("%s", oneLine(ev.Message))
	w.bytes(ev.SentBytes, "Run Bytes Sent By Job")
	w.bytes(ev.ReceivedBytes, "Run Bytes Received By Job")
	return nil
}

// Generic (008).

func readGeneric(r *bodyReader, text string) error {
	r.ev.Message = text
	r.keepAll()
	return nil
}

func writeGeneric(w *eventWriter, ev *Event) error {
	w.header("%s", oneLine(ev.Message))
	return nil
}

// Aborted (009) and Released (013).

// readMessage reads a body whose first non-empty line is the event's
// message (Aborted, Released).
func readMessage(r *bodyReader, _ string) error {
	for i, t := range r.trimmed {
		if r.ev.Message == "" && t != "" {
			r.ev.Message = t
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeAborted(w *eventWriter, ev *Event) error {
	w.header("Job was aborted.")
	if ev.Message != "" {
		w.line("%s", oneLine(ev.Message))
	}
	return nil
}

func writeReleased(w *eventWriter, ev *Event) error {
	w.header("Job was released.")
	if ev.Message != "" {
		w.line("%s", oneLine(ev.Message))
	}
	return nil
}

// Suspended (010) and Unsuspended (011).

func readSuspended(r *bodyReader, _ string) error {
	for i := range r.trimmed {
		n, ok, err := r.intAfter(i, "Number of processes actually suspended:")
		if err != nil {
			return err
		}
		if ok {
			r.ev.NumPIDs = int(n)
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeSuspended(w *eventWriter, ev *Event) error {
	w.header("Job was suspended.")
	w.line("Number of processes actually suspended: %d", ev.NumPIDs)
	return nil
}

func readUnsuspended(r *bodyReader, _ string) error {
	r.keepAll()
	return nil
}

func writeUnsuspended(w *eventWriter, _ *Event) error {
	w.header("Job was unsuspended.")
	return nil
}

// Held (012).

func readHeld(r *bodyReader, _ string) error {
	ev := r.ev
	for i, t := range r.trimmed {
		if strings.HasPrefix(t, "Code ") {
			var c, s int
			if n, err := fmt.Sscanf(t, "Code %d Subcode %d", &c, &s); err != nil || n != 2 {
				return r.bad(i, fmt.Sprintf("expected \"Code N Subcode M\", got %q", t))
			}
			ev.HoldCode, ev.HoldSubCode = c, s
			continue
		}
		if ev.Message == "" && t != "" {
			ev.Message = t
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeHeld(w *eventWriter, ev *Event) error {
	w.header("Job was held.")
	msg := ev.Message
	if msg == "" {
		msg = "Reason unspecified"
	}
	w.line("%s", oneLine(msg))
	w.line("Code %d Subcode %d", ev.HoldCode, ev.HoldSubCode)
	return nil
}

// JobDisconnected (022), JobReconnected (023) and JobReconnectFailed (024).
// HTCondor indents these events' lines with four spaces.

// readDisconnection reads JobDisconnected and JobReconnectFailed: the
// reason and the slot (and host) the job was on.
func readDisconnection(r *bodyReader, _ string) error {
	ev := r.ev
	for i, t := range r.trimmed {
		if v, ok := strings.CutPrefix(t, "Trying to reconnect to "); ok && ev.Type == JobDisconnected {
			slot, host, _ := strings.Cut(v, " ")
			ev.SlotName, ev.Host = slot, host
			continue
		}
		if v, ok := strings.CutPrefix(t, "Can not reconnect to "); ok && ev.Type == JobReconnectFailed {
			if slot, ok := strings.CutSuffix(v, ", rescheduling job"); ok {
				ev.SlotName = slot
				continue
			}
		}
		if ev.Message == "" && t != "" {
			ev.Message = t
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeJobDisconnected(w *eventWriter, ev *Event) error {
	w.header("Job disconnected, attempting to reconnect")
	w.indented("%s", oneLine(ev.Message))
	w.indented("Trying to reconnect to %s %s", oneLine(ev.SlotName), oneLine(ev.Host))
	return nil
}

func readJobReconnected(r *bodyReader, text string) error {
	r.ev.SlotName = strings.TrimSpace(strings.TrimPrefix(text, "Job reconnected to"))
	for i, t := range r.trimmed {
		if v, ok := strings.CutPrefix(t, "startd address:"); ok {
			r.ev.Host = strings.TrimSpace(v)
			continue
		}
		if v, ok := strings.CutPrefix(t, "starter address:"); ok {
			r.ev.StarterHost = strings.TrimSpace(v)
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeJobReconnected(w *eventWriter, ev *Event) error {
	w.header("Job reconnected to %s", oneLine(ev.SlotName))
	w.indented("startd address: %s", oneLine(ev.Host))
	w.indented("starter address: %s", oneLine(ev.StarterHost))
	return nil
}

func writeJobReconnectFailed(w *eventWriter, ev *Event) error {
	w.header("Job reconnection failed")
	w.indented("%s", oneLine(ev.Message))
	w.indented("Can not reconnect to %s, rescheduling job", oneLine(ev.SlotName))
	return nil
}

// FileTransfer (040).

// transferKinds names the FileTransfer kinds in the header's text.
var transferKinds = map[int]string{
	TransferInputStarted: "Started transferring input files", TransferInputFinished: "Finished transferring input files",
	TransferOutputStarted: "Started transferring output files", TransferOutputFinished: "Finished transferring output files",
}

func readFileTransfer(r *bodyReader, text string) error {
	for kind, what := range transferKinds {
		if strings.TrimSpace(text) == what {
			r.ev.TransferKind = kind
		}
	}
	for i, t := range r.trimmed {
		n, ok, err := r.intAfter(i, "Seconds spent in queue:")
		if err != nil {
			return err
		}
		if ok {
			r.ev.QueueingDelay = n
			continue
		}
		if v, ok := strings.CutPrefix(t, "Transferring to host:"); ok {
			r.ev.Host = strings.TrimSpace(v)
			continue
		}
		r.keep(i)
	}
	return nil
}

func writeFileTransfer(w *eventWriter, ev *Event) error {
	what, ok := transferKinds[ev.TransferKind]
	if !ok {
		return fmt.Errorf("file transfer event: unknown kind %d", ev.TransferKind)
	}
	w.header("%s", what)
	if ev.QueueingDelay > 0 {
		w.line("Seconds spent in queue: %d", ev.QueueingDelay)
	}
	if ev.Host != "" {
		w.line("Transferring to host: %s", oneLine(ev.Host))
	}
	return nil
}

// Event types without an entry, or with neither reader nor writer: the
// header's text and the body lines are kept as Body.

func readOther(r *bodyReader, text string) error {
	r.ev.Body = append([]string{text}, r.ev.Body...)
	r.keepAll()
	return nil
}

func writeOther(w *eventWriter, ev *Event) error {
	if len(ev.Body) == 0 {
		return fmt.Errorf("cannot write event type %d without a body", int(ev.Type))
	}
	w.header("%s", oneLine(ev.Body[0]))
	for _, l := range ev.Body[1:] {
		w.line("%s", oneLine(l))
	}
	return nil
}
