package providertest

import (
	"strings"
	"testing"

	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

func TestCheckSchema(t *testing.T) {
	wrap := func(attrs map[string]*providers.Attribute) *providers.ProviderSchema {
		return &providers.ProviderSchema{
			Provider:  &providers.Schema{},
			Resources: map[string]*providers.Schema{"r": {Attributes: attrs}},
		}
	}
	for _, tc := range []struct {
		name   string
		schema *providers.ProviderSchema
		want   string
	}{
		{"ok", wrap(map[string]*providers.Attribute{
			"a": {Type: cty.String, Required: true, ForceNew: true},
			"b": {Type: cty.Number, Optional: true, Computed: true},
			"c": {Type: cty.String, Computed: true},
		}), ""},
		{"nil", nil, "schema is nil"},
		{"no type", wrap(map[string]*providers.Attribute{"a": {Optional: true}}), "resource r.a: no type"},
		{"no mode", wrap(map[string]*providers.Attribute{"a": {Type: cty.String}}), "neither required, optional nor computed"},
		{"required and computed", wrap(map[string]*providers.Attribute{"a": {Type: cty.String, Required: true, Computed: true}}), "required cannot be"},
		{"force new computed", wrap(map[string]*providers.Attribute{"a": {Type: cty.String, Computed: true, ForceNew: true}}), "ForceNew on a computed-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSchema(tc.schema)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("CheckSchema = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestObjectAndProposedNew(t *testing.T) {
	sc := &providers.Schema{Attributes: map[string]*providers.Attribute{
		"n":   {Type: cty.Number, Optional: true},
		"d":   {Type: cty.DynamicPseudoType, Optional: true},
		"id":  {Type: cty.String, Computed: true},
		"opt": {Type: cty.String, Optional: true, Computed: true},
	}}
	cfg, err := Object(sc, map[string]cty.Value{"n": cty.StringVal("3"), "d": cty.True})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.GetAttr("n").RawEquals(cty.NumberIntVal(3)) || !cfg.GetAttr("id").IsNull() || !cfg.GetAttr("d").RawEquals(cty.True) {
		t.Fatalf("Object = %#v", cfg)
	}
	if _, err := Object(sc, map[string]cty.Value{"nope": cty.True}); err == nil {
		t.Fatal("unknown attribute accepted")
	}
	if _, err := Object(sc, map[string]cty.Value{"n": cty.StringVal("x")}); err == nil {
		t.Fatal("bad number accepted")
	}
	prior, _ := Object(sc, map[string]cty.Value{"n": cty.NumberIntVal(1), "id": cty.StringVal("x"), "opt": cty.StringVal("p")})
	got := ProposedNew(sc, prior, cfg)
	if !got.GetAttr("id").RawEquals(cty.StringVal("x")) || !got.GetAttr("opt").RawEquals(cty.StringVal("p")) ||
		!got.GetAttr("n").RawEquals(cty.NumberIntVal(3)) {
		t.Fatalf("ProposedNew = %#v", got)
	}
}
