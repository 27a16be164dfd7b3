// Package marks holds the cty value marks of the planner. A value derived
// from a sensitive one carries Sensitive: cty and HCL carry marks through
// expressions and functions, so whatever is computed from a sensitive
// variable is sensitive too, and the planner redacts it wherever it would
// show or store it.
package marks

import "github.com/zclconf/go-cty/cty"

type mark string

// Sensitive marks a value that must not be shown or stored in clear: a
// sensitive variable's value, the result of the sensitive function, and
// everything computed from them.
const Sensitive = mark("sensitive")

// Has reports whether v, or any value inside it, is marked sensitive.
func Has(v cty.Value) bool {
	_, pvm := v.UnmarkDeepWithPaths()
	for _, pm := range pvm {
		if _, ok := pm.Marks[Sensitive]; ok {
			return true
		}
	}
	return false
}
