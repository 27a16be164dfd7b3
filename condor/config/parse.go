package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/macro"
)

// Version is the HTCondor version pond's daemons claim compatibility with;
// "if version >= X" conditionals compare against it.
const Version = "25.0.0"

// ifState tracks one level of if/elif/else/endif.
type ifState struct {
	active  bool // lines in the current branch are live
	taken   bool // some branch of this if has been taken
	inElse  bool // the else branch has started
	outerOn bool // the enclosing level is live
	line    int  // line of the if, for unterminated-if errors
}

// logical is one logical line: physical lines joined by continuations.
type logical struct {
	text string
	line int // first physical line
}

// splitLines joins continuation lines ("\" at end of line) and handles the
// multi-line NAME @=TAG ... @TAG form, which it returns as a single
// logical line "NAME = value".
func splitLines(name string, src []byte) ([]logical, error) {
	text := strings.ReplaceAll(string(src), "\r\n", "\n")
	phys := strings.Split(text, "\n")
	var out []logical
	for i := 0; i < len(phys); i++ {
		line := phys[i]
		start := i + 1
		trimmed := strings.TrimSpace(line)
		// NAME @=TAG multi-line value.
		if at := strings.Index(trimmed, "@="); at > 0 && !strings.HasPrefix(trimmed, "#") {
			n := strings.TrimSpace(trimmed[:at])
			tag := strings.TrimSpace(trimmed[at+2:])
			if validName(n) && tag != "" && !strings.ContainsAny(tag, " \t") {
				var body []string
				closed := false
				for i++; i < len(phys); i++ {
					t := strings.TrimSpace(phys[i])
					if strings.HasPrefix(t, "@"+tag) {
						closed = true
						break
					}
					body = append(body, strings.TrimSpace(phys[i]))
				}
				if !closed {
					return nil, &Error{File: name, Line: start, Col: at + 1, Msg: fmt.Sprintf("multi-line value %s @=%s is never closed by @%s", n, tag, tag)}
				}
				out = append(out, logical{text: n + " = " + strings.Join(body, "\n"), line: start})
				continue
			}
		}
		line, i = macro.JoinContinued(phys, i)
		out = append(out, logical{text: line, line: start})
	}
	return out, nil
}

func (c *Config) parse(name string, src []byte, depth int) error {
	if depth > c.opts.IncludeDepth {
		return &Error{File: name, Msg: fmt.Sprintf("include nesting deeper than %d", c.opts.IncludeDepth)}
	}
	lines, err := splitLines(name, src)
	if err != nil {
		return err
	}
	var ifs []ifState
	live := func() bool { return len(ifs) == 0 || ifs[len(ifs)-1].active }
	for _, ln := range lines {
		raw := ln.text
		text := strings.TrimSpace(raw)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		col := strings.Index(raw, text) + 1
		errAt := func(msg string, err error) error {
			return &Error{File: name, Line: ln.line, Col: col, Msg: msg, Err: err}
		}
		word, rest := firstWord(text)
		lw := strings.ToLower(word)
		// Conditionals are recognised even on dead branches.
		switch lw {
		case "if":
			st := ifState{outerOn: live(), line: ln.line}
			if st.outerOn {
				ok, err := c.evalCond(rest)
				if err != nil {
					return errAt("bad if condition", err)
				}
				st.active, st.taken = ok, ok
			}
			ifs = append(ifs, st)
			continue
		case "elif":
			if len(ifs) == 0 {
				return errAt("elif without if", nil)
			}
			st := &ifs[len(ifs)-1]
			if st.inElse {
				return errAt("elif after else", nil)
			}
			st.active = false
			if st.outerOn && !st.taken {
				ok, err := c.evalCond(rest)
				if err != nil {
					return errAt("bad elif condition", err)
				}
				st.active, st.taken = ok, ok
			}
			continue
		case "else":
			if strings.TrimSpace(rest) == "" {
				if len(ifs) == 0 {
					return errAt("else without if", nil)
				}
				st := &ifs[len(ifs)-1]
				if st.inElse {
					return errAt("second else for the same if", nil)
				}
				st.inElse = true
				st.active = st.outerOn && !st.taken
				st.taken = true
				continue
			}
		case "endif":
			if strings.TrimSpace(rest) == "" {
				if len(ifs) == 0 {
					return errAt("endif without if", nil)
				}
				ifs = ifs[:len(ifs)-1]
				continue
			}
		}
		if !live() {
			continue
		}
		eq := strings.IndexByte(text, '=')
		colon := strings.IndexByte(text, ':')
		if colon >= 0 && (eq < 0 || colon < eq) {
			switch lw {
			case "include", "use", "error", "warning":
				head := strings.Fields(strings.ToLower(text[:colon]))
				arg := strings.TrimSpace(text[colon+1:])
				if err := c.directive(name, ln.line, col, head, arg, depth); err != nil {
					return err
				}
				continue
			}
		}
		if eq < 0 {
			return errAt(fmt.Sprintf("expected NAME = value, got %q", clip(text)), nil)
		}
		key := strings.TrimSpace(text[:eq])
		if !validName(key) {
			return errAt(fmt.Sprintf("invalid configuration name %q", clip(key)), nil)
		}
		val := strings.TrimSpace(text[eq+1:])
		if err := c.define(key, val, Source{File: name, Line: ln.line}); err != nil {
			return errAt("cannot define "+key, err)
		}
	}
	if len(ifs) > 0 {
		return &Error{File: name, Line: ifs[len(ifs)-1].line, Msg: "if without endif"}
	}
	return nil
}

