// Package config implements HTCondor's configuration language: NAME = value
// definitions with case-insensitive names, line continuations, $(MACRO)
// expansion (with defaults, $ENV, $INT, $REAL and friends), include and use
// (metaknob) directives, if/elif/else/endif conditionals, and a table of
// defaults for the knobs pond's daemons honour.
//
// Values are stored raw and expanded on lookup, as HTCondor does, so that a
// later definition of a referenced macro changes the value of every macro
// that refers to it.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/macro"
)

// Error is a configuration error located in a source file.
type Error struct {
	File string // file name as given to Parse or Load
	Line int    // 1-based line; 0 when not known
	Col  int    // 1-based column; 0 when not known
	Msg  string // what is wrong
	Err  error  // underlying cause, if any
}

// Error implements error as "file:line:col: msg" (omitting unknown parts).
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrCircular is wrapped by errors reporting a macro that refers to itself,
// directly or through other macros.
var ErrCircular = macro.ErrCircular

// Source says where a knob's current value was defined.
type Source struct {
	File string // file name, "<default>" for the built-in table, "<set>" for Set
	Line int    // 1-based line, 0 when not from a file
}

// String formats the source as condor_config_val -verbose does ("file, line N").
func (s Source) String() string {
	if s.Line > 0 {
		return fmt.Sprintf("%s, line %d", s.File, s.Line)
	}
	return s.File
}

type entry struct {
	name  string // name as first written
	value string // raw value
	src   Source
}

// Options tune a new Config.
type Options struct {
	// LookupEnv reads environment variables for $ENV(); os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// Host overrides the detected host facts (HOSTNAME, IP_ADDRESS,
	// DETECTED_CPUS, ...). Zero fields are detected.
	Host HostInfo
	// NoDefaults starts from an empty table instead of the built-in defaults.
	NoDefaults bool
	// IncludeDepth bounds nested include directives (default 20).
	IncludeDepth int
	// Warn, when not nil, receives warnings (the "warning :" directive).
	Warn func(msg string)
}

// Config is a parsed HTCondor configuration. It is safe for concurrent
// reads; Set, LoadFile and ParseInto must not run concurrently with others.
type Config struct {
	opts    Options
	entries map[string]*entry // upper-case name -> entry
	subsys  string            // upper-case subsystem for SUBSYS.NAME lookups
	local   string            // upper-case local name for LOCALNAME.NAME lookups
}

// New returns a Config holding only the defaults (unless opts.NoDefaults).
func New(opts Options) *Config {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.IncludeDepth <= 0 {
		opts.IncludeDepth = 20
	}
	opts.Host = opts.Host.detect()
	c := &Config{opts: opts, entries: make(map[string]*entry)}
	if !opts.NoDefaults {
		for _, d := range defaultTable(opts.Host) {
			c.entries[strings.ToUpper(d[0])] = &entry{name: d[0], value: d[1], src: Source{File: "<default>"}}
		}
	}
	return c
}

// Parse parses src (named name in errors) on top of the default table.
func Parse(name string, src []byte) (*Config, error) {
	c := New(Options{})
	if err := c.ParseInto(name, src); err != nil {
		return nil, err
	}
	return c, nil
}

// Load reads and parses the configuration file at path on top of the
// default table. Relative include paths are resolved against the directory
// of the including file.
func Load(path string) (*Config, error) {
	c := New(Options{})
	if err := c.LoadFile(path); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadFile reads the configuration file at path into c, overriding earlier
// definitions (as HTCondor's LOCAL_CONFIG_FILE does).
func (c *Config) LoadFile(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return &Error{File: path, Msg: "cannot read configuration", Err: err}
	}
	return c.parse(path, src, 0)
}

// ParseInto parses src into c, overriding earlier definitions. Relative
// include paths are resolved against the directory of name.
func (c *Config) ParseInto(name string, src []byte) error {
	return c.parse(name, src, 0)
}

