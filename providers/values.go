package providers

import "github.com/zclconf/go-cty/cty"

// WithAttrs returns the object v with the attributes of set added or
// replaced; v with no attributes gives an object of set alone.
func WithAttrs(v cty.Value, set map[string]cty.Value) cty.Value {
	m := v.AsValueMap()
	if m == nil {
		m = map[string]cty.Value{}
	}
	for k, x := range set {
		m[k] = x
	}
	return cty.ObjectVal(m)
}
