package planner

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

func decodeAttrs(raw json.RawMessage, schema *providers.Schema) (cty.Value, error) {
	ty := schema.ImpliedType()
	if len(raw) == 0 || string(raw) == "null" {
		return cty.NullVal(ty), nil
	}
	v, err := unmarshalAttrs(raw, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("attributes do not match the schema: %w", err)
	}
	return v, nil
}

func encodeAttrs(v cty.Value, schema *providers.Schema) (json.RawMessage, error) {
	v, err := convert.Convert(v, schema.ImpliedType())
	if err != nil {
		return nil, err
	}
	b, err := ctyjson.Marshal(v, schema.ImpliedType())
	if err != nil {
		return nil, err
	}
	return b, nil
}

func sensitiveAttrs(s *providers.Schema) []string {
	var out []string
	for n, a := range s.Attributes {
		if a.Sensitive {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func decodeOutput(o *state.Output) (cty.Value, error) {
	var sv ctyjson.SimpleJSONValue
	ty, err := ctyjson.UnmarshalType(o.Type)
	if err != nil {
		if err := sv.UnmarshalJSON(o.Value); err != nil {
			return cty.NilVal, err
		}
		return sv.Value, nil
	}
	return ctyjson.Unmarshal(o.Value, ty)
}

func encodeOutput(v cty.Value, sensitive bool) (*state.Output, error) {
	ty := v.Type()
	tb, err := ctyjson.MarshalType(ty)
	if err != nil {
		return nil, err
	}
	vb, err := ctyjson.Marshal(v, ty)
	if err != nil {
		return nil, err
	}
	return &state.Output{Value: vb, Type: tb, Sensitive: sensitive}, nil
}

// valuesEqual reports whether two values are known to be equal. RawEquals
// decides most cases cheaply; Equals handles what it cannot (numbers of
// different precision, say).
func valuesEqual(a, b cty.Value) bool {
	if a.RawEquals(b) {
		return true
	}
	eq := a.Equals(b)
	return eq.IsKnown() && eq.True()
}

// idOf returns the id attribute of a value, if any.
func idOf(v cty.Value) string {
	if v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() || !v.Type().HasAttribute("id") {
		return ""
	}
	id := v.GetAttr("id")
	if id.IsNull() || !id.IsKnown() || !id.Type().Equals(cty.String) {
		return ""
	}
	return id.AsString()
}