// ForSubsystem returns a view of c in which NAME is looked up first as
// SUBSYS.NAME (and LOCALNAME.NAME when local is not empty), as a daemon of
// that subsystem sees its configuration. The view shares c's definitions.
func (c *Config) ForSubsystem(subsys, local string) *Config {
	v := *c
	v.subsys = strings.ToUpper(subsys)
	v.local = strings.ToUpper(local)
	return &v
}

// find returns the entry a lookup of name resolves to, honouring the
// subsystem and local-name prefixes.
func (c *Config) find(name string) (*entry, bool) {
	up := strings.ToUpper(name)
	if c.local != "" {
		if e, ok := c.entries[c.local+"."+up]; ok {
			return e, true
		}
	}
	if c.subsys != "" {
		if e, ok := c.entries[c.subsys+"."+up]; ok {
			return e, true
		}
	}
	e, ok := c.entries[up]
	return e, ok
}

// Raw returns name's unexpanded value and whether it is defined.
func (c *Config) Raw(name string) (string, bool) {
	e, ok := c.find(name)
	if !ok {
		return "", false
	}
	return e.value, true
}

// Source returns where name's current value was defined.
func (c *Config) Source(name string) (Source, bool) {
	e, ok := c.find(name)
	if !ok {
		return Source{}, false
	}
	return e.src, true
}

// Get returns name's value with all macros expanded and whether it is
// defined. A value whose expansion fails (only possible through Set of a
// circular definition, which Set refuses) is returned unexpanded.
func (c *Config) Get(name string) (string, bool) {
	e, ok := c.find(name)
	if !ok {
		return "", false
	}
	v, err := c.expand(e.value, []string{strings.ToUpper(name)})
	if err != nil {
		return e.value, true
	}
	return v, true
}

// Lookup is Get with the expansion error reported.
func (c *Config) Lookup(name string) (string, bool, error) {
	e, ok := c.find(name)
	if !ok {
		return "", false, nil
	}
	v, err := c.expand(e.value, []string{strings.ToUpper(name)})
	if err != nil {
		return "", true, fmt.Errorf("expanding %s (%s): %w", name, e.src, err)
	}
	return v, true, nil
}

// Set defines name = value as if written in a configuration file. A
// reference to name inside value means its previous value, as in a file.
// Set refuses definitions that make a macro refer to itself.
func (c *Config) Set(name, value string) error {
	if !validName(name) {
		return fmt.Errorf("invalid configuration name %q", name)
	}
	return c.define(name, value, Source{File: "<set>"})
}

// Unset removes name's definition (the default, too).
func (c *Config) Unset(name string) {
	delete(c.entries, strings.ToUpper(name))
}

func (c *Config) define(name, value string, src Source) error {
	up := strings.ToUpper(name)
	value = c.replaceSelf(up, value)
	old, had := c.entries[up]
	c.entries[up] = &entry{name: name, value: value, src: src}
	if _, err := c.expand(value, []string{up}); err != nil && errors.Is(err, ErrCircular) {
		if had {
			c.entries[up] = old
		} else {
			delete(c.entries, up)
		}
		return err
	}
	return nil
}

// replaceSelf substitutes the previous raw value for references of a macro
// to itself, so that "A = $(A) more" appends as in HTCondor.
func (c *Config) replaceSelf(up, value string) string {
	if !strings.Contains(strings.ToUpper(value), "$("+up) {
		return value
	}
	prev := ""
	if e, ok := c.entries[up]; ok {
		prev = e.value
	}
	var b strings.Builder
	for i := 0; i < len(value); {
		if value[i] == '$' && i+1 < len(value) && value[i+1] == '$' {
			b.WriteString("$$")
			i += 2
			continue
		}
		if strings.HasPrefix(value[i:], "$(") {
			end := matchParen(value, i+1)
			if end > 0 {
				inner := value[i+2 : end]
				n, def, hasDef := strings.Cut(inner, ":")
				if strings.EqualFold(strings.TrimSpace(n), up) {
					if prev == "" && hasDef {
						b.WriteString(def)
					} else {
						b.WriteString(prev)
					}
					i = end + 1
					continue
				}
			}
		}
		b.WriteByte(value[i])
		i++
	}
	return b.String()
}

