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
	return m.undefinedEnv(v), ln, ok
}

// expand expands every macro reference in s; see package macro.
func (m *macroSet) expand(s string) (string, error) {
	return macro.Expander{Source: m, Env: m.env}.Expand(m.undefinedEnv(s))
}

// undefinedEnv replaces each $ENV(NAME) without a default whose variable
// is not set by UNDEFINED, as condor_submit expands it (configuration
// files expand it to nothing).
func (m *macroSet) undefinedEnv(s string) string {
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
		if j > 0 && s[j-1] == '$' || len(s)-j < 5 || !strings.EqualFold(s[j:j+5], "$ENV(") {
			b.WriteByte('$')
			i = j + 1
			continue
		}
		end := strings.IndexByte(s[j:], ')')
		name := ""
		if end > 0 {
			name = strings.TrimSpace(s[j+5 : j+end])
		}
		if name == "" || strings.ContainsAny(name, ":$(") {
			b.WriteByte('$')
			i = j + 1
			continue
		}
		set := false
		if m.env != nil {
			_, set = m.env(name)
		}
		if set {
			b.WriteString(s[j : j+end+1])
		} else {
			b.WriteString("UNDEFINED")
		}
		i = j + end + 1
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
