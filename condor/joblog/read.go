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

// interpret fills event fields from the header text and body lines, with
// the reader of the event's type.
func interpret(ev *Event, text string, headerLine int, body []string, lines []int) error {
	r := &bodyReader{ev: ev, headerLine: headerLine, body: body, lines: lines, trimmed: make([]string, len(body))}
	for i, l := range body {
		r.trimmed[i] = strings.TrimSpace(l)
	}
	read := eventTypes[ev.Type].read
	if read == nil {
		read = readOther
	}
	return read(r, text)
}

// bodyReader holds the body lines of one event while the reader of its
// type fills the event from them.
type bodyReader struct {
	ev         *Event
	headerLine int
	body       []string // the body lines as read
	lines      []int    // their line numbers
	trimmed    []string // the body lines without surrounding white space
	inRes      bool     // inside the "Partitionable Resources" table
}

// bad returns a *SyntaxError at body line i.
func (r *bodyReader) bad(i int, msg string) error {
	return &SyntaxError{Line: r.lines[i], Col: 1 + len(r.body[i]) - len(strings.TrimLeft(r.body[i], " \t")), Msg: msg}
}

// keep keeps body line i, not interpreted, in Event.Body.
func (r *bodyReader) keep(i int) { r.ev.Body = append(r.ev.Body, strings.TrimPrefix(r.body[i], "\t")) }

// keepAll keeps every body line in Event.Body.
func (r *bodyReader) keepAll() {
	for i := range r.body {
		r.keep(i)
	}
}

// intAfter reads the integer after prefix on body line i; ok is false
// when the line does not start with prefix.
func (r *bodyReader) intAfter(i int, prefix string) (n int64, ok bool, err error) {
	if !strings.HasPrefix(r.trimmed[i], prefix) {
		return 0, false, nil
	}
	n, err = strconv.ParseInt(strings.TrimSpace(r.trimmed[i][len(prefix):]), 10, 64)
	if err != nil {
		return 0, true, r.bad(i, fmt.Sprintf("bad number after %q", prefix))
	}
	return n, true, nil
}

// sharedOrKeep reads body line i as a shared line, or keeps it.
func (r *bodyReader) sharedOrKeep(i int) error {
	ok, err := r.shared(i)
	if err != nil {
		return err
	}
	if !ok {
		r.keep(i)
	}
	return nil
}

// shared reads body line i if it is one of the lines several event types
// share: usage, byte counters, the resources table. ok says whether it
// was.
func (r *bodyReader) shared(i int) (ok bool, err error) {
	t := r.trimmed[i]
	if v, label, ok := strings.Cut(t, "  -  "); ok {
		if u, ok := r.usageField(label); ok {
			parsed, err := parseUsage(v)
			if err != nil {
				return true, r.bad(i, err.Error())
			}
			*u = parsed
			return true, nil
		}
		if n, ok := r.bytesField(label); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return true, r.bad(i, fmt.Sprintf("bad byte count %q", v))
			}
			*n = int64(f)
			return true, nil
		}
	}
	if strings.HasPrefix(t, "Partitionable Resources") {
		r.inRes = true
		return true, nil
	}
	if r.inRes && strings.Contains(t, " : ") && strings.HasPrefix(strings.TrimPrefix(r.body[i], "\t"), "   ") {
		r.ev.Resources = append(r.ev.Resources, parseResource(t))
		return true, nil
	}
	return false, nil
}

// usageField returns the usage field a "usage  -  label" line sets.
func (r *bodyReader) usageField(label string) (*Usage, bool) {
	switch label {
	case "Run Remote Usage":
		return &r.ev.RunRemote, true
	case "Run Local Usage":
		return &r.ev.RunLocal, true
	case "Total Remote Usage":
		return &r.ev.TotalRemote, true
	case "Total Local Usage":
		return &r.ev.TotalLocal, true
	}
	return nil, false
}

// bytesField returns the byte counter a "count  -  label" line sets.
func (r *bodyReader) bytesField(label string) (*int64, bool) {
	switch label {
	case "Run Bytes Sent By Job":
		return &r.ev.SentBytes, true
	case "Run Bytes Received By Job":
		return &r.ev.ReceivedBytes, true
	case "Total Bytes Sent By Job":
		return &r.ev.TotalSentBytes, true
	case "Total Bytes Received By Job":
		return &r.ev.TotalReceivedBytes, true
	}
	return nil, false
}

// parseResource reads a row "name : usage request allocated" of the
// resources table; missing cells are the leading ones.
func parseResource(t string) Resource {
	name, cells, _ := strings.Cut(t, ":")
	f := strings.Fields(cells)
	res := Resource{Name: strings.TrimSpace(name)}
	switch len(f) {
	case 3:
		res.Usage, res.Request, res.Allocated = f[0], f[1], f[2]
	case 2:
		res.Request, res.Allocated = f[0], f[1]
	case 1:
		res.Allocated = f[0]
	}
	return res
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