func (c *Config) directive(file string, line, col int, head []string, arg string, depth int) error {
	errAt := func(msg string, err error) error {
		return &Error{File: file, Line: line, Col: col, Msg: msg, Err: err}
	}
	expanded, err := c.expand(arg, nil)
	if err != nil {
		return errAt("cannot expand "+head[0]+" argument", err)
	}
	switch head[0] {
	case "error":
		return errAt("error: "+expanded, nil)
	case "warning":
		if c.opts.Warn != nil {
			c.opts.Warn(fmt.Sprintf("%s:%d: warning: %s", file, line, expanded))
		}
		return nil
	case "use":
		if len(head) != 2 {
			return errAt("expected use CATEGORY : template[, template...]", nil)
		}
		for _, t := range splitTemplates(expanded) {
			src, err := metaknob(head[1], t)
			if err != nil {
				return errAt("use "+head[1]+":"+t, err)
			}
			if err := c.parse(fmt.Sprintf("<use %s:%s>", strings.ToUpper(head[1]), t), []byte(src), depth+1); err != nil {
				return errAt("use "+head[1]+":"+t, err)
			}
		}
		return nil
	case "include":
		ifExist := false
		for _, w := range head[1:] {
			switch w {
			case "ifexist":
				ifExist = true
			default:
				return errAt(fmt.Sprintf("include %s is not supported (only include and include ifexist)", w), nil)
			}
		}
		if expanded == "" {
			return errAt("include needs a path", nil)
		}
		path := resolvePath(file, expanded)
		src, err := os.ReadFile(path)
		if err != nil {
			if ifExist && errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return errAt("cannot include "+path, err)
		}
		return c.parse(path, src, depth+1)
	}
	return errAt("unknown directive "+head[0], nil)
}

// splitTemplates splits "A, B(1,2), C" on top-level commas.
func splitTemplates(s string) []string {
	var out []string
	for _, t := range splitArgs(s) {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// evalCond evaluates an if/elif condition as HTCondor does: true/false,
// yes/no, integers (non-zero is true), "defined NAME", "version OP X.Y[.Z]"
// and "!" before any of these, after macro expansion. Comparisons and
// boolean operators are refused, as HTCondor refuses them.
func (c *Config) evalCond(cond string) (bool, error) {
	cond = strings.TrimSpace(cond)
	if cond == "" {
		return false, errors.New("empty condition")
	}
	if strings.HasPrefix(cond, "!") {
		v, err := c.evalCond(cond[1:])
		return !v, err
	}
	word, rest := firstWord(cond)
	switch strings.ToLower(word) {
	case "defined":
		n := strings.TrimSpace(rest)
		if n == "" {
			return false, nil
		}
		if strings.Contains(n, "$") {
			v, err := c.expand(n, nil)
			if err != nil {
				return false, err
			}
			n = strings.TrimSpace(v)
			if n == "" {
				return false, nil
			}
		}
		v, ok := c.Get(n)
		return ok && strings.TrimSpace(v) != "", nil
	case "version":
		return compareVersion(rest)
	}
	exp, err := c.expand(cond, nil)
	if err != nil {
		return false, err
	}
	exp = strings.TrimSpace(exp)
	if strings.ContainsAny(exp, "=<>&|") {
		return false, fmt.Errorf("%q: complex conditionals are not supported (only true/false, numbers, defined NAME and version OP X.Y.Z)", exp)
	}
	if b, ok := ParseBool(exp); ok {
		return b, nil
	}
	if f, _, err := evalArith(exp); err == nil {
		return f != 0, nil
	}
	return false, fmt.Errorf("%q is not a conditional", exp)
}

func compareVersion(rest string) (bool, error) {
	rest = strings.TrimSpace(rest)
	op := ">="
	for _, o := range []string{"==", "!=", ">=", "<=", ">", "<"} {
		if strings.HasPrefix(rest, o) {
			op = o
			rest = strings.TrimSpace(rest[len(o):])
			break
		}
	}
	want, err := parseVersion(rest)
	if err != nil {
		return false, err
	}
	have, _ := parseVersion(Version)
	r := 0
	for i := range 3 {
		if have[i] != want[i] {
			r = cmpFloat(float64(have[i]), float64(want[i]))
			break
		}
	}
	return cmpOp(op, r), nil
}

func parseVersion(s string) ([3]int, error) {
	var v [3]int
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("bad version %q", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("bad version %q", s)
		}
		v[i] = n
	}
	return v, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpOp(op string, r int) bool {
	switch op {
	case "==":
		return r == 0
	case "!=":
		return r != 0
	case ">=":
		return r >= 0
	case "<=":
		return r <= 0
	case ">":
		return r > 0
	case "<":
		return r < 0
	}
	return false
}

func firstWord(s string) (string, string) {
	i := strings.IndexAny(s, " \t:=!<>")
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
