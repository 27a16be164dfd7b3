package submit

import (
	"strings"

	"github.com/pond-htc/pond/condor/macro"
)

// macroSet resolves submit macros: file commands, loop variables and the
// predefined Cluster/Process family. Names are case-insensitive. The
// macro language itself (package macro) is the one configuration files
// use.
type macroSet struct {
	vals map[string]string // lower-case name -> raw value
	env  func(string) (string, bool)
}

func (m *macroSet) set(name, value string) { m.vals[strings.ToLower(name)] = value }

// Lookup implements macro.Source.
func (m *macroSet) Lookup(name string) (value, key string, ok bool) {
	ln := strings.ToLower(name)
	v, ok := m.vals[ln]
	return m.condorRefs(v), ln, ok
}

// expand expands every macro reference in s; see package macro.
func (m *macroSet) expand(s string) (string, error) {
	return macro.Expander{Source: m, Env: m.env}.Expand(m.condorRefs(s))
}

// condorRefs rewrites what condor_submit expands its own way before the
// macro package sees it: $ENV(NAME) without a default whose variable is
// not set becomes UNDEFINED (configuration files expand it to nothing),
// and a $(NAME:default) or $ENV(NAME:default) whose default holds a quote
// is not a macro reference to condor_submit, so it stays as written.
func (m *macroSet) condorRefs(s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '$')
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		j += i
		b.WriteString(s[i:j])
		open := -1
		switch {
		case j > 0 && s[j-1] == '$':
		case strings.HasPrefix(s[j:], "$("):
			open = j + 1
		case len(s)-j >= 5 && strings.EqualFold(s[j:j+5], "$ENV("):
			open = j + 4
		}
		end := -1
		if open >= 0 {
			end = macro.MatchParen(s, open)
		}
		if end < 0 {
			b.WriteByte('$')
			i = j + 1
			continue
		}
		inner := s[open+1 : end]
		name, def, hasDef := strings.Cut(inner, ":")
		switch {
		case hasDef && strings.ContainsAny(def, `"'`):
			// $(DOLLAR) expands to the dollar; the rest is plain text.
			b.WriteString("$(DOLLAR)")
			b.WriteString(s[j+1 : end+1])
			i = end + 1
			continue
		case open == j+4 && !hasDef && !strings.ContainsAny(name, "$()"):
			set := false
			if m.env != nil {
				_, set = m.env(strings.TrimSpace(name))
			}
			if !set {
				b.WriteString("UNDEFINED")
				i = end + 1
				continue
			}
		}
		b.WriteByte('$')
		i = j + 1
	}
	return b.String()
}

func isAlnum(ch byte) bool { return macro.IsAlnum(ch) }

func evalArith(s string) (float64, bool, error) { return macro.EvalArith(s) }

// value returns the named macro expanded and whether it is defined.
func (m *macroSet) value(name string) (string, bool, error) {
	raw, key, ok := m.Lookup(strings.TrimSpace(name))
	if !ok {
		return "", false, nil
	}
	v, err := macro.Expander{Source: m, Env: m.env}.ExpandValue(raw, key)
	return v, true, err
}
