// Package submit reads HTCondor submit description files and expands them
// into job ClassAds, as condor_submit does.
//
// A File is parsed once; Jobs expands it for a given cluster id into one
// attribute map per job, whose values are ClassAd expression text
// (strings quoted, e.g. Cmd = "/bin/echo"), using HTCondor's attribute
// names.
package submit

import (
	"fmt"
	"strings"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/macro"
)

// Error is a submit file error located at file:line:col; it is the
// configuration language's error type, which submit files share.
type Error = config.Error

// Warning is a non-fatal remark about a submit file, such as a command
// condor_submit does not know.
type Warning struct {
	File      string
	Line, Col int
	Msg       string
}

// String formats the warning as "file:line:col: WARNING: msg".
func (w Warning) String() string {
	return fmt.Sprintf("%s:%d:%d: WARNING: %s", w.File, w.Line, w.Col, w.Msg)
}

// QueueMode is how a queue statement supplies item data.
type QueueMode int

// Queue statement forms.
const (
	QueuePlain    QueueMode = iota // queue [N]
	QueueIn                        // queue [N] [vars] in (items)
	QueueFrom                      // queue [N] [vars] from file | (lines)
	QueueMatching                  // queue [N] [var] matching [files|dirs] globs
)

// Queue is one parsed queue statement.
type Queue struct {
	Line, Col int
	Count     string    // count expression text ("" means 1); may hold macros
	Vars      []string  // loop variable names (default Item when items are given)
	Mode      QueueMode // how items are supplied
	Slice     string    // optional Python-style slice "[start:end:step]"
	Items     []string  // inline items (in) or inline lines (from)
	Inline    bool      // items were given inline in parentheses
	FromFile  string    // file name for "from file" (may hold macros)
	Globs     []string  // patterns for matching
	Match     string    // "", "files" or "dirs"
}

// stmt is one statement of a submit file in order.
type stmt struct {
	line, col int
	key       string // command or macro name as written ("+Foo" and "MY.Foo" kept)
	value     string
	queue     *Queue
	dir       string // "if", "elif", "else", "endif" or "include"; value holds its argument
}

// File is a parsed submit description file.
type File struct {
	Name     string
	stmts    []stmt
	warnings []Warning
	src      string // the text parsed, for a job factory's digest
}

// Warnings returns the warnings found while parsing (unknown commands
// that are not used as macros either).
func (f *File) Warnings() []Warning { return f.warnings }

// Queues returns the file's queue statements in order.
func (f *File) Queues() []Queue {
	var out []Queue
	for _, s := range f.stmts {
		if s.queue != nil {
			out = append(out, *s.queue)
		}
	}
	return out
}

// Get returns the last raw value given to a command or macro in the file
// (case-insensitive), ignoring queue boundaries.
func (f *File) Get(name string) (string, bool) {
	v, ok := "", false
	for _, s := range f.stmts {
		if s.queue == nil && s.dir == "" && strings.EqualFold(s.key, name) {
			v, ok = s.value, true
		}
	}
	return v, ok
}

type line struct {
	text string
	num  int
}

