package providertest

import (
	"github.com/zclconf/go-cty/cty"
	ctyconvert "github.com/zclconf/go-cty/cty/convert"
)

func convert(v cty.Value, ty cty.Type) (cty.Value, error) { return ctyconvert.Convert(v, ty) }
