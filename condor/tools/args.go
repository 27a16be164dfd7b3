package tools

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// optKind says how an option reads the arguments after it.
type optKind int

const (
	optBool   optKind = iota // -name
	optValue                 // -name VALUE
	optMulti                 // -name VALUE, repeatable, every value kept
	optAF                    // -af[:OPTS] ATTR ... (every following non-option)
	optFormat                // -format FMT ATTR, repeatable
	optRest                  // -name ARGS...: every argument after it
)

// options are the options HTCondor's tools take that pond's implement,
// by canonical name. Each tool accepts those of them its spec lists;
// any other is an error naming it.
var options = map[string]optKind{
	"pool": optValue, "name": optValue, "constraint": optValue, "af": optAF, "format": optFormat,
	"long": optBool, "json": optBool, "attributes": optValue, "limit": optValue, "match": optValue,
	"reason": optValue, "all": optBool, "totals": optBool, "allusers": optBool, "nobatch": optBool,
	"batch": optBool, "hold": optBool, "run": optBool, "wide": optBool, "terse": optBool,
	"batch-name": optValue, "append": optMulti, "queue": optRest, "wait": optValue, "num": optValue,
	"status": optBool, "echo": optBool, "debug": optBool, "schedd": optBool, "submitters": optBool,
	"negotiator": optBool, "master": optBool, "any": optBool, "backwards": optBool, "lift": optBool, "dag": optBool,
	"analyze": optBool, "better-analyze": optBool,
	"f": optBool, "stderr": optBool, "history": optBool, "maxbytes": optValue, "since": optValue, "machine": optValue,
	"snapshots": optBool, "at": optValue, "node": optValue, "applies": optBool,
	"graceful": optBool, "quick": optBool, "fast": optBool, "cancel": optBool, "request-id": optValue,
}

// aliases are other spellings HTCondor's tools accept for an option.
var aliases = map[string]string{
	"l": "long", "autoformat": "af", "const": "constraint", "cons": "constraint", "constr": "constraint",
	"analyse": "analyze", "better-analyse": "better-analyze",
	"total": "totals", "tot": "totals", "a": "append", "batch_name": "batch-name", "w": "wide",
}

// spec lists the options one tool accepts (canonical names).
type spec []string

// The tools' specs.
var (
	specQ = spec{"pool", "name", "constraint", "af", "format", "long", "json", "attributes", "limit", "totals",
		"allusers", "nobatch", "batch", "hold", "run", "wide", "dag", "analyze", "better-analyze"}
	specSubmit  = spec{"pool", "name", "terse", "batch-name", "append", "queue"}
	specAct     = spec{"pool", "name", "constraint", "reason", "all"}
	specHistory = spec{"pool", "name", "constraint", "af", "format", "long", "json", "attributes", "limit", "match",
		"backwards", "wide"}
	specStatus = spec{"pool", "name", "constraint", "af", "format", "long", "json", "attributes", "totals", "wide",
		"schedd", "submitters", "negotiator", "master", "any", "history", "since", "machine", "snapshots", "at"}
	specWait     = spec{"wait", "num", "status", "echo", "debug"}
	specReconfig = spec{"pool", "name"}
	specQuaran   = spec{"pool", "name", "json", "lift"}
	specDrain    = spec{"pool", "json", "graceful", "quick", "fast", "reason", "cancel", "request-id"}
	specTail     = spec{"pool", "name", "f", "stderr", "maxbytes"}
	specConfHist = spec{"pool", "json", "since", "node", "constraint", "applies"}
	specPoolHist = spec{"pool", "json", "since", "machine", "constraint", "snapshots", "at", "long", "af", "attributes"}
)

func (s spec) has(name string) bool {
	for _, n := range s {
		if n == name {
			return true
		}
	}
	return false
}

// formatArg is one -format FMT ATTR pair.
type formatArg struct{ format, attr string }

// afOpts are the letters after -af: (HTCondor's -autoformat options).
type afOpts struct {
	jobID, label, headings, quoted, raw, newline, adBreak bool
	sep                                                   string
}

// parseAFOpts reads the option letters of -af:LETTERS.
func parseAFOpts(s string) (afOpts, error) {
	o := afOpts{sep: " "}
	for _, r := range s {
		switch r {
		case 'j':
			o.jobID = true
		case 'l':
			o.label = true
		case 'h':
			o.headings = true
		case 'V':
			o.quoted = true
		case 'r', 'o':
			o.raw = true
		case 'n':
			o.newline = true
		case 'g':
			o.adBreak = true
		case ',':
			o.sep = ","
		case 't':
			o.sep = "\t"
		default:
			return o, fmt.Errorf("option -af:%s: unknown letter %q (known: j l h V r o n g , t)", s, r)
		}
	}
	return o, nil
}

