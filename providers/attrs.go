package providers

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/zclconf/go-cty/cty"
)

// AttrArgs turns an attributes value (an object or map of strings, numbers
// and bools) into the sorted K=V arguments of `pondctl agent -attr`, with
// strings quoted and numbers written as ClassAd integers or reals. A null
// value gives none. Errors name the attribute as path (path.K for one
// element); an empty path leaves the prefix to the caller.
func AttrArgs(v cty.Value, path string) ([]string, error) {
	at := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	prefix := ""
	if path != "" {
		prefix = path + ": "
	}
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		return nil, errors.New(prefix + "not known")
	}
	ty := v.Type()
	if !ty.IsObjectType() && !ty.IsMapType() {
		return nil, fmt.Errorf("%swant an object such as { HasMatlab = true }, got %s", prefix, ty.FriendlyName())
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		name := k.AsString()
		if !api.ValidAttrName(name) {
			return nil, fmt.Errorf("%s%q is not a valid ClassAd attribute name", prefix, name)
		}
		if ev.IsNull() {
			return nil, fmt.Errorf("%s: null value", at(name))
		}
		var s string
		switch ev.Type() {
		case cty.String:
			s = strconv.Quote(ev.AsString())
		case cty.Bool:
			s = strconv.FormatBool(ev.True())
		case cty.Number:
			bf := ev.AsBigFloat()
			if bf.IsInt() {
				s = bf.Text('f', 0)
			} else {
				f, _ := bf.Float64()
				s = strconv.FormatFloat(f, 'g', -1, 64)
				if !strings.ContainsAny(s, ".eE") {
					s += ".0"
				}
			}
		default:
			return nil, fmt.Errorf("%s: want a string, number or bool, got %s", at(name), ev.Type().FriendlyName())
		}
		out = append(out, name+"="+s)
	}
	sort.Strings(out)
	return out, nil
}
