// Package dagman is pond's DAG manager, HTCondor's DAGMan: Parse reads a
// DAG input file in DAGMan's language (JOB, PARENT ... CHILD, RETRY,
// VARS, SCRIPT, PRE_SKIP, ABORT-DAG-ON, PRIORITY, CATEGORY, MAXJOBS,
// FINAL, SPLICE, SUBDAG EXTERNAL, CONFIG, DOT, NODE_STATUS_FILE and the
// ALL_NODES name), and a Manager runs the DAG: it submits each node's
// jobs once its parents are done, follows the nodes' job event log, runs
// the PRE and POST scripts, retries failed nodes, and writes a rescue DAG
// when the DAG fails.
package dagman

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// AllNodes is the node name that stands for every node but the FINAL one
// in RETRY, VARS, SCRIPT, PRE_SKIP, ABORT-DAG-ON, PRIORITY and CATEGORY.
const AllNodes = "ALL_NODES"

// maxFile bounds a DAG input file, maxSpliceDepth the nesting of splices.
const (
	maxFile        = 64 << 20
	maxSpliceDepth = 32
)

// Error is a mistake in a DAG input file, at File:Line:Col (Col 0 when
// the mistake is the whole line).
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

// Error implements error as "file:line:col: msg".
func (e *Error) Error() string {
	if e.Col > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Var is one macro of a VARS line: Name (which may start with "+" or
// "My." to set a job attribute) and its unquoted Value.
type Var struct {
	Name, Value string
	// Prepend is true for VARS ... PREPEND: the macro is defined before
	// the submit file is read, so the file's own definition wins.
	Prepend bool
}

// Script is a node's PRE or POST script: the executable and its
// arguments, which may hold $JOB, $RETRY, $MAX_RETRIES, $JOBID, $RETURN,
// $PRE_SCRIPT_RETURN, $DAG_STATUS and $FAILED_COUNT.
type Script struct {
	Exe  string
	Args []string
	// DeferStatus and DeferTime: a script exiting with DeferStatus is
	// run again after DeferTime, not counted as a failure.
	DeferStatus int
	DeferTime   time.Duration
	Deferred    bool
}

// Node is one node of a DAG.
type Node struct {
	// Name is the node's name; a node of a splice is "splice+node".
	Name string
	// SubmitFile is the node's submit description (or, for a SUBDAG
	// EXTERNAL node, its DAG file), Dir the directory it is submitted
	// from ("" for the DAG file's own).
	SubmitFile, Dir string
	Noop, Done      bool
	// SubDAG is true for SUBDAG EXTERNAL nodes, Final for the FINAL node.
	SubDAG, Final bool
	Parents       []string
	Children      []string
	// Retry is the number of retries; RetryUnlessExit, when set, is the
	// exit code after which the node is not retried.
	Retry           int
	RetryUnlessExit *int
	Vars            []Var
	Pre, Post       *Script
	// PreSkip, when set, is the PRE script's exit code that marks the
	// node done without running its job or POST script.
	PreSkip *int
	// AbortOn, when set, is ABORT-DAG-ON: the exit value of the node
	// that aborts the DAG, with the DAG's own exit code.
	AbortOn  *Abort
	Priority int
	Category string
	// File and Line are where the node was defined.
	File string
	Line int

	set map[string]bool // settings given for this node by name
}

// Abort is an ABORT-DAG-ON: when the node exits with Value the DAG is
// aborted and exits with Return (the node's value when HasReturn is
// false).
type Abort struct {
	Value     int
	Return    int
	HasReturn bool
}

// Dot is the DOT command: a Graphviz file of the DAG.
type Dot struct {
	File      string
	Update    bool
	Overwrite bool
	Include   string
}

// DAG is a parsed DAG input file, splices merged in.
type DAG struct {
	// File is the DAG file's path.
	File string
	// Nodes are the nodes in the order they were defined.
	Nodes []*Node
	// Final is the FINAL node, nil when there is none.
	Final *Node
	// MaxJobs are the CATEGORY throttles (MAXJOBS).
	MaxJobs map[string]int
	// Config is the CONFIG file, Dot the DOT command, NodeStatusFile and
	// NodeStatusInterval the NODE_STATUS_FILE command.
	Config             string
	Dot                *Dot
	NodeStatusFile     string
	NodeStatusInterval time.Duration
	NodeStatusAlways   bool

	byName map[string]*Node
}

// Node returns the node named name, or nil.
func (d *DAG) Node(name string) *Node { return d.byName[name] }

// ParseFile reads and parses the DAG input file path.
func ParseFile(path string) (*DAG, error) {
	text, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, text)
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxFile {
		return nil, &Error{File: path, Msg: fmt.Sprintf("larger than %d bytes", maxFile)}
	}
	buf := make([]byte, st.Size())
	n, err := f.Read(buf)
	if err != nil && n < len(buf) && st.Size() > 0 {
		return nil, err
	}
	return buf[:n], nil
}

// Parse parses the text of the DAG input file name. SPLICE and INCLUDE
// files are read relative to the DAG file's directory (or the splice's
// DIR). Every mistake is an *Error naming file:line; a cycle among the
// nodes is one too, naming them.
func Parse(name string, text []byte) (*DAG, error) {
	p := &parser{readFile: readBounded}
	d, err := p.parse(name, text, "", 0)
	if err != nil {
		return nil, err
	}
	if err := d.link(); err != nil {
		return nil, err
	}
	return d, nil
}

type parser struct {
	readFile func(string) ([]byte, error)
}

// token is a word of a line and its 1-based column.
type token struct {
	s   string
	col int
}

func fields(line string) []token {
	var out []token
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
			i++
		}
		if i >= len(line) {
			break
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '\r' {
			j++
		}
		out = append(out, token{line[i:j], i + 1})
		i = j
	}
	return out
}