// Parse parses a submit description file. Syntax errors are reported as
// *Error with file:line:col; unknown commands become Warnings.
func Parse(name string, src []byte) (*File, error) {
	f := &File{Name: name, src: string(src)}
	text := strings.ReplaceAll(string(src), "\r\n", "\n")
	phys := strings.Split(text, "\n")
	var lines []line
	var depth []int // lines of open if statements
	for i := 0; i < len(phys); i++ {
		start := i + 1
		var l string
		l, i = macro.JoinContinued(phys, i)
		lines = append(lines, line{l, start})
	}
	for i := 0; i < len(lines); i++ {
		ln := lines[i]
		t := strings.TrimSpace(ln.text)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		col := strings.Index(ln.text, t) + 1
		word := t
		if j := strings.IndexAny(t, " \t=("); j >= 0 {
			word = t[:j]
		}
		if strings.EqualFold(word, "queue") && !strings.HasPrefix(strings.TrimSpace(t[len(word):]), "=") {
			rest := t[len(word):]
			// An inline list in parentheses may span lines.
			if open := strings.IndexByte(rest, '('); open >= 0 && !strings.Contains(rest[open:], ")") {
				closed := false
				for i+1 < len(lines) {
					i++
					rest += "\n" + lines[i].text
					if strings.Contains(lines[i].text, ")") {
						closed = true
						break
					}
				}
				if !closed {
					return nil, &Error{File: name, Line: ln.num, Col: col + len(word) + open, Msg: "queue item list opened with ( is never closed"}
				}
			}
			q, err := parseQueue(rest)
			if err != nil {
				return nil, &Error{File: name, Line: ln.num, Col: col, Msg: "bad queue statement", Err: err}
			}
			q.Line, q.Col = ln.num, col
			f.stmts = append(f.stmts, stmt{line: ln.num, col: col, queue: q})
			continue
		}
		if d, arg, ok := directive(t); ok {
			switch d {
			case "if":
				depth = append(depth, ln.num)
			case "elif", "else":
				if len(depth) == 0 {
					return nil, &Error{File: name, Line: ln.num, Col: col, Msg: d + " without if"}
				}
			case "endif":
				if len(depth) == 0 {
					return nil, &Error{File: name, Line: ln.num, Col: col, Msg: "endif without if"}
				}
				depth = depth[:len(depth)-1]
			case "include":
				if arg == "" {
					return nil, &Error{File: name, Line: ln.num, Col: col, Msg: "include needs a file name (include : FILE)"}
				}
			}
			f.stmts = append(f.stmts, stmt{line: ln.num, col: col, dir: d, value: arg})
			continue
		}
		eq := strings.IndexByte(t, '=')
		if eq < 0 {
			return nil, &Error{File: name, Line: ln.num, Col: col, Msg: fmt.Sprintf("expected command = value or queue, got %q", clip(t))}
		}
		key := strings.TrimSpace(t[:eq])
		if err := checkKey(key); err != nil {
			return nil, &Error{File: name, Line: ln.num, Col: col, Msg: err.Error()}
		}
		f.stmts = append(f.stmts, stmt{line: ln.num, col: col, key: key, value: strings.TrimSpace(t[eq+1:])})
	}
	if len(depth) > 0 {
		return nil, &Error{File: name, Line: depth[len(depth)-1], Col: 1, Msg: "if without endif"}
	}
	f.warnings = f.unusedWarnings()
	return f, nil
}

// directive recognises if/elif/else/endif and include lines.
func directive(t string) (string, string, bool) {
	word, rest := t, ""
	if i := strings.IndexAny(t, " \t:!"); i >= 0 {
		word, rest = t[:i], t[i:]
	}
	lw := strings.ToLower(word)
	trimmed := strings.TrimSpace(rest)
	switch lw {
	case "if", "elif":
		if strings.HasPrefix(trimmed, "=") && !strings.HasPrefix(trimmed, "==") {
			return "", "", false
		}
		return lw, trimmed, true
	case "else", "endif":
		if trimmed == "" {
			return lw, "", true
		}
	case "include":
		if strings.HasPrefix(trimmed, ":") {
			return lw, strings.TrimSpace(trimmed[1:]), true
		}
	}
	return "", "", false
}

func checkKey(key string) error {
	name := key
	switch {
	case strings.HasPrefix(key, "+"):
		name = key[1:]
	case len(key) > 3 && strings.EqualFold(key[:3], "MY."):
		name = key[3:]
	}
	if name == "" {
		return fmt.Errorf("missing name before =")
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch == '_' || ch == '.' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || (i > 0 && ch >= '0' && ch <= '9')) {
			return fmt.Errorf("invalid command or attribute name %q", clip(key))
		}
	}
	return nil
}