// Names returns the names of all defined knobs (defaults included), sorted,
// spelled as first defined.
func (c *Config) Names() []string {
	out := make([]string, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e.name)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToUpper(out[i]) < strings.ToUpper(out[j]) })
	return out
}

// Int returns name's value as an integer; the value may be a simple
// arithmetic expression ("5 * 60"). It returns def when name is undefined
// or empty, and def with an error when the value is not an integer.
func (c *Config) Int(name string, def int) (int, error) {
	v, ok, err := c.nonEmpty(name)
	if err != nil || !ok {
		return def, err
	}
	f, isInt, err := evalArith(v)
	if err != nil || !isInt {
		if err == nil {
			err = fmt.Errorf("%q is not an integer", v)
		}
		return def, c.valueErr(name, err)
	}
	return int(f), nil
}

// Float returns name's value as a floating-point number (arithmetic allowed).
func (c *Config) Float(name string, def float64) (float64, error) {
	v, ok, err := c.nonEmpty(name)
	if err != nil || !ok {
		return def, err
	}
	f, _, err := evalArith(v)
	if err != nil {
		return def, c.valueErr(name, err)
	}
	return f, nil
}

// Bool returns name's value as a boolean: true/false, yes/no, t/f, y/n,
// 1/0, case-insensitive.
func (c *Config) Bool(name string, def bool) (bool, error) {
	v, ok, err := c.nonEmpty(name)
	if err != nil || !ok {
		return def, err
	}
	b, ok := ParseBool(v)
	if !ok {
		return def, c.valueErr(name, fmt.Errorf("%q is not a boolean", v))
	}
	return b, nil
}

// Duration returns name's value, an integer number of seconds as HTCondor
// writes intervals (arithmetic allowed), or a Go duration such as "90s".
func (c *Config) Duration(name string, def time.Duration) (time.Duration, error) {
	v, ok, err := c.nonEmpty(name)
	if err != nil || !ok {
		return def, err
	}
	if f, _, err := evalArith(v); err == nil {
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return def, c.valueErr(name, fmt.Errorf("%q is not a number of seconds", v))
	}
	return d, nil
}

// List returns name's value split on commas and whitespace, as HTCondor
// reads list knobs such as DAEMON_LIST or FLOCK_TO.
func (c *Config) List(name string) []string {
	v, _ := c.Get(name)
	return SplitList(v)
}

// SplitList splits an HTCondor list value on commas and whitespace.
func SplitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
}

// SplitFileList splits a job ad's list of file names (TransferInput,
// TransferOutput) at its commas only, as condor_submit writes it: a name
// may hold a space. Each name is trimmed; empty ones are dropped.
func SplitFileList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (c *Config) nonEmpty(name string) (string, bool, error) {
	v, ok, err := c.Lookup(name)
	if err != nil {
		return "", false, err
	}
	v = strings.TrimSpace(v)
	return v, ok && v != "", nil
}

func (c *Config) valueErr(name string, err error) error {
	src, _ := c.Source(name)
	return fmt.Errorf("%s (%s): %w", strings.ToUpper(name), src, err)
}

// ParseBool reads an HTCondor boolean: true, t, yes, y or 1, or false, f,
// no, n or 0, in any case and with spaces around. ok is false for any
// other value.
func ParseBool(v string) (b, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "t", "yes", "y", "1":
		return true, true
	case "false", "f", "no", "n", "0":
		return false, true
	}
	return false, false
}

func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch == '_':
		case ch >= '0' && ch <= '9', ch == '.', ch == '-':
			if i == 0 && ch != '.' && (ch < '0' || ch > '9') {
				return false
			}
			if i == 0 && ch == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// resolvePath makes an include path relative to the including file.
func resolvePath(from, path string) string {
	if filepath.IsAbs(path) || from == "" || strings.HasPrefix(from, "<") {
		return path
	}
	return filepath.Join(filepath.Dir(from), path)
}