type pending struct {
	file    string
	line    int
	col     int
	parents []token
	childs  []token
}

type allSetting struct {
	apply func(n *Node) error
	key   string
	file  string
	line  int
}

// lineErr makes errors at one line of one file.
type lineErr struct {
	file string
	line int
}

func (l lineErr) at(col int, format string, a ...any) error {
	return &Error{File: l.file, Line: l.line, Col: col, Msg: fmt.Sprintf(format, a...)}
}

// parse parses one file; prefix is the splice's name and "+" for a
// splice's nodes, dir the directory node submit files are relative to.
func (p *parser) parse(name string, text []byte, prefix string, depth int) (*DAG, error) {
	d := &DAG{File: name, MaxJobs: map[string]int{}, byName: map[string]*Node{}}
	var edges []pending
	var all []allSetting
	splices := map[string]*DAG{}
	baseDir := filepath.Dir(name)
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		le := lineErr{name, i + 1}
		if strings.IndexByte(line, 0) >= 0 {
			return nil, le.at(strings.IndexByte(line, 0)+1, "NUL byte in the DAG file")
		}
		t := fields(line)
		if len(t) == 0 || strings.HasPrefix(t[0].s, "#") {
			continue
		}
		kw := strings.ToUpper(t[0].s)
		args := t[1:]
		switch kw {
		case "JOB", "FINAL", "SUBDAG":
			sub := false
			if kw == "SUBDAG" {
				if len(args) == 0 || !strings.EqualFold(args[0].s, "EXTERNAL") {
					return nil, le.at(t[0].col, "SUBDAG must be followed by EXTERNAL")
				}
				args, sub = args[1:], true
			}
			if len(args) < 2 {
				return nil, le.at(t[0].col, "%s needs a node name and a file", kw)
			}
			if args[1].s == "{" {
				return nil, le.at(args[1].col, "inline submit descriptions are not supported: give a submit file")
			}
			n := &Node{Name: args[0].s, SubmitFile: args[1].s, SubDAG: sub, Final: kw == "FINAL", File: name, Line: i + 1,
				set: map[string]bool{}}
			if err := checkName(le, args[0]); err != nil {
				return nil, err
			}
			rest := args[2:]
			for k := 0; k < len(rest); k++ {
				switch strings.ToUpper(rest[k].s) {
				case "DIR":
					if k+1 >= len(rest) {
						return nil, le.at(rest[k].col, "DIR needs a directory")
					}
					n.Dir = rest[k+1].s
					k++
				case "NOOP":
					n.Noop = true
				case "DONE":
					if n.Final {
						return nil, le.at(rest[k].col, "a FINAL node cannot be DONE")
					}
					n.Done = true
				default:
					return nil, le.at(rest[k].col, "unexpected %q after %s %s (DIR, NOOP or DONE)", rest[k].s, kw, n.Name)
				}
			}
			if n.Final {
				if prefix != "" {
					return nil, le.at(t[0].col, "a splice cannot have a FINAL node")
				}
				if d.Final != nil {
					return nil, le.at(t[0].col, "a second FINAL node %s (%s is defined at %s:%d)", n.Name, d.Final.Name, d.Final.File, d.Final.Line)
				}
			}
			n.Name = prefix + n.Name
			if n.Dir != "" && prefix != "" && !filepath.IsAbs(n.Dir) {
				n.Dir = filepath.Join(baseDir, n.Dir)
			} else if n.Dir == "" && prefix != "" {
				n.Dir = baseDir
			}
			if old := d.byName[n.Name]; old != nil {
				return nil, le.at(args[0].col, "node %s is already defined at %s:%d", n.Name, old.File, old.Line)
			}
			if splices[args[0].s] != nil {
				return nil, le.at(args[0].col, "%s is already the name of a splice", args[0].s)
			}
			d.byName[n.Name] = n
			d.Nodes = append(d.Nodes, n)
			if n.Final {
				d.Final = n
			}
		case "SPLICE":
			if len(args) < 2 {
				return nil, le.at(t[0].col, "SPLICE needs a name and a DAG file")
			}
			if err := checkName(le, args[0]); err != nil {
				return nil, err
			}
			sname, sfile, sdir := args[0].s, args[1].s, ""
			rest := args[2:]
			if len(rest) == 2 && strings.EqualFold(rest[0].s, "DIR") {
				sdir = rest[1].s
			} else if len(rest) > 0 {
				return nil, le.at(rest[0].col, "unexpected %q after SPLICE %s %s (DIR)", rest[0].s, sname, sfile)
			}
			if splices[sname] != nil || d.byName[prefix+sname] != nil {
				return nil, le.at(args[0].col, "%s is already defined", sname)
			}
			if depth >= maxSpliceDepth {
				return nil, le.at(args[0].col, "splices nested deeper than %d (a splice including itself?)", maxSpliceDepth)
			}
			dir := baseDir
			if sdir != "" {
				if filepath.IsAbs(sdir) {
					dir = sdir
				} else {
					dir = filepath.Join(baseDir, sdir)
				}
			}
			path := sfile
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			text, err := p.readFile(path)
			if err != nil {
				return nil, le.at(args[1].col, "reading splice %s: %v", sname, err)
			}
			sd, err := p.parse(path, text, prefix+sname+"+", depth+1)
			if err != nil {
				return nil, err
			}
			for _, n := range sd.Nodes {
				if old := d.byName[n.Name]; old != nil {
					return nil, le.at(args[0].col, "splice node %s is already defined at %s:%d", n.Name, old.File, old.Line)
				}
				d.byName[n.Name] = n
				d.Nodes = append(d.Nodes, n)
			}
			for c, v := range sd.MaxJobs {
				if _, ok := d.MaxJobs[c]; !ok {
					d.MaxJobs[c] = v
				}
			}
			splices[sname] = sd
		case "INCLUDE":
			return nil, le.at(t[0].col, "INCLUDE is not supported by pond's DAG manager: use SPLICE")
		case "PARENT":
			ci := -1
			for k, a := range args {
				if strings.EqualFold(a.s, "CHILD") {
					ci = k
					break
				}
			}
			if ci < 0 {
				return nil, le.at(t[0].col, "PARENT without CHILD")
			}
			if ci == 0 {
				return nil, le.at(args[0].col, "PARENT names no parent")
			}
			if ci == len(args)-1 {
				return nil, le.at(args[ci].col, "CHILD names no child")
			}
			edges = append(edges, pending{file: name, line: i + 1, col: t[0].col, parents: args[:ci], childs: args[ci+1:]})
		case "RETRY":
			if len(args) != 2 && len(args) != 4 {
				return nil, le.at(t[0].col, "RETRY needs a node and a count [UNLESS-EXIT value]")
			}
			n, err := strconv.Atoi(args[1].s)
			if err != nil || n < 0 {
				return nil, le.at(args[1].col, "retry count %q is not a non-negative integer", args[1].s)
			}
			var unless *int
			if len(args) == 4 {
				if !strings.EqualFold(args[2].s, "UNLESS-EXIT") {
					return nil, le.at(args[2].col, "expected UNLESS-EXIT, not %q", args[2].s)
				}
				v, err := strconv.Atoi(args[3].s)
				if err != nil {
					return nil, le.at(args[3].col, "UNLESS-EXIT value %q is not an integer", args[3].s)
				}
				unless = &v
			}
			if err := p.setting(d, &all, le, args[0], prefix, "retry", func(nd *Node) error {
				if nd.Final {
					return le.at(args[0].col, "the FINAL node %s cannot be retried", nd.Name)
				}
				nd.Retry, nd.RetryUnlessExit = n, unless
				return nil
			}); err != nil {
				return nil, err
			}
		case "VARS":
			if len(args) < 1 {
				return nil, le.at(t[0].col, "VARS needs a node name")
			}
			vars, err := parseVars(le, line, args[0].col+len(args[0].s))
			if err != nil {
				return nil, err
			}
			if err := p.setting(d, &all, le, args[0], prefix, "", func(nd *Node) error {
				nd.Vars = append(nd.Vars, vars...)
				return nil
			}); err != nil {
				return nil, err
			}
		case "SCRIPT":
			sc := &Script{}
			k := 0
			for k < len(args) {
				u := strings.ToUpper(args[k].s)
				if u == "DEFER" {
					if k+2 >= len(args) {
						return nil, le.at(args[k].col, "DEFER needs an exit status and a time")
					}
					st, err := strconv.Atoi(args[k+1].s)
					if err != nil {
						return nil, le.at(args[k+1].col, "DEFER status %q is not an integer", args[k+1].s)
					}
					secs, err := strconv.Atoi(args[k+2].s)
					if err != nil || secs < 0 {
						return nil, le.at(args[k+2].col, "DEFER time %q is not a non-negative number of seconds", args[k+2].s)
					}
					sc.DeferStatus, sc.DeferTime, sc.Deferred = st, time.Duration(secs)*time.Second, true
					k += 3
					continue
				}
				if u == "DEBUG" {
					return nil, le.at(args[k].col, "SCRIPT DEBUG is not supported")
				}
				break
			}
			if k+2 >= len(args) {
				return nil, le.at(t[0].col, "SCRIPT needs PRE or POST, a node name and an executable")
			}
			which := strings.ToUpper(args[k].s)
			if which != "PRE" && which != "POST" {
				if which == "HOLD" {
					return nil, le.at(args[k].col, "HOLD scripts are not supported")
				}
				return nil, le.at(args[k].col, "expected PRE or POST, not %q", args[k].s)
			}
			sc.Exe = args[k+2].s
			for _, a := range args[k+3:] {
				sc.Args = append(sc.Args, a.s)
			}
			if err := p.setting(d, &all, le, args[k+1], prefix, strings.ToLower(which), func(nd *Node) error {
				c := *sc
				c.Args = slices.Clone(sc.Args)
				if which == "PRE" {
					nd.Pre = &c
				} else {
					nd.Post = &c
				}
				return nil
			}); err != nil {
				return nil, err
			}
		case "PRE_SKIP":
			if len(args) != 2 {
				return nil, le.at(t[0].col, "PRE_SKIP needs a node name and an exit code")
			}
			v, err := strconv.Atoi(args[1].s)
			if err != nil {
				return nil, le.at(args[1].col, "PRE_SKIP exit code %q is not an integer", args[1].s)
			}
			if err := p.setting(d, &all, le, args[0], prefix, "pre_skip", func(nd *Node) error { nd.PreSkip = &v; return nil }); err != nil {
				return nil, err
			}
		case "ABORT-DAG-ON":
			if len(args) != 2 && len(args) != 4 {
				return nil, le.at(t[0].col, "ABORT-DAG-ON needs a node name and an exit value [RETURN code]")
			}
			a := &Abort{}
			v, err := strconv.Atoi(args[1].s)
			if err != nil {
				return nil, le.at(args[1].col, "ABORT-DAG-ON value %q is not an integer", args[1].s)
			}
			a.Value = v
			if len(args) == 4 {
				if !strings.EqualFold(args[2].s, "RETURN") {
					return nil, le.at(args[2].col, "expected RETURN, not %q", args[2].s)
				}
				r, err := strconv.Atoi(args[3].s)
				if err != nil || r < 0 || r > 255 {
					return nil, le.at(args[3].col, "RETURN code %q is not between 0 and 255", args[3].s)
				}
				a.Return, a.HasReturn = r, true
			}
			if err := p.setting(d, &all, le, args[0], prefix, "abort", func(nd *Node) error { c := *a; nd.AbortOn = &c; return nil }); err != nil {
				return nil, err
			}
		case "PRIORITY":
			if len(args) != 2 {
				return nil, le.at(t[0].col, "PRIORITY needs a node name and a priority")
			}
			v, err := strconv.Atoi(args[1].s)
			if err != nil {
				return nil, le.at(args[1].col, "priority %q is not an integer", args[1].s)
			}
			if err := p.setting(d, &all, le, args[0], prefix, "priority", func(nd *Node) error { nd.Priority = v; return nil }); err != nil {
				return nil, err
			}
		case "CATEGORY":
			if len(args) != 2 {
				return nil, le.at(t[0].col, "CATEGORY needs a node name and a category")
			}
			cat := args[1].s
			if !strings.HasPrefix(cat, "+") {
				cat = prefix + cat
			}
			if err := p.setting(d, &all, le, args[0], prefix, "category", func(nd *Node) error { nd.Category = cat; return nil }); err != nil {
				return nil, err
			}
		case "MAXJOBS":
			if len(args) != 2 {
				return nil, le.at(t[0].col, "MAXJOBS needs a category and a number")
			}
			v, err := strconv.Atoi(args[1].s)
			if err != nil || v < 0 {
				return nil, le.at(args[1].col, "MAXJOBS %q is not a non-negative integer", args[1].s)
			}
			cat := args[0].s
			if !strings.HasPrefix(cat, "+") {
				cat = prefix + cat
			}
			d.MaxJobs[cat] = v
		case "CONFIG":
			if len(args) != 1 {
				return nil, le.at(t[0].col, "CONFIG needs one file")
			}
			if d.Config != "" && d.Config != args[0].s {
				return nil, le.at(args[0].col, "a second CONFIG file %s (the first is %s)", args[0].s, d.Config)
			}
			d.Config = args[0].s
		case "DOT":
			if len(args) < 1 {
				return nil, le.at(t[0].col, "DOT needs a file")
			}
			dot := &Dot{File: args[0].s, Overwrite: true}
			for k := 1; k < len(args); k++ {
				switch strings.ToUpper(args[k].s) {
				case "UPDATE":
					dot.Update = true
				case "DONT-UPDATE":
					dot.Update = false
				case "OVERWRITE":
					dot.Overwrite = true
				case "DONT-OVERWRITE":
					dot.Overwrite = false
				case "INCLUDE":
					if k+1 >= len(args) {
						return nil, le.at(args[k].col, "INCLUDE needs a file")
					}
					dot.Include = args[k+1].s
					k++
				default:
					return nil, le.at(args[k].col, "unexpected %q after DOT (UPDATE, DONT-UPDATE, OVERWRITE, DONT-OVERWRITE or INCLUDE)", args[k].s)
				}
			}
			d.Dot = dot
		case "NODE_STATUS_FILE":
			if len(args) < 1 || len(args) > 3 {
				return nil, le.at(t[0].col, "NODE_STATUS_FILE needs a file [minimum update time] [ALWAYS-UPDATE]")
			}
			d.NodeStatusFile, d.NodeStatusInterval = args[0].s, 60*time.Second
			for _, a := range args[1:] {
				if strings.EqualFold(a.s, "ALWAYS-UPDATE") {
					d.NodeStatusAlways = true
					continue
				}
				v, err := strconv.Atoi(a.s)
				if err != nil || v < 0 {
					return nil, le.at(a.col, "NODE_STATUS_FILE update time %q is not a non-negative number of seconds", a.s)
				}
				d.NodeStatusInterval = time.Duration(v) * time.Second
			}
		case "JOBSTATE_LOG", "SET_JOB_ATTR", "ENV", "SAVE_POINT_FILE", "CONNECT", "PIN_IN", "PIN_OUT", "DATA", "REJECT", "SERVICE", "PROVISIONER":
			return nil, le.at(t[0].col, "%s is not supported by pond's DAG manager", kw)
		default:
			return nil, le.at(t[0].col, "unknown command %q", t[0].s)
		}
	}
	// PARENT/CHILD lines may name nodes defined after them, and splices.
	for _, e := range edges {
		le := lineErr{e.file, e.line}
		ps, err := endpoints(d, splices, le, prefix, e.parents, true)
		if err != nil {
			return nil, err
		}
		cs, err := endpoints(d, splices, le, prefix, e.childs, false)
		if err != nil {
			return nil, err
		}
		for _, pn := range ps {
			for _, cn := range cs {
				if pn.Final || cn.Final {
					return nil, le.at(e.col, "the FINAL node %s cannot have parents or children", cmpFinal(pn, cn).Name)
				}
				if !slices.Contains(pn.Children, cn.Name) {
					pn.Children = append(pn.Children, cn.Name)
					cn.Parents = append(cn.Parents, pn.Name)
				}
			}
		}
	}
	// ALL_NODES settings apply to every node but the FINAL one; a node's
	// own setting of the same thing wins wherever it is in the file.
	for _, a := range all {
		for _, n := range d.Nodes {
			if n.Final || !strings.HasPrefix(n.Name, prefix) || strings.Contains(n.Name[len(prefix):], "+") {
				continue
			}
			if a.key != "" && n.set[a.key] {
				continue
			}
			if err := a.apply(n); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

func cmpFinal(a, b *Node) *Node {
	if a.Final {
		return a
	}
	return b
}

// endpoints resolves the names of a PARENT or CHILD list: a splice
// stands for its nodes without children (as a parent) or without parents
// (as a child).
func endpoints(d *DAG, splices map[string]*DAG, le lineErr, prefix string, names []token, parent bool) ([]*Node, error) {
	var out []*Node
	for _, t := range names {
		if n := d.byName[prefix+t.s]; n != nil {
			out = append(out, n)
			continue
		}
		s := splices[t.s]
		if s == nil {
			return nil, le.at(t.col, "unknown node %s", t.s)
		}
		for _, n := range s.Nodes {
			n = d.byName[n.Name]
			if parent && len(n.Children) == 0 || !parent && len(n.Parents) == 0 {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// setting applies a per-node command to the node nt names, or records it
// for every node when nt is ALL_NODES. key names the setting for
// ALL_NODES' precedence ("" when settings add up, as VARS do).
func (p *parser) setting(d *DAG, all *[]allSetting, le lineErr, nt token, prefix, key string, apply func(*Node) error) error {
	if nt.s == AllNodes {
		*all = append(*all, allSetting{apply: apply, key: key, file: le.file, line: le.line})
		return nil
	}
	n := d.byName[prefix+nt.s]
	if n == nil {
		return le.at(nt.col, "unknown node %s", nt.s)
	}
	if key != "" {
		n.set[key] = true
	}
	return apply(n)
}

var reserved = []string{"PARENT", "CHILD", AllNodes}

func checkName(le lineErr, t token) error {
	for _, r := range reserved {
		if strings.EqualFold(t.s, r) {
			return le.at(t.col, "%q is a reserved word, not a node name", t.s)
		}
	}
	if strings.Contains(t.s, "+") {
		return le.at(t.col+strings.Index(t.s, "+"), "node name %q contains '+', which separates splice names", t.s)
	}
	for k, r := range t.s {
		if !unicode.IsPrint(r) {
			return le.at(t.col+k, "node name %q contains an unprintable character", t.s)
		}
	}
	return nil
}

// parseVars parses the macros of a VARS line after the node name (at
// byte offset start): [PREPEND|APPEND] name="value" ..., where the value
// is in double quotes, \" is a quote and \\ a backslash in it.
func parseVars(le lineErr, line string, start int) ([]Var, error) {
	var out []Var
	i := start
	skip := func() {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
			i++
		}
	}
	prepend := false
	skip()
	for _, w := range []string{"PREPEND", "APPEND"} {
		if len(line) >= i+len(w) && strings.EqualFold(line[i:i+len(w)], w) && (len(line) == i+len(w) || line[i+len(w)] == ' ' || line[i+len(w)] == '\t') {
			prepend = w == "PREPEND"
			i += len(w)
			break
		}
	}
	for {
		skip()
		if i >= len(line) {
			break
		}
		ns := i
		for i < len(line) && line[i] != '=' && line[i] != ' ' && line[i] != '\t' {
			i++
		}
		name := line[ns:i]
		if !validVarName(name) {
			return nil, le.at(ns+1, "bad macro name %q in VARS (letters, digits and _, optionally after + or My.)", name)
		}
		if strings.HasPrefix(strings.ToLower(name), "queue") {
			return nil, le.at(ns+1, "macro name %q in VARS may not begin with \"queue\"", name)
		}
		skip()
		if i >= len(line) || line[i] != '=' {
			return nil, le.at(i+1, "expected = after VARS macro %s", name)
		}
		i++
		skip()
		if i >= len(line) || line[i] != '"' {
			return nil, le.at(i+1, "the value of VARS macro %s must be in double quotes", name)
		}
		qs := i
		i++
		var v strings.Builder
		closed := false
		for i < len(line) {
			c := line[i]
			if c == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
				v.WriteByte(line[i+1])
				i += 2
				continue
			}
			if c == '"' {
				closed = true
				i++
				break
			}
			v.WriteByte(c)
			i++
		}
		if !closed {
			return nil, le.at(qs+1, "unterminated quoted value of VARS macro %s", name)
		}
		if i < len(line) && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' {
			return nil, le.at(i+1, "expected a space after the value of VARS macro %s", name)
		}
		out = append(out, Var{Name: name, Value: v.String(), Prepend: prepend})
	}
	if len(out) == 0 {
		return nil, le.at(start, "VARS names no macro")
	}
	return out, nil
}

func validVarName(s string) bool {
	if strings.HasPrefix(s, "+") {
		s = s[1:]
	} else if len(s) > 3 && strings.EqualFold(s[:3], "My.") {
		s = s[3:]
	}
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// link checks the graph: no cycle, and returns an *Error naming the
// nodes of a cycle when there is one.
func (d *DAG) link() error {
	const (
		white = iota
		grey
		black
	)
	color := make(map[string]int, len(d.Nodes))
	var stack []string
	var cycle []string
	var visit func(n *Node) bool
	visit = func(n *Node) bool {
		color[n.Name] = grey
		stack = append(stack, n.Name)
		for _, c := range n.Children {
			switch color[c] {
			case grey:
				k := slices.Index(stack, c)
				cycle = append(slices.Clone(stack[k:]), c)
				return true
			case white:
				if visit(d.byName[c]) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n.Name] = black
		return false
	}
	for _, n := range d.Nodes {
		if color[n.Name] == white && visit(n) {
			first := d.byName[cycle[0]]
			return &Error{File: first.File, Line: first.Line, Msg: "cycle among the nodes: " + strings.Join(cycle, " -> ")}
		}
	}
	return nil
}
