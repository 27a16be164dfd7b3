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

// file is the state of parsing one DAG file: the DAG so far, its
// PARENT/CHILD lines (resolved at the end: they may name nodes defined
// after them), its ALL_NODES settings and its splices.
type file struct {
	p       *parser
	d       *DAG
	name    string
	baseDir string
	// prefix is the splice's name and "+" for a splice's nodes, "" at the top.
	prefix  string
	depth   int
	edges   []pending
	all     []allSetting
	splices map[string]*DAG
}

// command is one command line of a DAG file: its keyword (upper case), the
// keyword's token, the words after it and the raw line.
type command struct {
	le   lineErr
	kw   string
	head token
	args []token
	line string
}

// handler parses one command into f.
type handler func(f *file, c command) error

// commands maps each keyword of the DAG language to its handler; a
// keyword not in it is an unknown command.
var commands map[string]handler

func init() {
	commands = map[string]handler{
		"JOB":              parseNode,
		"FINAL":            parseNode,
		"SUBDAG":           parseNode,
		"SPLICE":           parseSplice,
		"INCLUDE":          parseInclude,
		"PARENT":           parseParent,
		"RETRY":            parseRetry,
		"VARS":             parseVarsCmd,
		"SCRIPT":           parseScript,
		"PRE_SKIP":         parsePreSkip,
		"ABORT-DAG-ON":     parseAbortDagOn,
		"PRIORITY":         parsePriority,
		"CATEGORY":         parseCategory,
		"MAXJOBS":          parseMaxJobs,
		"CONFIG":           parseConfigCmd,
		"DOT":              parseDot,
		"NODE_STATUS_FILE": parseNodeStatusFile,
	}
	for _, kw := range []string{"JOBSTATE_LOG", "SET_JOB_ATTR", "ENV", "SAVE_POINT_FILE", "CONNECT", "PIN_IN", "PIN_OUT", "DATA", "REJECT", "SERVICE", "PROVISIONER"} {
		commands[kw] = unsupported
	}
}

// parse parses one file; prefix is the splice's name and "+" for a
// splice's nodes, dir the directory node submit files are relative to.
func (p *parser) parse(name string, text []byte, prefix string, depth int) (*DAG, error) {
	f := &file{p: p, d: &DAG{File: name, MaxJobs: map[string]int{}, byName: map[string]*Node{}},
		name: name, baseDir: filepath.Dir(name), prefix: prefix, depth: depth, splices: map[string]*DAG{}}
	for i, line := range strings.Split(string(text), "\n") {
		le := lineErr{name, i + 1}
		if k := strings.IndexByte(line, 0); k >= 0 {
			return nil, le.at(k+1, "NUL byte in the DAG file")
		}
		t := fields(line)
		if len(t) == 0 || strings.HasPrefix(t[0].s, "#") {
			continue
		}
		kw := strings.ToUpper(t[0].s)
		h := commands[kw]
		if h == nil {
			return nil, le.at(t[0].col, "unknown command %q", t[0].s)
		}
		if err := h(f, command{le: le, kw: kw, head: t[0], args: t[1:], line: line}); err != nil {
			return nil, err
		}
	}
	if err := f.linkEdges(); err != nil {
		return nil, err
	}
	if err := f.applyAll(); err != nil {
		return nil, err
	}
	return f.d, nil
}

// linkEdges resolves the file's PARENT/CHILD lines, which may name nodes
// defined after them, and splices.
func (f *file) linkEdges() error {
	for _, e := range f.edges {
		le := lineErr{e.file, e.line}
		ps, err := endpoints(f.d, f.splices, le, f.prefix, e.parents, true)
		if err != nil {
			return err
		}
		cs, err := endpoints(f.d, f.splices, le, f.prefix, e.childs, false)
		if err != nil {
			return err
		}
		for _, pn := range ps {
			for _, cn := range cs {
				if pn.Final || cn.Final {
					return le.at(e.col, "the FINAL node %s cannot have parents or children", cmpFinal(pn, cn).Name)
				}
				if !slices.Contains(pn.Children, cn.Name) {
					pn.Children = append(pn.Children, cn.Name)
					cn.Parents = append(cn.Parents, pn.Name)
				}
			}
		}
	}
	return nil
}

