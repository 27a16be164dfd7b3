package planner

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// TestUnmarshalAttrsMatchesCtyJSON checks the fast decoder against
// ctyjson.Unmarshal on values of every type the schemas use.
func TestUnmarshalAttrsMatchesCtyJSON(t *testing.T) {
	ty := cty.Object(map[string]cty.Type{
		"s":    cty.String,
		"n":    cty.Number,
		"f":    cty.Number,
		"b":    cty.Bool,
		"l":    cty.List(cty.String),
		"set":  cty.Set(cty.Number),
		"m":    cty.Map(cty.Bool),
		"o":    cty.List(cty.Object(map[string]cty.Type{"name": cty.String, "pid": cty.Number})),
		"dyn":  cty.DynamicPseudoType,
		"null": cty.String,
		"tup":  cty.Tuple([]cty.Type{cty.String, cty.Number}),
		"em":   cty.Map(cty.String),
		"el":   cty.List(cty.Number),
	})
	vals := []cty.Value{
		cty.ObjectVal(map[string]cty.Value{
			"s":    cty.StringVal("héllo \"x\""),
			"n":    cty.NumberIntVal(42),
			"f":    cty.NumberFloatVal(3.25),
			"b":    cty.True,
			"l":    cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}),
			"set":  cty.SetVal([]cty.Value{cty.NumberIntVal(1), cty.NumberIntVal(2)}),
			"m":    cty.MapVal(map[string]cty.Value{"x": cty.False}),
			"o":    cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("n0"), "pid": cty.NumberIntVal(7)})}),
			"dyn":  cty.ObjectVal(map[string]cty.Value{"HasMatlab": cty.True, "Site": cty.StringVal("campus")}),
			"null": cty.NullVal(cty.String),
			"tup":  cty.TupleVal([]cty.Value{cty.StringVal("x"), cty.NumberIntVal(1)}),
			"em":   cty.MapValEmpty(cty.String),
			"el":   cty.ListValEmpty(cty.Number),
		}),
		cty.NullVal(ty),
	}
	for _, v := range vals {
		raw, err := ctyjson.Marshal(v, ty)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ctyjson.Unmarshal(raw, ty)
		if err != nil {
			t.Fatal(err)
		}
		got, err := unmarshalAttrs(raw, ty)
		if err != nil {
			t.Fatalf("unmarshalAttrs(%s): %v", raw, err)
		}
		if !got.RawEquals(want) {
			t.Fatalf("unmarshalAttrs(%s)\n got %#v\nwant %#v", raw, got, want)
		}
	}
	for _, bad := range []string{`{"s": 1}`, `{"zz": 1}`, `{"l": "x"}`, `{"n": "abc"}`, `[`} {
		if _, err := unmarshalAttrs([]byte(bad), ty); err == nil {
			t.Errorf("unmarshalAttrs(%s) succeeded, want an error", bad)
		}
	}
}

func BenchmarkUnmarshalAttrs(b *testing.B) {
	ty := cty.Object(map[string]cty.Type{"id": cty.String, "nodes": cty.Number, "labels": cty.Map(cty.String), "members": cty.List(cty.String)})
	raw := []byte(`{"id":"syn-1","nodes":3,"labels":{"site":"s1"},"members":["a","b","c"]}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := unmarshalAttrs(raw, ty); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ctyjson", func(b *testing.B) {
		for b.Loop() {
			if _, err := ctyjson.Unmarshal(raw, ty); err != nil {
				b.Fatal(err)
			}
		}
	})
}
