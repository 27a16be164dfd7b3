package submit

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
)

// ParseArguments parses a submit file arguments value in either syntax
// and returns the argument vector. The new syntax is the whole value in
// double quotes: arguments are separated by whitespace, single quotes
// group (two single quotes inside a quoted group make one), and two double
// quotes make one double quote. The old syntax splits on whitespace.
// v2 reports which syntax was used.
func ParseArguments(s string) (args []string, v2 bool, err error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, `"`) {
		if len(t) < 2 || !strings.HasSuffix(t, `"`) {
			return nil, true, fmt.Errorf("arguments in the new syntax must end with a double quote: %s", clip(t))
		}
		args, err := parseV2(t[1:len(t)-1], true)
		return args, true, err
	}
	// In the old syntax \" is a double quote; other backslashes stay.
	return strings.Fields(strings.ReplaceAll(t, `\"`, `"`)), false, nil
}

// ParseArgumentsV2 parses the raw new-syntax form stored in a job's
// Arguments attribute (no enclosing double quotes) into an argument vector.
func ParseArgumentsV2(raw string) ([]string, error) { return parseV2(raw, false) }

// parseV2 splits s on whitespace honouring single-quote grouping; in the
// submit file form (inSubmit) a doubled double quote stands for one.
func parseV2(s string, inSubmit bool) ([]string, error) {
	var out []string
	var cur strings.Builder
	have := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			have = true
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						cur.WriteByte('\'')
						i++
						continue
					}
					closed = true
					break
				}
				if inSubmit && s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						i++
					} else {
						return nil, fmt.Errorf("a double quote inside the arguments must be doubled (column %d)", i+2)
					}
				}
				cur.WriteByte(s[i])
			}
			if !closed {
				return nil, fmt.Errorf("unterminated single quote in arguments %q", clip(s))
			}
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		case inSubmit && ch == '"':
			if i+1 < len(s) && s[i+1] == '"' {
				cur.WriteByte('"')
				have = true
				i++
				continue
			}
			return nil, fmt.Errorf("a double quote inside the arguments must be doubled (column %d)", i+2)
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

// JoinArgumentsV2 renders an argument vector in the raw new syntax
// HTCondor stores in the Arguments attribute: arguments holding
// whitespace or single quotes, and empty ones, are single-quoted with
// embedded single quotes doubled.
func JoinArgumentsV2(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = quoteV2(a)
	}
	return strings.Join(parts, " ")
}

// quoteV2 quotes one argument of the new syntax as HTCondor writes it:
// each run of white space and single quotes goes in single quotes (a
// single quote doubled), the rest as it is; an empty argument is a pair
// of single quotes.
func quoteV2(a string) string {
	if a == "" {
		return "''"
	}
	special := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' }
	var b strings.Builder
	for i := 0; i < len(a); {
		if !special(a[i]) {
			b.WriteByte(a[i])
			i++
			continue
		}
		b.WriteByte('\'')
		for ; i < len(a) && special(a[i]); i++ {
			if a[i] == '\'' {
				b.WriteString("''")
			} else {
				b.WriteByte(a[i])
			}
		}
		b.WriteByte('\'')
	}
	return b.String()
}

// sortEnv orders NAME=value entries by name, as HTCondor writes an
// environment; of one name the last entry wins.
func sortEnv(env []string) []string {
	idx := map[string]int{}
	var out []string
	for _, e := range env {
		n, _, _ := strings.Cut(e, "=")
		if i, ok := idx[n]; ok {
			out[i] = e
			continue
		}
		idx[n] = len(out)
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, k int) bool {
		a, _, _ := strings.Cut(out[i], "=")
		c, _, _ := strings.Cut(out[k], "=")
		return a < c
	})
	return out
}

