package config

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// ParseSetArg parses the argument of condor_config_val -set, "NAME = value"
// (spaces optional), into its name and raw value.
func ParseSetArg(s string) (name, value string, err error) {
	eq := strings.IndexByte(s, '=')
	if eq < 0 {
		return "", "", fmt.Errorf("-set %q: expected \"NAME = value\"", s)
	}
	name = strings.TrimSpace(s[:eq])
	if !validName(name) {
		return "", "", fmt.Errorf("-set %q: invalid configuration name %q", s, name)
	}
	return name, strings.TrimSpace(s[eq+1:]), nil
}

// SecretKnobs is the knob that names, in a list, the knobs of a
// configuration that hold a secret although their names do not say so (the
// local provider writes it beside the values of sensitive variables).
const SecretKnobs = "POND_SECRET_KNOBS"

// Secret is what condor_config_val prints in place of a secret knob's value.
const Secret = "(secret)"

// IsSecret reports whether a knob's name says it holds a secret: it
// contains PASSWORD, SECRET or TOKEN or ends in _KEY (POOL_PASSWORD,
// SEC_TOKEN, API_KEY), or it is the sea's gossip key, POND_ENCRYPT.
// overlay/knobs.IsSecret agrees.
func IsSecret(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"PASSWORD", "SECRET", "TOKEN"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return strings.HasSuffix(n, "_KEY") || n == "KEY" || n == "POND_ENCRYPT"
}

// Secret reports whether c's knob name holds a secret: IsSecret says so, or
// c's POND_SECRET_KNOBS names it (in any case).
func (c *Config) Secret(name string) bool {
	if IsSecret(name) {
		return true
	}
	named, _ := c.Get(SecretKnobs)
	for _, n := range strings.FieldsFunc(named, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// redactor decides what condor_config_val may print of a configuration.
type redactor struct {
	c       *Config
	secrets []string // the raw and expanded values of c's secret knobs
}

func newRedactor(c *Config) *redactor {
	r := &redactor{c: c}
	for _, n := range c.Names() {
		if !c.Secret(n) || strings.EqualFold(n, SecretKnobs) {
			continue // POND_SECRET_KNOBS names secrets, holds none
		}
		for _, get := range []func(string) (string, bool){c.Get, c.Raw} {
			if v, _ := get(n); v != "" {
				r.secrets = append(r.secrets, v)
			}
		}
	}
	return r
}

// shown is what condor_config_val may print of name's value v: v, or
// Secret when name holds a secret or v would show one (as
// "$(DB_PASSWORD)" expands to). HTCondor refuses to report such knobs to
// anyone; pond does not print them either.
func (r *redactor) shown(name, v string) (string, bool) {
	if r.c.Secret(name) {
		return Secret, false
	}
	for _, s := range r.secrets {
		if strings.Contains(v, s) {
			return Secret, false
		}
	}
	return v, true
}

// Dump returns the configuration as condor_config_val -dump prints it:
// a comment header, then "NAME = value" lines sorted by name. Only names
// containing pattern (case-insensitive) are listed when pattern is not
// empty. Values are raw unless expand is set.
func Dump(c *Config, pattern string, expand bool) string {
	var b strings.Builder
	b.WriteString("# Configuration from machine: ")
	host, _ := c.Get("FULL_HOSTNAME")
	b.WriteString(host)
	b.WriteString("\n\n")
	if pattern != "" {
		fmt.Fprintf(&b, "# Parameters with names that match %s:\n", pattern)
	}
	up := strings.ToUpper(pattern)
	r := newRedactor(c)
	for _, n := range c.Names() {
		if up != "" && !strings.Contains(strings.ToUpper(n), up) {
			continue
		}
		v, _ := c.Raw(n)
		if expand {
			v, _ = c.Get(n)
		}
		v, _ = r.shown(n, v)
		fmt.Fprintf(&b, "%s = %s\n", n, v)
	}
	return b.String()
}

// Verbose returns name's value as condor_config_val -verbose prints it:
// "NAME = value", then where it was defined and its raw value; a secret
// shows as Secret.
func Verbose(c *Config, name string) (string, bool) {
	v, ok := c.Get(name)
	if !ok {
		return "", false
	}
	raw, _ := c.Raw(name)
	if _, ok := newRedactor(c).shown(name, v+"\n"+raw); !ok {
		v, raw = Secret, Secret
	}
	src, _ := c.Source(name)
	return fmt.Sprintf("%s = %s\n # at: %s\n # raw: %s = %s\n", strings.ToUpper(name), v, src, strings.ToUpper(name), raw), true
}

// ConfigVal runs condor_config_val against c with the given arguments
// (without the program name) and returns the exit status. It supports
// NAME..., -verbose/-v, -raw, -dump [pattern], -expand (with -dump),
// -set "NAME = value" and -unset NAME; -set and -unset change c. Unknown
// names print "Not defined: NAME" on stderr and exit 1, as HTCondor does.
// A knob that holds a secret (Config.Secret), or whose value would show
// one, is never printed: asked by name it prints "Not shown: NAME" on
// stderr and exits 1, and -dump and -verbose show Secret in its place.
func ConfigVal(c *Config, args []string, stdout, stderr io.Writer) int {
	var names []string
	verbose, raw, dump, expand := false, false, false, false
	pattern := ""
	status := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			if dump && pattern == "" && len(names) == 0 {
				pattern = a
				continue
			}
			names = append(names, a)
			continue
		}
		switch strings.ToLower(strings.TrimLeft(a, "-")) {
		case "v", "verbose":
			verbose = true
		case "raw":
			raw = true
		case "dump", "d":
			dump = true
		case "expand", "expanded":
			expand = true
		case "set", "rset", "unset", "runset":
			if i+1 >= len(args) {
				fmt.Fprintf(stderr, "%s needs an argument\n", a)
				return 1
			}
			i++
			op := strings.ToLower(strings.TrimLeft(a, "-"))
			if strings.HasSuffix(op, "unset") {
				c.Unset(strings.TrimSpace(args[i]))
				continue
			}
			n, v, err := ParseSetArg(args[i])
			if err == nil {
				err = c.Set(n, v)
			}
			if err != nil {
				fmt.Fprintf(stderr, "Error: %v\n", err)
				return 1
			}
		default:
			fmt.Fprintf(stderr, "Error: unknown option %s\n", a)
			return 1
		}
	}
	if dump {
		_, _ = io.WriteString(stdout, Dump(c, pattern, expand))
		return 0
	}
	for _, n := range names {
		if verbose {
			s, ok := Verbose(c, n)
			if !ok {
				fmt.Fprintf(stderr, "Not defined: %s\n", strings.ToUpper(n))
				status = 1
				continue
			}
			_, _ = io.WriteString(stdout, s)
			continue
		}
		var v string
		var ok bool
		var err error
		if raw {
			v, ok = c.Raw(n)
		} else {
			v, ok, err = c.Lookup(n)
		}
		if err != nil {
			fmt.Fprintf(stderr, "Error: %v\n", err)
			status = 1
			continue
		}
		if !ok {
			fmt.Fprintf(stderr, "Not defined: %s\n", strings.ToUpper(n))
			status = 1
			continue
		}
		if _, ok := newRedactor(c).shown(n, v); !ok {
			fmt.Fprintf(stderr, "Not shown: %s holds a secret (or shows one); config_val never prints it\n", strings.ToUpper(n))
			status = 1
			continue
		}
		fmt.Fprintln(stdout, v)
	}
	return status
}

