package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/state/jsonscan"
)

// unmarshalAttrs decodes a state instance's attributes into a value of type
// ty. It produces exactly what ctyjson.Unmarshal produces, several times
// faster for the common types, by decoding the JSON once with encoding/json
// and converting by type; dynamically typed parts go through ctyjson.
func unmarshalAttrs(raw []byte, ty cty.Type) (cty.Value, error) {
	if v, ok := scanAttrs(raw, ty); ok {
		return v, nil
	}
	return unmarshalGeneric(raw, ty)
}

// unmarshalGeneric is unmarshalAttrs through encoding/json's generic values.
func unmarshalGeneric(raw []byte, ty cty.Type) (cty.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return cty.NilVal, err
	}
	return fromJSON(data, ty, cty.Path{})
}

func fromJSON(data any, ty cty.Type, path cty.Path) (cty.Value, error) {
	if data == nil {
		return cty.NullVal(ty), nil
	}
	switch {
	case ty == cty.DynamicPseudoType:
		b, err := json.Marshal(data)
		if err != nil {
			return cty.NilVal, err
		}
		return ctyjson.Unmarshal(b, ty)
	case ty == cty.String:
		if s, ok := data.(string); ok {
			return cty.StringVal(s), nil
		}
		return mismatch(path, "string", data)
	case ty == cty.Number:
		return numberFromJSON(data, path)
	case ty == cty.Bool:
		if b, ok := data.(bool); ok {
			return cty.BoolVal(b), nil
		}
		return mismatch(path, "bool", data)
	case ty.IsObjectType():
		return objectFromJSON(data, ty, path)
	case ty.IsMapType():
		return mapFromJSON(data, ty, path)
	case ty.IsListType() || ty.IsSetType():
		return listFromJSON(data, ty, path)
	case ty.IsTupleType():
		return tupleFromJSON(data, ty, path)
	}
	return cty.NilVal, fmt.Errorf("unsupported type %s", ty.FriendlyName())
}

// mismatch is the error of JSON data that is not of the wanted kind.
func mismatch(path cty.Path, want string, data any) (cty.Value, error) {
	return cty.NilVal, path.NewErrorf("%s required, found %T", want, data)
}

func numberFromJSON(data any, path cty.Path) (cty.Value, error) {
	switch n := data.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return cty.NumberIntVal(i), nil
		}
		f, _, err := big.ParseFloat(string(n), 10, 512, big.ToNearestEven)
		if err != nil {
			return cty.NilVal, path.NewErrorf("invalid number %q", n)
		}
		return cty.NumberVal(f), nil
	case string:
		v, err := cty.ParseNumberVal(n)
		if err != nil {
			return cty.NilVal, path.NewErrorf("invalid number %q", n)
		}
		return v, nil
	}
	return mismatch(path, "number", data)
}

func objectFromJSON(data any, ty cty.Type, path cty.Path) (cty.Value, error) {
	m, ok := data.(map[string]any)
	if !ok {
		return mismatch(path, "object", data)
	}
	atys := ty.AttributeTypes()
	vals := make(map[string]cty.Value, len(atys))
	for name, aty := range atys {
		v, err := fromJSON(m[name], aty, append(path, cty.GetAttrStep{Name: name}))
		if err != nil {
			return cty.NilVal, err
		}
		vals[name] = v
	}
	for name := range m {
		if _, ok := atys[name]; !ok {
			return cty.NilVal, path.NewErrorf("unsupported attribute %q", name)
		}
	}
	if len(atys) == 0 {
		return cty.EmptyObjectVal, nil
	}
	return cty.ObjectVal(vals), nil
}

func mapFromJSON(data any, ty cty.Type, path cty.Path) (cty.Value, error) {
	m, ok := data.(map[string]any)
	if !ok {
		return mismatch(path, "object", data)
	}
	if len(m) == 0 {
		return cty.MapValEmpty(ty.ElementType()), nil
	}
	vals := make(map[string]cty.Value, len(m))
	for k, e := range m {
		v, err := fromJSON(e, ty.ElementType(), append(path, cty.IndexStep{Key: cty.StringVal(k)}))
		if err != nil {
			return cty.NilVal, err
		}
		vals[k] = v
	}
	return cty.MapVal(vals), nil
}

// listFromJSON decodes a list or a set.
func listFromJSON(data any, ty cty.Type, path cty.Path) (cty.Value, error) {
	l, ok := data.([]any)
	if !ok {
		return mismatch(path, "array", data)
	}
	if len(l) == 0 {
		if ty.IsListType() {
			return cty.ListValEmpty(ty.ElementType()), nil
		}
		return cty.SetValEmpty(ty.ElementType()), nil
	}
	vals := make([]cty.Value, len(l))
	for i, e := range l {
		v, err := fromJSON(e, ty.ElementType(), append(path, cty.IndexStep{Key: cty.NumberIntVal(int64(i))}))
		if err != nil {
			return cty.NilVal, err
		}
		vals[i] = v
	}
	if ty.IsListType() {
		return cty.ListVal(vals), nil
	}
	return cty.SetVal(vals), nil
}