// applyAll applies the ALL_NODES settings to every node of this file but
// the FINAL one; a node's own setting of the same thing wins wherever it
// is in the file.
func (f *file) applyAll() error {
	for _, a := range f.all {
		for _, n := range f.d.Nodes {
			if n.Final || !strings.HasPrefix(n.Name, f.prefix) || strings.Contains(n.Name[len(f.prefix):], "+") {
				continue
			}
			if a.key != "" && n.set[a.key] {
				continue
			}
			if err := a.apply(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// atoi is the integer t holds, or an error at t's column: what names the
// value (msg, formatted with t's text) when it is not an integer or below
// lo (when hasMin).
func atoi(c command, t token, hasMin bool, lo int, msg string) (int, error) {
	v, err := strconv.Atoi(t.s)
	if err != nil || hasMin && v < lo {
		return 0, c.le.at(t.col, msg, t.s)
	}
	return v, nil
}

// set applies a per-node command to the node nt names (or ALL_NODES).
func (f *file) set(c command, nt token, key string, apply func(*Node) error) error {
	return f.p.setting(f.d, &f.all, c.le, nt, f.prefix, key, apply)
}

// category is a CATEGORY or MAXJOBS category name, scoped to the splice
// unless it begins with "+".
func (f *file) category(s string) string {
	if !strings.HasPrefix(s, "+") {
		return f.prefix + s
	}
	return s
}

// parseNode parses JOB, FINAL and SUBDAG EXTERNAL.
func parseNode(f *file, c command) error {
	le, args, sub := c.le, c.args, false
	if c.kw == "SUBDAG" {
		if len(args) == 0 || !strings.EqualFold(args[0].s, "EXTERNAL") {
			return le.at(c.head.col, "SUBDAG must be followed by EXTERNAL")
		}
		args, sub = args[1:], true
	}
	if len(args) < 2 {
		return le.at(c.head.col, "%s needs a node name and a file", c.kw)
	}
	if args[1].s == "{" {
		return le.at(args[1].col, "inline submit descriptions are not supported: give a submit file")
	}
	n := &Node{Name: args[0].s, SubmitFile: args[1].s, SubDAG: sub, Final: c.kw == "FINAL", File: f.name, Line: le.line,
		set: map[string]bool{}}
	if err := checkName(le, args[0]); err != nil {
		return err
	}
	if err := nodeOptions(c, n, args[2:]); err != nil {
		return err
	}
	d := f.d
	if n.Final {
		if f.prefix != "" {
			return le.at(c.head.col, "a splice cannot have a FINAL node")
		}
		if d.Final != nil {
			return le.at(c.head.col, "a second FINAL node %s (%s is defined at %s:%d)", n.Name, d.Final.Name, d.Final.File, d.Final.Line)
		}
	}
	n.Name = f.prefix + n.Name
	if n.Dir != "" && f.prefix != "" && !filepath.IsAbs(n.Dir) {
		n.Dir = filepath.Join(f.baseDir, n.Dir)
	} else if n.Dir == "" && f.prefix != "" {
		n.Dir = f.baseDir
	}
	if old := d.byName[n.Name]; old != nil {
		return le.at(args[0].col, "node %s is already defined at %s:%d", n.Name, old.File, old.Line)
	}
	if f.splices[args[0].s] != nil {
		return le.at(args[0].col, "%s is already the name of a splice", args[0].s)
	}
	d.byName[n.Name] = n
	d.Nodes = append(d.Nodes, n)
	if n.Final {
		d.Final = n
	}
	return nil
}

// nodeOptions parses the DIR, NOOP and DONE options after a node's file.
func nodeOptions(c command, n *Node, rest []token) error {
	for k := 0; k < len(rest); k++ {
		switch strings.ToUpper(rest[k].s) {
		case "DIR":
			if k+1 >= len(rest) {
				return c.le.at(rest[k].col, "DIR needs a directory")
			}
			n.Dir = rest[k+1].s
			k++
		case "NOOP":
			n.Noop = true
		case "DONE":
			if n.Final {
				return c.le.at(rest[k].col, "a FINAL node cannot be DONE")
			}
			n.Done = true
		default:
			return c.le.at(rest[k].col, "unexpected %q after %s %s (DIR, NOOP or DONE)", rest[k].s, c.kw, n.Name)
		}
	}
	return nil
}

// parseSplice parses SPLICE name file [DIR dir]: it parses the splice's
// file and adds its nodes, named "name+node".
func parseSplice(f *file, c command) error {
	le, args := c.le, c.args
	if len(args) < 2 {
		return le.at(c.head.col, "SPLICE needs a name and a DAG file")
	}
	if err := checkName(le, args[0]); err != nil {
		return err
	}
	sname, sfile, sdir := args[0].s, args[1].s, ""
	rest := args[2:]
	if len(rest) == 2 && strings.EqualFold(rest[0].s, "DIR") {
		sdir = rest[1].s
	} else if len(rest) > 0 {
		return le.at(rest[0].col, "unexpected %q after SPLICE %s %s (DIR)", rest[0].s, sname, sfile)
	}
	d := f.d
	if f.splices[sname] != nil || d.byName[f.prefix+sname] != nil {
		return le.at(args[0].col, "%s is already defined", sname)
	}
	if f.depth >= maxSpliceDepth {
		return le.at(args[0].col, "splices nested deeper than %d (a splice including itself?)", maxSpliceDepth)
	}
	path := spliceFile(f.baseDir, sdir, sfile)
	text, err := f.p.readFile(path)
	if err != nil {
		return le.at(args[1].col, "reading splice %s: %v", sname, err)
	}
	sd, err := f.p.parse(path, text, f.prefix+sname+"+", f.depth+1)
	if err != nil {
		return err
	}
	for _, n := range sd.Nodes {
		if old := d.byName[n.Name]; old != nil {
			return le.at(args[0].col, "splice node %s is already defined at %s:%d", n.Name, old.File, old.Line)
		}
		d.byName[n.Name] = n
		d.Nodes = append(d.Nodes, n)
	}
	for cat, v := range sd.MaxJobs {
		if _, ok := d.MaxJobs[cat]; !ok {
			d.MaxJobs[cat] = v
		}
	}
	f.splices[sname] = sd
	return nil
}

// spliceFile is the path of a splice's file: sfile relative to its DIR
// sdir, itself relative to baseDir, the including file's directory.
func spliceFile(baseDir, sdir, sfile string) string {
	dir := baseDir
	if sdir != "" {
		if filepath.IsAbs(sdir) {
			dir = sdir
		} else {
			dir = filepath.Join(baseDir, sdir)
		}
	}
	if filepath.IsAbs(sfile) {
		return sfile
	}
	return filepath.Join(dir, sfile)
}

func parseInclude(_ *file, c command) error {
	return c.le.at(c.head.col, "INCLUDE is not supported by pond's DAG manager: use SPLICE")
}

func unsupported(_ *file, c command) error {
	return c.le.at(c.head.col, "%s is not supported by pond's DAG manager", c.kw)
}

// parseParent records PARENT p... CHILD c..., resolved by linkEdges.
func parseParent(f *file, c command) error {
	le, args := c.le, c.args
	ci := -1
	for k, a := range args {
		if strings.EqualFold(a.s, "CHILD") {
			ci = k
			break
		}
	}
	if ci < 0 {
		return le.at(c.head.col, "PARENT without CHILD")
	}
	if ci == 0 {
		return le.at(args[0].col, "PARENT names no parent")
	}
	if ci == len(args)-1 {
		return le.at(args[ci].col, "CHILD names no child")
	}
	f.edges = append(f.edges, pending{file: f.name, line: le.line, col: c.head.col, parents: args[:ci], childs: args[ci+1:]})
	return nil
}

// parseRetry parses RETRY node count [UNLESS-EXIT value].
func parseRetry(f *file, c command) error {
	le, args := c.le, c.args
	if len(args) != 2 && len(args) != 4 {
		return le.at(c.head.col, "RETRY needs a node and a count [UNLESS-EXIT value]")
	}
	n, err := atoi(c, args[1], true, 0, "retry count %q is not a non-negative integer")
	if err != nil {
		return err
	}
	var unless *int
	if len(args) == 4 {
		if !strings.EqualFold(args[2].s, "UNLESS-EXIT") {
			return le.at(args[2].col, "expected UNLESS-EXIT, not %q", args[2].s)
		}
		v, err := atoi(c, args[3], false, 0, "UNLESS-EXIT value %q is not an integer")
		if err != nil {
			return err
		}
		unless = &v
	}
	return f.set(c, args[0], "retry", func(nd *Node) error {
		if nd.Final {
			return le.at(args[0].col, "the FINAL node %s cannot be retried", nd.Name)
		}
		nd.Retry, nd.RetryUnlessExit = n, unless
		return nil
	})
}

// parseVarsCmd parses VARS node [PREPEND|APPEND] name="value"...
func parseVarsCmd(f *file, c command) error {
	if len(c.args) < 1 {
		return c.le.at(c.head.col, "VARS needs a node name")
	}
	vars, err := parseVars(c.le, c.line, c.args[0].col+len(c.args[0].s))
	if err != nil {
		return err
	}
	return f.set(c, c.args[0], "", func(nd *Node) error {
		nd.Vars = append(nd.Vars, vars...)
		return nil
	})
}

// parseScript parses SCRIPT [DEFER status time] PRE|POST node exe args...
func parseScript(f *file, c command) error {
	le, args := c.le, c.args
	sc := &Script{}
	k, err := scriptOptions(c, sc)
	if err != nil {
		return err
	}
	if k+2 >= len(args) {
		return le.at(c.head.col, "SCRIPT needs PRE or POST, a node name and an executable")
	}
	which := strings.ToUpper(args[k].s)
	if which != "PRE" && which != "POST" {
		if which == "HOLD" {
			return le.at(args[k].col, "HOLD scripts are not supported")
		}
		return le.at(args[k].col, "expected PRE or POST, not %q", args[k].s)
	}
	sc.Exe = args[k+2].s
	for _, a := range args[k+3:] {
		sc.Args = append(sc.Args, a.s)
	}
	return f.set(c, args[k+1], strings.ToLower(which), func(nd *Node) error {
		cp := *sc
		cp.Args = slices.Clone(sc.Args)
		if which == "PRE" {
			nd.Pre = &cp
		} else {
			nd.Post = &cp
		}
		return nil
	})
}

// scriptOptions parses a SCRIPT line's DEFER options into sc and returns
// the index of the argument after them.
func scriptOptions(c command, sc *Script) (int, error) {
	le, args := c.le, c.args
	k := 0
	for k < len(args) {
		u := strings.ToUpper(args[k].s)
		if u == "DEBUG" {
			return 0, le.at(args[k].col, "SCRIPT DEBUG is not supported")
		}
		if u != "DEFER" {
			break
		}
		if k+2 >= len(args) {
			return 0, le.at(args[k].col, "DEFER needs an exit status and a time")
		}
		st, err := atoi(c, args[k+1], false, 0, "DEFER status %q is not an integer")
		if err != nil {
			return 0, err
		}
		secs, err := atoi(c, args[k+2], true, 0, "DEFER time %q is not a non-negative number of seconds")
		if err != nil {
			return 0, err
		}
		sc.DeferStatus, sc.DeferTime, sc.Deferred = st, time.Duration(secs)*time.Second, true
		k += 3
	}
	return k, nil
}

// parsePreSkip parses PRE_SKIP node exit-code.
func parsePreSkip(f *file, c command) error {
	if len(c.args) != 2 {
		return c.le.at(c.head.col, "PRE_SKIP needs a node name and an exit code")
	}
	v, err := atoi(c, c.args[1], false, 0, "PRE_SKIP exit code %q is not an integer")
	if err != nil {
		return err
	}
	return f.set(c, c.args[0], "pre_skip", func(nd *Node) error { nd.PreSkip = &v; return nil })
}

// parseAbortDagOn parses ABORT-DAG-ON node value [RETURN code].
func parseAbortDagOn(f *file, c command) error {
	le, args := c.le, c.args
	if len(args) != 2 && len(args) != 4 {
		return le.at(c.head.col, "ABORT-DAG-ON needs a node name and an exit value [RETURN code]")
	}
	a := &Abort{}
	v, err := atoi(c, args[1], false, 0, "ABORT-DAG-ON value %q is not an integer")
	if err != nil {
		return err
	}
	a.Value = v
	if len(args) == 4 {
		if !strings.EqualFold(args[2].s, "RETURN") {
			return le.at(args[2].col, "expected RETURN, not %q", args[2].s)
		}
		r, err := strconv.Atoi(args[3].s)
		if err != nil || r < 0 || r > 255 {
			return le.at(args[3].col, "RETURN code %q is not between 0 and 255", args[3].s)
		}
		a.Return, a.HasReturn = r, true
	}
	return f.set(c, args[0], "abort", func(nd *Node) error { cp := *a; nd.AbortOn = &cp; return nil })
}

// parsePriority parses PRIORITY node priority.
func parsePriority(f *file, c command) error {
	if len(c.args) != 2 {
		return c.le.at(c.head.col, "PRIORITY needs a node name and a priority")
	}
	v, err := atoi(c, c.args[1], false, 0, "priority %q is not an integer")
	if err != nil {
		return err
	}
	return f.set(c, c.args[0], "priority", func(nd *Node) error { nd.Priority = v; return nil })
}

// parseCategory parses CATEGORY node category.
func parseCategory(f *file, c command) error {
	if len(c.args) != 2 {
		return c.le.at(c.head.col, "CATEGORY needs a node name and a category")
	}
	cat := f.category(c.args[1].s)
	return f.set(c, c.args[0], "category", func(nd *Node) error { nd.Category = cat; return nil })
}

// parseMaxJobs parses MAXJOBS category number.
func parseMaxJobs(f *file, c command) error {
	if len(c.args) != 2 {
		return c.le.at(c.head.col, "MAXJOBS needs a category and a number")
	}
	v, err := atoi(c, c.args[1], true, 0, "MAXJOBS %q is not a non-negative integer")
	if err != nil {
		return err
	}
	f.d.MaxJobs[f.category(c.args[0].s)] = v
	return nil
}

// parseConfigCmd parses CONFIG file.
func parseConfigCmd(f *file, c command) error {
	if len(c.args) != 1 {
		return c.le.at(c.head.col, "CONFIG needs one file")
	}
	if f.d.Config != "" && f.d.Config != c.args[0].s {
		return c.le.at(c.args[0].col, "a second CONFIG file %s (the first is %s)", c.args[0].s, f.d.Config)
	}
	f.d.Config = c.args[0].s
	return nil
}

// parseDot parses DOT file [UPDATE|DONT-UPDATE] [OVERWRITE|DONT-OVERWRITE] [INCLUDE file].
func parseDot(f *file, c command) error {
	le, args := c.le, c.args
	if len(args) < 1 {
		return le.at(c.head.col, "DOT needs a file")
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
				return le.at(args[k].col, "INCLUDE needs a file")
			}
			dot.Include = args[k+1].s
			k++
		default:
			return le.at(args[k].col, "unexpected %q after DOT (UPDATE, DONT-UPDATE, OVERWRITE, DONT-OVERWRITE or INCLUDE)", args[k].s)
		}
	}
	f.d.Dot = dot
	return nil
}

// parseNodeStatusFile parses NODE_STATUS_FILE file [seconds] [ALWAYS-UPDATE].
func parseNodeStatusFile(f *file, c command) error {
	args := c.args
	if len(args) < 1 || len(args) > 3 {
		return c.le.at(c.head.col, "NODE_STATUS_FILE needs a file [minimum update time] [ALWAYS-UPDATE]")
	}
	d := f.d
	d.NodeStatusFile, d.NodeStatusInterval = args[0].s, 60*time.Second
	for _, a := range args[1:] {
		if strings.EqualFold(a.s, "ALWAYS-UPDATE") {
			d.NodeStatusAlways = true
			continue
		}
		v, err := atoi(c, a, true, 0, "NODE_STATUS_FILE update time %q is not a non-negative number of seconds")
		if err != nil {
			return err
		}
		d.NodeStatusInterval = time.Duration(v) * time.Second
	}
	return nil
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