// unusedWarnings flags commands that condor_submit does not know and that
// no value refers to as a macro.
func (f *File) unusedWarnings() []Warning {
	var all strings.Builder
	for _, s := range f.stmts {
		all.WriteString(s.value)
		all.WriteByte('\n')
		if s.queue != nil {
			all.WriteString(s.queue.Count + " " + s.queue.FromFile + " " + strings.Join(s.queue.Globs, " ") + " " + strings.Join(s.queue.Items, " "))
		}
	}
	used := strings.ToLower(all.String())
	// A macro "if defined NAME" tests is used too.
	defined := map[string]bool{}
	for _, s := range f.stmts {
		if s.dir != "if" && s.dir != "elif" {
			continue
		}
		c := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s.value), "!"))
		if w, rest, ok := strings.Cut(c, " "); ok && strings.EqualFold(w, "defined") {
			defined[strings.ToLower(strings.TrimSpace(rest))] = true
		}
	}
	var out []Warning
	for _, s := range f.stmts {
		if s.queue != nil || s.dir != "" || strings.HasPrefix(s.key, "+") || strings.HasPrefix(strings.ToUpper(s.key), "MY.") {
			continue
		}
		lk := strings.ToLower(s.key)
		if v := strings.ToUpper(strings.TrimSpace(s.value)); lk == "should_transfer_files" && (v == "NO" || v == "FALSE") {
			// Not ignored in silence: pond has no shared file system
			// mode.
			out = append(out, Warning{File: f.Name, Line: s.line, Col: s.col,
				Msg: "should_transfer_files = NO: pond runs every job in a scratch directory of its own on the execute node, as a user of its own, not in its initialdir on a shared file system; files the job reads there by relative names are not found (transfer them instead)"})
		}
		if _, ok := ignoredCommands[lk]; ok {
			out = append(out, Warning{File: f.Name, Line: s.line, Col: s.col,
				Msg: fmt.Sprintf("submit command %s is not supported by pond and is ignored", lk)})
			continue
		}
		if _, ok := knownCommands[lk]; ok {
			continue
		}
		if defined[lk] || strings.Contains(used, "("+lk+")") || strings.Contains(used, "("+lk+":") || strings.Contains(used, "("+lk+",") {
			continue
		}
		out = append(out, Warning{File: f.Name, Line: s.line, Col: s.col,
			Msg: fmt.Sprintf("the line '%s = %s' was unused by condor_submit. Is it a typo?", s.key, s.value)})
	}
	return out
}

// parseQueue parses what follows the queue keyword: a count, the loop
// variables, then in, from or matching with its options and items.
func parseQueue(rest string) (*Queue, error) {
	q := &Queue{}
	kwPos, kw := queueKeyword(rest)
	head := rest
	if kwPos >= 0 {
		head = rest[:kwPos]
	}
	if err := q.parseHead(head, kwPos >= 0); err != nil {
		return nil, err
	}
	if kwPos < 0 {
		return q, nil
	}
	if len(q.Vars) == 0 {
		q.Vars = []string{"Item"}
	}
	if err := q.parseTail(kw, strings.TrimSpace(rest[kwPos+len(kw):])); err != nil {
		return nil, err
	}
	return q, nil
}

// queueKeyword locates the in/from/matching keyword of rest as a whole
// word outside parentheses: its position and lower-case spelling, or -1.
func queueKeyword(rest string) (int, string) {
	for _, w := range wordSpans(rest) {
		lw := strings.ToLower(rest[w[0]:w[1]])
		if lw == "in" || lw == "from" || lw == "matching" {
			return w[0], lw
		}
		if strings.ContainsAny(rest[w[0]:w[1]], "(") {
			break
		}
	}
	return -1, ""
}

