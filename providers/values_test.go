package providers

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestWithAttrs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v, want cty.Value
		set     map[string]cty.Value
	}{
		{"replace and add",
			cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("a"), "n": cty.NumberIntVal(1)}),
			cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("a"), "n": cty.NumberIntVal(2), "ids": cty.ListValEmpty(cty.String)}),
			map[string]cty.Value{"n": cty.NumberIntVal(2), "ids": cty.ListValEmpty(cty.String)}},
		{"empty object", cty.EmptyObjectVal,
			cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("a")}),
			map[string]cty.Value{"id": cty.StringVal("a")}},
		{"nothing set", cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("a")}),
			cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("a")}), nil},
	} {
		if got := WithAttrs(tc.v, tc.set); !got.RawEquals(tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.name, got, tc.want)
		}
	}
}
