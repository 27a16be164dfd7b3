package planner

import (
	"fmt"
	"math/big"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/planner/marks"
)

// expand evaluates count or for_each.
func (w *planWalk) expand(info *resourceInfo) (*expansion, map[string]cty.Value, hcl.Diagnostics) {
	r := info.cfg
	switch {
	case r.Count != nil:
		v, diags := w.sc.evalExpr(r.Count)
		if diags.HasErrors() {
			return nil, nil, diags
		}
		n, err := wholeNumber(v)
		if err != nil {
			return nil, nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid count argument", Detail: err.Error(), Subject: r.Count.Range().Ptr()})
		}
		keys := make([]any, n)
		for i := range keys {
			keys[i] = i
		}
		return &expansion{mode: expandCount, keys: keys}, nil, diags
	case r.ForEach != nil:
		v, diags := w.sc.evalExpr(r.ForEach)
		if diags.HasErrors() {
			return nil, nil, diags
		}
		m, err := forEachMap(v)
		if err != nil {
			return nil, nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid for_each argument", Detail: err.Error(), Subject: r.ForEach.Range().Ptr()})
		}
		keys := make([]any, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].(string) < keys[j].(string) })
		return &expansion{mode: expandForEach, keys: keys}, m, diags
	}
	return &expansion{mode: expandSingle, keys: []any{nil}}, nil, nil
}

func wholeNumber(v cty.Value) (int, error) {
	// A sensitive count is allowed, as in Terraform: the number of
	// instances shows anyway.
	v, _ = v.UnmarkDeep()
	if !v.IsKnown() {
		return 0, fmt.Errorf("the count value depends on values that cannot be determined until apply, so pond cannot predict how many instances will be created")
	}
	if v.IsNull() {
		return 0, fmt.Errorf("count must not be null")
	}
	nv, err := convert.Convert(v, cty.Number)
	if err != nil {
		return 0, fmt.Errorf("count must be a whole number: %s", err)
	}
	bf := nv.AsBigFloat()
	if !bf.IsInt() {
		return 0, fmt.Errorf("count must be a whole number, not %s", bf.Text('g', -1))
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i < 0 || i > 1<<20 {
		return 0, fmt.Errorf("count must be between 0 and %d, not %s", 1<<20, bf.Text('g', -1))
	}
	return int(i), nil
}

func forEachMap(v cty.Value) (map[string]cty.Value, error) {
	// The keys become instance addresses, which are shown and stored:
	// they must not be sensitive (each.value may be).
	v, m := v.Unmark()
	if _, ok := m[marks.Sensitive]; ok {
		return nil, fmt.Errorf("the for_each value is sensitive, and its keys would be shown as instance addresses; use nonsensitive() on the keys if they may be shown")
	}
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("the for_each value depends on values that cannot be determined until apply, so pond cannot predict how many instances will be created")
	}
	if v.IsNull() {
		return nil, fmt.Errorf("for_each must not be null")
	}
	ty := v.Type()
	out := map[string]cty.Value{}
	switch {
	case ty.IsMapType() || ty.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			out[k.AsString()] = ev
		}
	case ty.IsSetType():
		if !ty.ElementType().Equals(cty.String) {
			sv, err := convert.Convert(v, cty.Set(cty.String))
			if err != nil {
				return nil, fmt.Errorf("for_each takes a map or a set of strings, not %s", ty.FriendlyName())
			}
			v = sv
		}
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			if ev.IsMarked() {
				return nil, fmt.Errorf("the for_each set holds a sensitive value, which would be shown as an instance address")
			}
			if ev.IsNull() {
				return nil, fmt.Errorf("for_each set must not contain null")
			}
			out[ev.AsString()] = ev
		}
	default:
		return nil, fmt.Errorf("for_each takes a map or a set of strings, not %s; use toset() to convert a list", ty.FriendlyName())
	}
	return out, nil
}