// SlotType is one startd slot type as SLOT_TYPE_<n>, NUM_SLOTS_TYPE_<n>
// and SLOT_TYPE_<n>_PARTITIONABLE declare it.
type SlotType struct {
	ID            int               // n in SLOT_TYPE_<n>; 0 for the default type
	Count         int               // NUM_SLOTS_TYPE_<n> (NUM_SLOTS for type 0)
	Partitionable bool              // SLOT_TYPE_<n>_PARTITIONABLE
	Resources     map[string]string // lower-case resource -> share ("2", "50%", "1/4", "1024", "auto")
}

// SlotTypes returns the slot types the configuration declares, ordered by
// ID. Without any SLOT_TYPE_<n> having slots, it returns type 0 with
// NUM_SLOTS static slots each getting an equal share ("auto").
func (c *Config) SlotTypes() ([]SlotType, error) {
	var out []SlotType
	for _, n := range c.Names() {
		up := strings.ToUpper(n)
		if !strings.HasPrefix(up, "SLOT_TYPE_") {
			continue
		}
		id, err := strconv.Atoi(up[len("SLOT_TYPE_"):])
		if err != nil || id <= 0 {
			continue
		}
		v, _ := c.Get(n)
		res, err := parseSlotResources(v)
		if err != nil {
			return nil, c.valueErr(n, err)
		}
		count, err := c.Int("NUM_SLOTS_TYPE_"+strconv.Itoa(id), 0)
		if err != nil {
			return nil, err
		}
		part, err := c.Bool("SLOT_TYPE_"+strconv.Itoa(id)+"_PARTITIONABLE", false)
		if err != nil {
			return nil, err
		}
		if count > 0 {
			out = append(out, SlotType{ID: id, Count: count, Partitionable: part, Resources: res})
		}
	}
	if len(out) == 0 {
		n, err := c.Int("NUM_SLOTS", 1)
		if err != nil {
			return nil, err
		}
		return []SlotType{{ID: 0, Count: n, Resources: map[string]string{"cpus": "auto", "memory": "auto", "disk": "auto", "swap": "auto"}}}, nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func parseSlotResources(v string) (map[string]string, error) {
	res := map[string]string{}
	v = strings.TrimSpace(v)
	if v == "" {
		return res, nil
	}
	for strings.Contains(v, " =") || strings.Contains(v, "= ") {
		v = strings.ReplaceAll(strings.ReplaceAll(v, " =", "="), "= ", "=")
	}
	for _, part := range SplitList(v) {
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			// A bare share applies to every resource.
			if len(SplitList(v)) != 1 {
				return nil, fmt.Errorf("slot resource %q: expected name=value", part)
			}
			for _, r := range []string{"cpus", "memory", "disk", "swap"} {
				res[r] = part
			}
			return res, nil
		}
		k = strings.ToLower(strings.TrimSpace(k))
		switch k {
		case "c", "cpu":
			k = "cpus"
		case "r", "ram", "mem":
			k = "memory"
		case "d":
			k = "disk"
		case "s", "v", "virtualmemory":
			k = "swap"
		}
		if val = strings.TrimSpace(val); val == "" {
			return nil, fmt.Errorf("slot resource %q has no value", k)
		}
		res[k] = val
	}
	return res, nil
}