func tupleFromJSON(data any, ty cty.Type, path cty.Path) (cty.Value, error) {
	l, ok := data.([]any)
	if !ok {
		return mismatch(path, "array", data)
	}
	etys := ty.TupleElementTypes()
	if len(l) != len(etys) {
		return cty.NilVal, path.NewErrorf("tuple of %d elements required, found %d", len(etys), len(l))
	}
	if len(l) == 0 {
		return cty.EmptyTupleVal, nil
	}
	vals := make([]cty.Value, len(l))
	for i, e := range l {
		v, err := fromJSON(e, etys[i], append(path, cty.IndexStep{Key: cty.NumberIntVal(int64(i))}))
		if err != nil {
			return cty.NilVal, err
		}
		vals[i] = v
	}
	return cty.TupleVal(vals), nil
}

// scanAttrs decodes raw into a value of type ty straight from the bytes,
// without the generic values of encoding/json in between. It handles the
// documents a state holds (objects, maps, lists, sets, tuples, strings,
// numbers, bools and nulls, in well-formed JSON); ok is false on anything
// else, from dynamically typed parts to malformed JSON and values that do
// not fit ty, which unmarshalAttrs then decodes, or reports, the general way.
func scanAttrs(raw []byte, ty cty.Type) (v cty.Value, ok bool) {
	s := ctyScanner{jsonscan.New(raw)}
	v, ok = s.value(ty)
	if !ok || !s.Done() {
		return cty.NilVal, false
	}
	return v, true
}

// ctyScanner reads a cty value of a known type with a jsonscan.Scanner.
type ctyScanner struct {
	*jsonscan.Scanner
}

func (s ctyScanner) value(ty cty.Type) (cty.Value, bool) {
	c := s.Next()
	if c == 'n' {
		return cty.NullVal(ty), s.Literal("null")
	}
	switch {
	case ty == cty.String:
		str, ok := s.Str()
		if !ok {
			return cty.NilVal, false
		}
		return cty.StringVal(str), true
	case ty == cty.Number:
		text, ok := s.Number()
		if !ok {
			return cty.NilVal, false
		}
		v, err := numberFromJSON(json.Number(text), nil)
		return v, err == nil
	case ty == cty.Bool:
		b, ok := s.Bool()
		if !ok {
			return cty.NilVal, false
		}
		return cty.BoolVal(b), true
	case ty.IsObjectType():
		return s.object(ty)
	case ty.IsMapType():
		return s.mapVal(ty)
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		return s.array(ty)
	}
	return cty.NilVal, false
}

func (s ctyScanner) object(ty cty.Type) (cty.Value, bool) {
	atys := ty.AttributeTypes()
	vals := make(map[string]cty.Value, len(atys))
	ok := s.Object(func(key []byte) bool {
		aty, known := atys[string(key)]
		if !known {
			return false
		}
		v, ok := s.value(aty)
		vals[string(key)] = v
		return ok
	})
	if !ok {
		return cty.NilVal, false
	}
	if len(atys) == 0 {
		return cty.EmptyObjectVal, true
	}
	for name, aty := range atys {
		if _, ok := vals[name]; !ok {
			vals[name] = cty.NullVal(aty)
		}
	}
	return cty.ObjectVal(vals), true
}

func (s ctyScanner) mapVal(ty cty.Type) (cty.Value, bool) {
	ety := ty.ElementType()
	var vals map[string]cty.Value
	ok := s.Object(func(key []byte) bool {
		v, ok := s.value(ety)
		if vals == nil {
			vals = map[string]cty.Value{}
		}
		vals[string(key)] = v
		return ok
	})
	if !ok {
		return cty.NilVal, false
	}
	if len(vals) == 0 {
		return cty.MapValEmpty(ety), true
	}
	return cty.MapVal(vals), true
}

// array reads a list, a set or a tuple.
func (s ctyScanner) array(ty cty.Type) (cty.Value, bool) {
	tuple := ty.IsTupleType()
	var etys []cty.Type
	if tuple {
		etys = ty.TupleElementTypes()
	}
	var vals []cty.Value
	ok := s.Array(func() bool {
		var ety cty.Type
		switch {
		case !tuple:
			ety = ty.ElementType()
		case len(vals) < len(etys):
			ety = etys[len(vals)]
		default:
			return false
		}
		v, ok := s.value(ety)
		vals = append(vals, v)
		return ok
	})
	if !ok {
		return cty.NilVal, false
	}
	switch {
	case tuple:
		if len(vals) != len(etys) {
			return cty.NilVal, false
		}
		if len(vals) == 0 {
			return cty.EmptyTupleVal, true
		}
		return cty.TupleVal(vals), true
	case len(vals) == 0 && ty.IsListType():
		return cty.ListValEmpty(ty.ElementType()), true
	case len(vals) == 0:
		return cty.SetValEmpty(ty.ElementType()), true
	case ty.IsListType():
		return cty.ListVal(vals), true
	}
	return cty.SetVal(vals), true
}
