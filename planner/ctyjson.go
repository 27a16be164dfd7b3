package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"unicode/utf8"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
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
	s := jsonScanner{data: raw}
	v, ok = s.value(ty)
	if !ok {
		return cty.NilVal, false
	}
	s.space()
	return v, s.pos == len(s.data)
}

type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// next skips white space and returns the next byte, 0 at the end.
func (s *jsonScanner) next() byte {
	s.space()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// literal consumes lit when it comes next.
func (s *jsonScanner) literal(lit string) bool {
	if len(s.data)-s.pos >= len(lit) && string(s.data[s.pos:s.pos+len(lit)]) == lit {
		s.pos += len(lit)
		return true
	}
	return false
}

func (s *jsonScanner) value(ty cty.Type) (cty.Value, bool) {
	c := s.next()
	if c == 'n' {
		return cty.NullVal(ty), s.literal("null")
	}
	switch {
	case ty == cty.String:
		str, ok := s.str()
		if !ok {
			return cty.NilVal, false
		}
		return cty.StringVal(str), true
	case ty == cty.Number:
		return s.number()
	case ty == cty.Bool:
		switch {
		case s.literal("true"):
			return cty.True, true
		case s.literal("false"):
			return cty.False, true
		}
	case ty.IsObjectType():
		return s.object(ty)
	case ty.IsMapType():
		return s.mapVal(ty)
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		return s.array(ty)
	}
	return cty.NilVal, false
}

// str reads a string; one with escapes goes through encoding/json.
func (s *jsonScanner) str() (string, bool) {
	if s.next() != '"' {
		return "", false
	}
	start := s.pos
	escaped := false
	for i := start + 1; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '\\':
			escaped = true
			i++
		case c == '"':
			s.pos = i + 1
			if escaped {
				var out string
				if err := json.Unmarshal(s.data[start:s.pos], &out); err != nil {
					return "", false
				}
				return out, true
			}
			body := s.data[start+1 : i]
			if !utf8.Valid(body) {
				return "", false // encoding/json replaces what is malformed
			}
			return string(body), true
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// number reads a number with JSON's syntax and converts it as
// numberFromJSON does.
func (s *jsonScanner) number() (cty.Value, bool) {
	start, i, d := s.pos, s.pos, s.data
	digits := func() bool {
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case !digits():
		return cty.NilVal, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return cty.NilVal, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return cty.NilVal, false
		}
	}
	s.pos = i
	v, err := numberFromJSON(json.Number(d[start:i]), nil)
	return v, err == nil
}

func (s *jsonScanner) object(ty cty.Type) (cty.Value, bool) {
	if s.next() != '{' {
		return cty.NilVal, false
	}
	s.pos++
	atys := ty.AttributeTypes()
	vals := make(map[string]cty.Value, len(atys))
	ok := s.members(func(name string) bool {
		aty, known := atys[name]
		if !known {
			return false
		}
		v, ok := s.value(aty)
		vals[name] = v
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

func (s *jsonScanner) mapVal(ty cty.Type) (cty.Value, bool) {
	if s.next() != '{' {
		return cty.NilVal, false
	}
	s.pos++
	ety := ty.ElementType()
	var vals map[string]cty.Value
	ok := s.members(func(key string) bool {
		v, ok := s.value(ety)
		if vals == nil {
			vals = map[string]cty.Value{}
		}
		vals[key] = v
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

// members reads the members of an object whose brace has been read,
// calling member to read each value.
func (s *jsonScanner) members(member func(key string) bool) bool {
	if s.next() == '}' {
		s.pos++
		return true
	}
	for {
		key, ok := s.str()
		if !ok || s.next() != ':' {
			return false
		}
		s.pos++
		if !member(key) {
			return false
		}
		switch s.next() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// array reads a list, a set or a tuple.
func (s *jsonScanner) array(ty cty.Type) (cty.Value, bool) {
	if s.next() != '[' {
		return cty.NilVal, false
	}
	s.pos++
	tuple := ty.IsTupleType()
	var etys []cty.Type
	if tuple {
		etys = ty.TupleElementTypes()
	}
	var vals []cty.Value
	if s.next() == ']' {
		s.pos++
	} else {
		for {
			var ety cty.Type
			switch {
			case !tuple:
				ety = ty.ElementType()
			case len(vals) < len(etys):
				ety = etys[len(vals)]
			default:
				return cty.NilVal, false
			}
			v, ok := s.value(ety)
			if !ok {
				return cty.NilVal, false
			}
			vals = append(vals, v)
			c := s.next()
			s.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				return cty.NilVal, false
			}
		}
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