// common holds the options a tool was given.
type common struct {
	pool       string
	name       string
	constraint string
	af         []string
	afOpts     afOpts
	formats    []formatArg
	long       bool
	json       bool
	attributes []string
	rest       []string
	flags      map[string]string
	multi      map[string][]string
}

// canonical returns the canonical name of the option arg ("-Const" is
// "constraint", "-af:jh" is "af" with "jh"), and whether it is one.
func canonical(arg string) (name, sub string) {
	name = strings.ToLower(strings.TrimLeft(arg, "-"))
	if n, _, ok := strings.Cut(name, ":"); ok {
		name, sub = n, arg[strings.Index(arg, ":")+1:]
	}
	if a, ok := aliases[name]; ok {
		name = a
	}
	return name, sub
}

// parseArgs reads HTCondor-style arguments: single-dash options (a
// double dash is accepted too), those of s and no other, and positional
// arguments. The pool comes from -pool, else from the environment and
// client configuration (poolFromEnv) when needPool is set.
func parseArgs(args []string, s spec, env []string, needPool bool) (*common, error) {
	c := &common{flags: map[string]string{}, multi: map[string][]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			c.rest = append(c.rest, a)
			continue
		}
		name, sub := canonical(a)
		kind, known := options[name]
		if !known || !s.has(name) {
			return nil, fmt.Errorf("unsupported option %s", a)
		}
		if sub != "" && kind != optAF {
			return nil, fmt.Errorf("unsupported option %s", a)
		}
		needValue := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("option %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch kind {
		case optBool:
			if name == "long" {
				c.long = true
			} else if name == "json" {
				c.json = true
			}
			c.flags[name] = "true"
		case optValue:
			var v string
			if v, err = needValue(); err == nil {
				c.flags[name] = v
				switch name {
				case "pool":
					c.pool = v
				case "name":
					c.name = v
				case "constraint":
					if c.constraint != "" {
						c.constraint = "(" + c.constraint + ") && (" + v + ")"
					} else {
						c.constraint = v
					}
				case "attributes":
					for _, n := range strings.Split(v, ",") {
						if n = strings.TrimSpace(n); n != "" {
							c.attributes = append(c.attributes, n)
						}
					}
				}
			}
		case optMulti:
			var v string
			if v, err = needValue(); err == nil {
				c.multi[name] = append(c.multi[name], v)
			}
		case optRest:
			if i+1 >= len(args) {
				err = fmt.Errorf("option %s needs arguments", a)
				break
			}
			c.flags[name] = strings.Join(args[i+1:], " ")
			i = len(args)
		case optAF:
			if c.afOpts, err = parseAFOpts(sub); err != nil {
				break
			}
			n := 0
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				c.af = append(c.af, args[i])
				n++
			}
			if n == 0 {
				err = fmt.Errorf("option %s needs attribute names", a)
			}
		case optFormat:
			if i+2 >= len(args) {
				err = fmt.Errorf("option %s needs a format and an attribute", a)
				break
			}
			c.formats = append(c.formats, formatArg{args[i+1], args[i+2]})
			i += 2
		}
		if err != nil {
			return nil, err
		}
	}
	if c.af != nil && c.formats != nil {
		return nil, errors.New("-af and -format cannot be used together")
	}
	for _, k := range []string{"limit", "match", "wait", "num"} {
		if v, ok := c.flags[k]; ok {
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				return nil, fmt.Errorf("-%s %q is not a non-negative number", k, v)
			}
		}
	}
	if !needPool || c.pool != "" {
		return c, nil
	}
	pool, err := poolFromEnv(env)
	if err != nil {
		return nil, err
	}
	if pool == "" {
		return nil, errors.New("no pool given: use -pool ADDR (a node's API address), set POND_POOL_ADDR, or point CONDOR_CONFIG at a client configuration (pondctl condor client-config)")
	}
	c.pool = pool
	return c, nil
}

// intFlag returns the value of a numeric option parseArgs checked, or def.
func (c *common) intFlag(name string, def int) int {
	if v, ok := c.flags[name]; ok {
		n, _ := strconv.Atoi(v)
		return n
	}
	return def
}