// ParseEnvironment parses an environment value in either syntax and
// returns NAME=value entries in order. The new syntax is double-quoted,
// space-separated NAME=value pairs with single-quote grouping as for
// arguments; the old syntax separates NAME=value pairs with semicolons.
func ParseEnvironment(s string) (env []string, v2 bool, err error) {
	t := strings.TrimSpace(s)
	var items []string
	if strings.HasPrefix(t, `"`) {
		if len(t) < 2 || !strings.HasSuffix(t, `"`) {
			return nil, true, fmt.Errorf("environment in the new syntax must end with a double quote: %s", clip(t))
		}
		if items, err = parseV2(t[1:len(t)-1], true); err != nil {
			return nil, true, fmt.Errorf("environment: %w", err)
		}
		v2 = true
	} else {
		for _, it := range strings.Split(t, ";") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
	}
	for _, it := range items {
		name, _, ok := strings.Cut(it, "=")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, v2, fmt.Errorf("environment entry %q is not NAME=value", clip(it))
		}
		env = append(env, it)
	}
	return env, v2, nil
}

// ParseEnvironmentV2 parses the raw form stored in a job's Environment
// attribute into NAME=value entries.
func ParseEnvironmentV2(raw string) ([]string, error) {
	items, err := parseV2(raw, false)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if n, _, ok := strings.Cut(it, "="); !ok || n == "" {
			return nil, fmt.Errorf("environment entry %q is not NAME=value", clip(it))
		}
	}
	return items, nil
}

// JoinEnvironmentV2 renders NAME=value entries in the raw new syntax
// stored in the Environment attribute.
func JoinEnvironmentV2(env []string) string {
	parts := make([]string, len(env))
	for i, e := range env {
		n, v, _ := strings.Cut(e, "=")
		if v == "" {
			parts[i] = n + "="
			continue
		}
		parts[i] = n + "=" + quoteV2(v)
	}
	return strings.Join(parts, " ")
}

// mergeEnv overlays entries on base (later wins), keeping first-seen
// order and sorting base-only entries by name for stable output.
func mergeEnv(base, over []string) []string {
	idx := map[string]int{}
	var out []string
	add := func(e string) {
		n, _, _ := strings.Cut(e, "=")
		if i, ok := idx[n]; ok {
			out[i] = e
			return
		}
		idx[n] = len(out)
		out = append(out, e)
	}
	sorted := append([]string(nil), base...)
	sort.Strings(sorted)
	for _, e := range sorted {
		add(e)
	}
	for _, e := range over {
		add(e)
	}
	return out
}

// Argv returns a job's argument vector from its Arguments (new syntax) or
// Args (old syntax) attribute.
func Argv(job Job) ([]string, error) {
	if e, ok := lookupAttr(job, "Arguments"); ok {
		raw, err := classad.UnquoteString(e)
		if err != nil {
			return nil, fmt.Errorf("attribute Arguments: %w", err)
		}
		return ParseArgumentsV2(raw)
	}
	if e, ok := lookupAttr(job, "Args"); ok {
		raw, err := classad.UnquoteString(e)
		if err != nil {
			return nil, fmt.Errorf("attribute Args: %w", err)
		}
		return strings.Fields(raw), nil
	}
	return nil, nil
}

// Environ returns a job's environment as NAME=value entries from its
// Environment (new syntax) or Env (old syntax) attribute.
func Environ(job Job) ([]string, error) {
	if e, ok := lookupAttr(job, "Environment"); ok {
		raw, err := classad.UnquoteString(e)
		if err != nil {
			return nil, fmt.Errorf("attribute Environment: %w", err)
		}
		return ParseEnvironmentV2(raw)
	}
	if e, ok := lookupAttr(job, "Env"); ok {
		raw, err := classad.UnquoteString(e)
		if err != nil {
			return nil, fmt.Errorf("attribute Env: %w", err)
		}
		env, _, err := ParseEnvironment(raw)
		return env, err
	}
	return nil, nil
}

// CommandAttrs is what Argv and Environ read of the job ad ad (its
// Arguments, Args, Environment and Env, as their expressions' text): a
// job's command line and environment without its whole ad converted.
func CommandAttrs(ad *classad.Ad) Job {
	out := Job{}
	for _, n := range []string{"Arguments", "Args", "Environment", "Env"} {
		if e, ok := ad.Lookup(n); ok {
			out[n] = e.String()
		}
	}
	return out
}

func lookupAttr(job Job, name string) (string, bool) {
	if v, ok := job[name]; ok {
		return v, true
	}
	for k, v := range job {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}
