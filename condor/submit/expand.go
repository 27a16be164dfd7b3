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
	return v, ln, ok
}

// expand expands every macro reference in s; see package macro.
func (m *macroSet) expand(s string) (string, error) {
	return macro.Expander{Source: m, Env: m.env}.Expand(s)
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
