package planner

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/providers"
)

// evalInstanceConfig evaluates the configuration body of one instance.
func evalInstanceConfig(sc *scope, info *resourceInfo, key any, each map[string]cty.Value) (cty.Value, hcl.Diagnostics) {
	inst := &instanceData{}
	switch k := key.(type) {
	case int:
		inst.countIndex = cty.NumberIntVal(int64(k))
	case string:
		inst.eachKey = cty.StringVal(k)
		inst.eachValue = each[k]
		if inst.eachValue == cty.NilVal {
			inst.eachValue = cty.DynamicVal
		}
	}
	ectx, diags := sc.evalContext(info.body, inst)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	v, d := hcldec.Decode(info.cfg.Config, info.spec, ectx)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	// Computed-only attributes are absent from the decoder spec; fill them
	// in as null so the value has the implied type.
	return fillObject(v, info.schema), diags
}

// fillObject adds null values for the schema attributes missing from v.
func fillObject(v cty.Value, s *providers.Schema) cty.Value {
	ty := s.ImpliedType()
	if v.IsNull() {
		return cty.NullVal(ty)
	}
	if !v.IsKnown() {
		return cty.UnknownVal(ty)
	}
	vals := map[string]cty.Value{}
	if v.Type().Equals(ty) {
		return v
	}
	for name, aty := range ty.AttributeTypes() {
		if v.Type().IsObjectType() && v.Type().HasAttribute(name) {
			av := v.GetAttr(name)
			if av.Type().Equals(aty) {
				vals[name] = av
				continue
			}
			if cv, err := convert.Convert(av, aty); err == nil {
				vals[name] = cv
				continue
			}
			vals[name] = av
			continue
		}
		vals[name] = cty.NullVal(aty)
	}
	return cty.ObjectVal(vals)
}
