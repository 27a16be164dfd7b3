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

// scanType is the type FuzzScanAttrs decodes into: every kind scanAttrs
// handles, nested.
var scanType = cty.Object(map[string]cty.Type{
	"s":   cty.String,
	"n":   cty.Number,
	"b":   cty.Bool,
	"l":   cty.List(cty.String),
	"set": cty.Set(cty.Number),
	"m":   cty.Map(cty.Bool),
	"o":   cty.List(cty.Object(map[string]cty.Type{"name": cty.String, "pid": cty.Number})),
	"tup": cty.Tuple([]cty.Type{cty.String, cty.Number}),
	"et":  cty.EmptyTuple,
	"eo":  cty.EmptyObject,
	"dyn": cty.DynamicPseudoType,
})

// checkScan fails when scanAttrs accepts raw and decodes it otherwise than
// encoding/json's generic values do.
func checkScan(t *testing.T, raw []byte, ty cty.Type) {
	t.Helper()
	got, ok := scanAttrs(raw, ty)
	if !ok {
		return
	}
	want, err := unmarshalGeneric(raw, ty)
	if err != nil {
		t.Fatalf("scanAttrs(%q) = %#v, but the generic decoder fails: %v", raw, got, err)
	}
	if !got.RawEquals(want) {
		t.Fatalf("scanAttrs(%q)\n got %#v\nwant %#v", raw, got, want)
	}
}

var scanSeeds = []string{
	`{"s":"a\"b\u00e9\ud83d\ude00","n":-1.5e3,"b":true,"l":["x",null],"set":[1,1,2],"m":{"k":false,"k":true},"o":[{"name":"n","pid":7}],"tup":["t",1],"et":[],"eo":{}}`,
	`{"n":12345678901234567890123,"s":"caf\u00e9 \u003c\u003e","m":{},"l":[],"set":[]}`,
	` { "n" : 0 , "s" : null } `,
	`{"n":01}`, `{"n":1.}`, `{"n":-}`, `{"n":"1"}`, `{"s":"\xff"}`, `{"s":"a` + "\n" + `b"}`,
	`{"zz":1}`, `{"tup":["t"]}`, `{"tup":["t",1,2]}`, `{"dyn":{"a":1}}`, `{"n":1}x`, `{"n":1,}`, `[`, `null`, `{"s":1,"s":"x"}`,
}

// TestScanAttrs checks the direct decoder against the generic one, and
// that it decodes the documents a state holds rather than leaving them to
// the generic decoder.
func TestScanAttrs(t *testing.T) {
	for _, raw := range scanSeeds {
		checkScan(t, []byte(raw), scanType)
	}
	for _, raw := range []string{scanSeeds[0], scanSeeds[1], scanSeeds[2], `null`} {
		if _, ok := scanAttrs([]byte(raw), scanType); !ok {
			t.Errorf("scanAttrs(%s) left it to the generic decoder", raw)
		}
	}
	for _, raw := range []string{`{"n":01}`, `{"n":1.}`, `{"n":1}x`, `{"n":1,}`, `{"zz":1}`, `{"dyn":{"a":1}}`, `{"tup":["t"]}`} {
		if _, ok := scanAttrs([]byte(raw), scanType); ok {
			t.Errorf("scanAttrs(%s) accepted it", raw)
		}
	}
}

func FuzzScanAttrs(f *testing.F) {
	for _, raw := range scanSeeds {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkScan(t, raw, scanType)
	})
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
	b.Run("generic", func(b *testing.B) {
		for b.Loop() {
			if _, err := unmarshalGeneric(raw, ty); err != nil {
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