// parseHead parses the count and the loop variables before the keyword
// (hasKw) or the end.
func (q *Queue) parseHead(head string, hasKw bool) error {
	toks := strings.FieldsFunc(head, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' })
	if len(toks) > 0 && (toks[0][0] >= '0' && toks[0][0] <= '9' || toks[0][0] == '$' || toks[0][0] == '(') {
		if !hasKw {
			// Everything is the count expression.
			q.Count = strings.TrimSpace(head)
			toks = nil
		} else {
			q.Count = toks[0]
			toks = toks[1:]
		}
	}
	for _, v := range toks {
		if !isIdent(v) {
			if !hasKw {
				return fmt.Errorf("unexpected %q (expected a count, or variables followed by in, from or matching)", v)
			}
			return fmt.Errorf("invalid loop variable name %q", v)
		}
		q.Vars = append(q.Vars, v)
	}
	if !hasKw && len(q.Vars) > 0 {
		return fmt.Errorf("variables %s need in, from or matching", strings.Join(q.Vars, ","))
	}
	return nil
}

// parseTail parses what follows the keyword kw: matching's files or dirs,
// a slice, and the items, inline in parentheses or not.
func (q *Queue) parseTail(kw, tail string) error {
	if kw == "matching" {
		w, r := cutWord(tail)
		if lw := strings.ToLower(w); lw == "files" || lw == "dirs" {
			q.Match, tail = lw, r
		}
	}
	if strings.HasPrefix(tail, "[") {
		end := strings.IndexByte(tail, ']')
		if end < 0 {
			return fmt.Errorf("slice %q is missing ]", tail)
		}
		q.Slice = tail[:end+1]
		if _, _, _, err := parseSlice(q.Slice); err != nil {
			return err
		}
		tail = strings.TrimSpace(tail[end+1:])
	}
	body := tail
	if strings.HasPrefix(tail, "(") {
		end := strings.LastIndexByte(tail, ')')
		if end < 0 {
			return fmt.Errorf("item list opened with ( is never closed")
		}
		if extra := strings.TrimSpace(tail[end+1:]); extra != "" {
			return fmt.Errorf("unexpected %q after item list", extra)
		}
		body = tail[1:end]
		q.Inline = true
	}
	switch kw {
	case "in":
		q.Mode = QueueIn
		q.Items = strings.FieldsFunc(body, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
		if len(q.Items) == 0 {
			return fmt.Errorf("empty item list after in")
		}
	case "from":
		q.Mode = QueueFrom
		return q.parseFrom(body)
	case "matching":
		q.Mode = QueueMatching
		if len(q.Vars) > 1 {
			return fmt.Errorf("matching takes one variable, got %d", len(q.Vars))
		}
		q.Globs = strings.FieldsFunc(body, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
		if len(q.Globs) == 0 {
			return fmt.Errorf("matching needs at least one pattern")
		}
	}
	return nil
}

// parseFrom parses the items of queue from: lines of an inline list, or
// the name of the file that holds them.
func (q *Queue) parseFrom(body string) error {
	if !q.Inline {
		if body == "" {
			return fmt.Errorf("from needs a file name or an inline ( list )")
		}
		if strings.HasSuffix(body, "|") {
			return fmt.Errorf("queue from a command (%q) is not supported", body)
		}
		q.FromFile = body
		return nil
	}
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		q.Items = append(q.Items, l)
	}
	// Drop the blank remainder of the opening and closing lines.
	for len(q.Items) > 0 && strings.TrimSpace(q.Items[0]) == "" {
		q.Items = q.Items[1:]
	}
	for len(q.Items) > 0 && strings.TrimSpace(q.Items[len(q.Items)-1]) == "" {
		q.Items = q.Items[:len(q.Items)-1]
	}
	return nil
}

// wordSpans returns [start,end) spans of whitespace-separated words in s,
// stopping at the first parenthesis.
func wordSpans(s string) [][2]int {
	var out [][2]int
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		if i >= len(s) || s[i] == '(' || s[i] == '[' {
			break
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' && s[j] != ',' && s[j] != '(' && s[j] != '[' {
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

func cutWord(s string) (string, string) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, " \t(")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || (i > 0 && (ch >= '0' && ch <= '9' || ch == '.'))) {
			return false
		}
	}
	return true
}

// parseSlice parses "[start:end:step]"; missing parts are reported as
// ok=false through nil pointers.
func parseSlice(s string) (start, end, step *int, err error) {
	inner := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	parts := strings.Split(inner, ":")
	if len(parts) > 3 {
		return nil, nil, nil, fmt.Errorf("bad slice %q", s)
	}
	var vals [3]*int
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || fmt.Sprint(n) != strings.TrimPrefix(p, "+") {
			return nil, nil, nil, fmt.Errorf("bad slice %q: %q is not an integer", s, p)
		}
		vals[i] = &n
	}
	if vals[2] != nil && *vals[2] == 0 {
		return nil, nil, nil, fmt.Errorf("bad slice %q: step is zero", s)
	}
	return vals[0], vals[1], vals[2], nil
}

// applySlice selects items as Python's items[start:end:step] would.
func applySlice(items []string, slice string) ([]string, error) {
	if slice == "" {
		return items, nil
	}
	s0, e0, st0, err := parseSlice(slice)
	if err != nil {
		return nil, err
	}
	n := len(items)
	step := 1
	if st0 != nil {
		step = *st0
	}
	norm := func(p *int, def int) int {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += n
		}
		if step > 0 {
			return max(0, min(v, n))
		}
		return max(-1, min(v, n-1))
	}
	var out []string
	if step > 0 {
		for i := norm(s0, 0); i < norm(e0, n); i += step {
			out = append(out, items[i])
		}
	} else {
		for i := norm(s0, n-1); i > norm(e0, -1); i += step {
			out = append(out, items[i])
		}
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
