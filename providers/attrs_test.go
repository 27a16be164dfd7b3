package providers

import (
	"slices"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestAttrArgs(t *testing.T) {
	good := cty.ObjectVal(map[string]cty.Value{
		"Site": cty.StringVal(`a"b`), "HasMatlab": cty.True,
		"Cpus": cty.NumberIntVal(4), "Mips": cty.NumberFloatVal(1.5), "Small": cty.NumberFloatVal(1.5e-7),
	})
	got, err := AttrArgs(good, "attributes")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Cpus=4", "HasMatlab=true", "Mips=1.5", `Site="a\"b"`, "Small=1.5e-07"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, err := AttrArgs(cty.NullVal(cty.DynamicPseudoType), ""); got != nil || err != nil {
		t.Fatalf("null: got %q, %v", got, err)
	}
	for _, tc := range []struct {
		v          cty.Value
		path, want string
	}{
		{cty.StringVal("x"), "attributes", "attributes: want an object such as { HasMatlab = true }, got string"},
		{cty.StringVal("x"), "", "want an object such as { HasMatlab = true }, got string"},
		{cty.UnknownVal(cty.DynamicPseudoType), "attributes", "attributes: not known"},
		{cty.ObjectVal(map[string]cty.Value{"1st": cty.True}), "attributes", `attributes: "1st" is not a valid ClassAd attribute name`},
		{cty.ObjectVal(map[string]cty.Value{"1st": cty.True}), "", `"1st" is not a valid ClassAd attribute name`},
		{cty.ObjectVal(map[string]cty.Value{"L": cty.ListValEmpty(cty.Bool)}), "attributes", "attributes.L: want a string, number or bool, got list of bool"},
		{cty.ObjectVal(map[string]cty.Value{"N": cty.NullVal(cty.String)}), "", "N: null value"},
	} {
		_, err := AttrArgs(tc.v, tc.path)
		if err == nil || err.Error() != tc.want {
			t.Errorf("AttrArgs(%#v, %q): got %v, want %q", tc.v, tc.path, err, tc.want)
		}
	}
}
