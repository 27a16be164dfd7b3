package joblog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// SyntaxError reports malformed log text at line:col.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

// Error implements error as "line:col: msg".
func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// ErrIncomplete is returned (wrapped) when input ends inside an event,
// before its "..." line; a writer may still be appending it.
var ErrIncomplete = errors.New(`event not terminated by a "..." line`)

// maxLine bounds a log line so that garbage input cannot exhaust memory.
const maxLine = 1 << 20

// Reader reads events one at a time.
type Reader struct {
	br   *bufio.Reader
	line int
	loc  *time.Location
	now  func() time.Time
}

// NewReader returns a Reader of r interpreting event times in loc
// (time.Local when nil).
func NewReader(r io.Reader, loc *time.Location) *Reader {
	if loc == nil {
		loc = time.Local
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), loc: loc, now: time.Now}
}

func (r *Reader) readLine() (string, error) {
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return "", &SyntaxError{Line: r.line + 1, Col: 1, Msg: fmt.Sprintf("line longer than %d bytes", maxLine)}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(buf) > 0 {
				// A final line without newline is incomplete.
				return string(buf), io.ErrUnexpectedEOF
			}
			return "", err
		}
		r.line++
		return strings.TrimRight(string(buf), "\r\n"), nil
	}
}

// Next returns the next event, io.EOF at the clean end of input, an error
// wrapping ErrIncomplete when input ends inside an event, or a
// *SyntaxError for malformed text.
func (r *Reader) Next() (Event, error) {
	var header string
	var headerLine int
	for {
		l, err := r.readLine()
		if err == io.EOF {
			return Event{}, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return Event{}, fmt.Errorf("line %d: %w", r.line+1, ErrIncomplete)
		}
		if err != nil {
			return Event{}, err
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		header, headerLine = l, r.line
		break
	}
	ev, rest, err := r.parseHeader(header, headerLine)
	if err != nil {
		return Event{}, err
	}
	var body []string
	var lines []int
	for {
		l, err := r.readLine()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return Event{}, fmt.Errorf("event at line %d: %w", headerLine, ErrIncomplete)
		}
		if err != nil {
			return Event{}, err
		}
		if l == "..." {
			break
		}
		body = append(body, l)
		lines = append(lines, r.line)
	}
	if err := interpret(&ev, rest, headerLine, body, lines); err != nil {
		return Event{}, err
	}
	return ev, nil
}

func (r *Reader) parseHeader(l string, line int) (Event, string, error) {
	var ev Event
	bad := func(col int, msg string) error { return &SyntaxError{Line: line, Col: col, Msg: msg} }
	if len(l) < 4 || !isDigits(l[:3]) || l[3] != ' ' {
		return ev, "", bad(1, fmt.Sprintf("expected an event header \"NNN (cluster.proc.subproc) date time ...\", got %q", clip(l)))
	}
	n, _ := strconv.Atoi(l[:3])
	ev.Type = EventType(n)
	rest := l[4:]
	if !strings.HasPrefix(rest, "(") {
		return ev, "", bad(5, "expected ( before the job id")
	}
	end := strings.IndexByte(rest, ')')
	if end < 0 {
		return ev, "", bad(5, "job id is missing its )")
	}
	parts := strings.Split(rest[1:end], ".")
	if len(parts) != 3 {
		return ev, "", bad(6, fmt.Sprintf("job id %q is not cluster.proc.subproc", rest[1:end]))
	}
	ids := make([]int, 3)
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || !isDigits(p) {
			return ev, "", bad(6, fmt.Sprintf("job id %q is not cluster.proc.subproc", rest[1:end]))
		}
		ids[i] = v
	}
	ev.Cluster, ev.Proc, ev.Subproc = ids[0], ids[1], ids[2]
	col := 4 + end + 2
	rest = strings.TrimPrefix(rest[end+1:], " ")
	fields := strings.SplitN(rest, " ", 3)
	if len(fields) < 2 {
		return ev, "", bad(col+1, "expected a date and time after the job id")
	}
	t, err := r.parseTime(fields[0], fields[1])
	if err != nil {
		return ev, "", bad(col+1, err.Error())
	}
	ev.Time = t
	text := ""
	if len(fields) == 3 {
		text = fields[2]
	}
	return ev, text, nil
}

func (r *Reader) parseTime(date, clock string) (time.Time, error) {
	loc := r.loc
	if strings.HasSuffix(clock, "Z") {
		clock, loc = strings.TrimSuffix(clock, "Z"), time.UTC
	}
	if strings.Contains(date, "/") {
		// Old form "MM/DD hh:mm:ss" without a year: assume the most recent.
		t, err := time.ParseInLocation("01/02 15:04:05", date+" "+clock, loc)
		if err != nil {
			return time.Time{}, fmt.Errorf("bad event time %q", date+" "+clock)
		}
		now := r.now().In(loc)
		t = t.AddDate(now.Year(), 0, 0)
		if t.After(now.Add(24 * time.Hour)) {
			t = t.AddDate(-1, 0, 0)
		}
		return t, nil
	}
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999999", date+" "+clock, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad event time %q", date+" "+clock)
	}
	return t, nil
}

// interpret fills event fields from the header text and body lines.
func interpret(ev *Event, text string, headerLine int, body []string, lines []int) error {
	bad := func(i int, msg string) error {
		return &SyntaxError{Line: lines[i], Col: 1 + len(body[i]) - len(strings.TrimLeft(body[i], " \t")), Msg: msg}
	}
	trimmed := make([]string, len(body))
	for i, l := range body {
		trimmed[i] = strings.TrimSpace(l)
	}
	// Shared body lines: usage and byte counters, resources.
	inRes := false
	shared := func(i int) (bool, error) {
		t := trimmed[i]
		if v, label, ok := strings.Cut(t, "  -  "); ok {
			switch label {
			case "Run Remote Usage", "Run Local Usage", "Total Remote Usage", "Total Local Usage":
				u, err := parseUsage(v)
				if err != nil {
					return true, bad(i, err.Error())
				}
				switch label {
				case "Run Remote Usage":
					ev.RunRemote = u
				case "Run Local Usage":
					ev.RunLocal = u
				case "Total Remote Usage":
					ev.TotalRemote = u
				default:
					ev.TotalLocal = u
				}
				return true, nil
			case "Run Bytes Sent By Job", "Run Bytes Received By Job", "Total Bytes Sent By Job", "Total Bytes Received By Job":
				n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return true, bad(i, fmt.Sprintf("bad byte count %q", v))
				}
				switch label {
				case "Run Bytes Sent By Job":
					ev.SentBytes = int64(n)
				case "Run Bytes Received By Job":
					ev.ReceivedBytes = int64(n)
				case "Total Bytes Sent By Job":
					ev.TotalSentBytes = int64(n)
				default:
					ev.TotalReceivedBytes = int64(n)
				}
				return true, nil
			}
		}
		if strings.HasPrefix(t, "Partitionable Resources") {
			inRes = true
			return true, nil
		}
		if inRes && strings.Contains(t, " : ") && strings.HasPrefix(strings.TrimPrefix(body[i], "\t"), "   ") {
			name, cells, _ := strings.Cut(t, ":")
			f := strings.Fields(cells)
			r := Resource{Name: strings.TrimSpace(name)}
			switch len(f) {
			case 3:
				r.Usage, r.Request, r.Allocated = f[0], f[1], f[2]
			case 2:
				r.Request, r.Allocated = f[0], f[1]
			case 1:
				r.Allocated = f[0]
			}
			ev.Resources = append(ev.Resources, r)
			return true, nil
		}
		return false, nil
	}
	keep := func(i int) { ev.Body = append(ev.Body, strings.TrimPrefix(body[i], "\t")) }
	intAfter := func(i int, prefix string) (int64, bool, error) {
		if !strings.HasPrefix(trimmed[i], prefix) {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(trimmed[i][len(prefix):]), 10, 64)
		if err != nil {
			return 0, true, bad(i, fmt.Sprintf("bad number after %q", prefix))
		}
		return n, true, nil
	}
	switch ev.Type {
	case Submit:
		ev.Host = strings.TrimSpace(strings.TrimPrefix(text, "Job submitted from host:"))
		for i := range body {
			if ev.Notes == "" && !strings.HasPrefix(trimmed[i], "DAG Node:") && trimmed[i] != "" {
				ev.Notes = trimmed[i]
				continue
			}
			keep(i)
		}
	case Execute:
		ev.Host = strings.TrimSpace(strings.TrimPrefix(text, "Job executing on host:"))
		for i := range body {
			if v, ok := strings.CutPrefix(trimmed[i], "SlotName:"); ok {
				ev.SlotName = strings.TrimSpace(v)
				continue
			}
			keep(i)
		}
	case ExecutableError:
		if strings.HasPrefix(text, "(1)") {
			ev.ErrorKind = ErrBadLink
		}
		for i := range body {
			keep(i)
		}
	case Evicted, Terminated:
		for i := range body {
			t := trimmed[i]
			switch {
			case t == "(1) Job was checkpointed.":
				ev.Checkpointed = true
			case t == "(0) Job was not checkpointed.":
			case strings.HasPrefix(t, "(1) Normal termination (return value "):
				v := strings.TrimSuffix(strings.TrimPrefix(t, "(1) Normal termination (return value "), ")")
				n, err := strconv.Atoi(v)
				if err != nil {
					return bad(i, fmt.Sprintf("bad return value %q", v))
				}
				ev.TerminatedNormally, ev.ReturnValue = true, n
			case strings.HasPrefix(t, "(0) Abnormal termination (signal "):
				v := strings.TrimSuffix(strings.TrimPrefix(t, "(0) Abnormal termination (signal "), ")")
				n, err := strconv.Atoi(v)
				if err != nil {
					return bad(i, fmt.Sprintf("bad signal %q", v))
				}
				ev.Signal = n
			case t == "(0) No core file":
			case strings.HasPrefix(t, "(1) Corefile in: "):
				ev.CoreFile = strings.TrimPrefix(t, "(1) Corefile in: ")
			default:
				ok, err := shared(i)
				if err != nil {
					return err
				}
				if !ok {
					keep(i)
				}
			}
		}
	case ImageSize:
		v := strings.TrimSpace(strings.TrimPrefix(text, "Image size of job updated:"))
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return &SyntaxError{Line: headerLine, Col: 1, Msg: fmt.Sprintf("bad image size %q", v)}
		}
		ev.ImageSizeKB = n
		for i := range body {
			v, label, ok := strings.Cut(trimmed[i], "  -  ")
			if ok && (label == "MemoryUsage of job (MB)" || label == "ResidentSetSize of job (KB)") {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return bad(i, fmt.Sprintf("bad number %q", v))
				}
				if label == "MemoryUsage of job (MB)" {
					ev.MemoryUsageMB = n
				} else {
					ev.ResidentSetSizeKB = n
				}
				continue
			}
			keep(i)
		}
	case ShadowException:
		for i := range body {
			ok, err := shared(i)
			if err != nil {
				return err
			}
			if ok {
				continue
			}
			if ev.Message == "" {
				ev.Message = trimmed[i]
				continue
			}
			keep(i)
		}
	case Unsuspended:
		for i := range body {
			keep(i)
		}
	case Generic:
		ev.Message = text
		for i := range body {
			keep(i)
		}
	case Aborted, Released:
		for i := range body {
			if ev.Message == "" && trimmed[i] != "" {
				ev.Message = trimmed[i]
				continue
			}
			keep(i)
		}
	case JobReconnected:
		ev.SlotName = strings.TrimSpace(strings.TrimPrefix(text, "Job reconnected to"))
		for i := range body {
			if v, ok := strings.CutPrefix(trimmed[i], "startd address:"); ok {
				ev.Host = strings.TrimSpace(v)
				continue
			}
			if v, ok := strings.CutPrefix(trimmed[i], "starter address:"); ok {
				ev.StarterHost = strings.TrimSpace(v)
				continue
			}
			keep(i)
		}
	case JobDisconnected, JobReconnectFailed:
		for i := range body {
			t := trimmed[i]
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
			keep(i)
		}
	case Held:
		for i := range body {
			if strings.HasPrefix(trimmed[i], "Code ") {
				var c, s int
				if n, err := fmt.Sscanf(trimmed[i], "Code %d Subcode %d", &c, &s); err != nil || n != 2 {
					return bad(i, fmt.Sprintf("expected \"Code N Subcode M\", got %q", trimmed[i]))
				}
				ev.HoldCode, ev.HoldSubCode = c, s
				continue
			}
			if ev.Message == "" && trimmed[i] != "" {
				ev.Message = trimmed[i]
				continue
			}
			keep(i)
		}
	case Suspended:
		for i := range body {
			n, ok, err := intAfter(i, "Number of processes actually suspended:")
			if err != nil {
				return err
			}
			if ok {
				ev.NumPIDs = int(n)
				continue
			}
			keep(i)
		}
	case FileTransfer:
		kind, ok := map[string]int{
			"Started transferring input files": TransferInputStarted, "Finished transferring input files": TransferInputFinished,
			"Started transferring output files": TransferOutputStarted, "Finished transferring output files": TransferOutputFinished,
		}[strings.TrimSpace(text)]
		if ok {
			ev.TransferKind = kind
		}
		for i := range body {
			n, ok, err := intAfter(i, "Seconds spent in queue:")
			if err != nil {
				return err
			}
			if ok {
				ev.QueueingDelay = n
				continue
			}
			if v, ok := strings.CutPrefix(trimmed[i], "Transferring to host:"); ok {
				ev.Host = strings.TrimSpace(v)
				continue
			}
			keep(i)
		}
	default:
		ev.Body = append([]string{text}, ev.Body...)
		for i := range body {
			keep(i)
		}
	}
	return nil
}

// ReadAll reads every event from r.
func ReadAll(r io.Reader, loc *time.Location) ([]Event, error) {
	rd := NewReader(r, loc)
	var out []Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// ReadFile reads the complete events of the log at path from byte offset
// on and returns them with the offset just past the last complete event,
// so that a follower can call it again to read what was appended since.
// An event still being written is left for the next call.
func ReadFile(path string, offset int64, loc *time.Location) ([]Event, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, offset, fmt.Errorf("job log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, fmt.Errorf("job log %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, offset, fmt.Errorf("job log %s: %w", path, err)
	}
	// Only complete events: cut after the last "...\n" line.
	end := bytes.LastIndex(data, []byte("\n...\n"))
	switch {
	case end >= 0:
		end += len("\n...\n")
	case bytes.HasPrefix(data, []byte("...\n")):
		end = len("...\n")
	default:
		return nil, offset, nil
	}
	events, err := ReadAll(bytes.NewReader(data[:end]), loc)
	if err != nil {
		return events, offset, fmt.Errorf("job log %s (from byte %d): %w", path, offset, err)
	}
	return events, offset + int64(end), nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
