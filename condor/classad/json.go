package classad

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ParseJSONAd parses one ad in HTCondor's JSON ClassAd syntax: an object
// whose values are JSON scalars, arrays (lists), objects (nested ads),
// null (undefined) or strings of the form "\/Expr(...)\/" holding an
// expression. A one-element array holding an object is also accepted.
func ParseJSONAd(src string) (*Ad, error) {
	ads, err := ParseJSON(src)
	if err != nil {
		return nil, err
	}
	if len(ads) != 1 {
		return nil, fmt.Errorf("classad: JSON holds %d ads, want 1", len(ads))
	}
	return ads[0], nil
}

// ParseJSON parses HTCondor's -json output: an array of ad objects, or a
// single object.
func ParseJSON(src string) ([]*Ad, error) {
	d := json.NewDecoder(strings.NewReader(src))
	d.UseNumber()
	jp := &jsonParser{d: d, src: src}
	t, err := jp.token()
	if err != nil {
		return nil, err
	}
	var ads []*Ad
	switch t {
	case json.Delim('['):
		for d.More() {
			t, err := jp.token()
			if err != nil {
				return nil, err
			}
			if t != json.Delim('{') {
				return nil, jp.errorf("expected a JSON object for a ClassAd")
			}
			a, err := jp.object(0)
			if err != nil {
				return nil, err
			}
			ads = append(ads, a)
		}
		if _, err := jp.token(); err != nil {
			return nil, err
		}
	case json.Delim('{'):
		a, err := jp.object(0)
		if err != nil {
			return nil, err
		}
		ads = append(ads, a)
	default:
		return nil, jp.errorf("expected a JSON object or array of objects")
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, jp.errorf("unexpected data after JSON ClassAd")
	}
	return ads, nil
}

type jsonParser struct {
	d   *json.Decoder
	src string
}

func (jp *jsonParser) errorf(format string, args ...any) error {
	lx := lexer{src: jp.src}
	l, c := lx.position(int(jp.d.InputOffset()))
	return &SyntaxError{Line: l, Col: c, Msg: fmt.Sprintf(format, args...)}
}

func (jp *jsonParser) token() (json.Token, error) {
	t, err := jp.d.Token()
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			lx := lexer{src: jp.src}
			l, c := lx.position(int(se.Offset))
			return nil, &SyntaxError{Line: l, Col: c, Msg: se.Error()}
		}
		if err == io.EOF {
			return nil, jp.errorf("unexpected end of JSON input")
		}
		return nil, jp.errorf("%v", err)
	}
	return t, nil
}

func (jp *jsonParser) object(depth int) (*Ad, error) {
	if depth > maxDepth {
		return nil, jp.errorf("JSON nested too deeply")
	}
	a := NewAd()
	for jp.d.More() {
		t, err := jp.token()
		if err != nil {
			return nil, err
		}
		name, ok := t.(string)
		if !ok {
			return nil, jp.errorf("expected attribute name")
		}
		e, err := jp.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a.Set(name, e)
	}
	if _, err := jp.token(); err != nil {
		return nil, err
	}
	return a, nil
}

func (jp *jsonParser) value(depth int) (Expr, error) {
	if depth > maxDepth {
		return nil, jp.errorf("JSON nested too deeply")
	}
	t, err := jp.token()
	if err != nil {
		return nil, err
	}
	switch v := t.(type) {
	case nil:
		return &litNode{Undefined()}, nil
	case bool:
		return &litNode{Bool(v)}, nil
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return &litNode{Int(i)}, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !strings.Contains(err.Error(), "range") {
			return nil, jp.errorf("bad number %s", s)
		}
		return &litNode{Real(f)}, nil
	case string:
		if strings.HasPrefix(v, "/Expr(") && strings.HasSuffix(v, ")/") {
			e, err := ParseExpr(v[6 : len(v)-2])
			if err != nil {
				return nil, jp.errorf("bad expression %q: %v", v[6:len(v)-2], err)
			}
			return e, nil
		}
		return &litNode{String(v)}, nil
	case json.Delim:
		switch v {
		case '[':
			var elems []Expr
			for jp.d.More() {
				e, err := jp.value(depth + 1)
				if err != nil {
					return nil, err
				}
				elems = append(elems, e)
			}
			if _, err := jp.token(); err != nil {
				return nil, err
			}
			return newList(elems), nil
		case '{':
			a, err := jp.object(depth + 1)
			if err != nil {
				return nil, err
			}
			return &adNode{a}, nil
		}
	}
	return nil, jp.errorf("unexpected JSON token %v", t)
}

// MarshalJSON encodes a in HTCondor's JSON ClassAd format.
func (a *Ad) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	writeJSONAd(&b, a, 0)
	return b.Bytes(), nil
}

// MarshalJSON encodes ads as a JSON array in the format of HTCondor's -json
// output.
func MarshalJSON(ads []*Ad) []byte {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, a := range ads {
		if i > 0 {
			b.WriteString(",\n")
		}
		writeJSONAd(&b, a, 0)
	}
	b.WriteString("\n]\n")
	return b.Bytes()
}

func indent(b *bytes.Buffer, n int) {
	for i := 0; i < n; i++ {
		b.WriteString("  ")
	}
}

func writeJSONAd(b *bytes.Buffer, a *Ad, depth int) {
	b.WriteString("{\n")
	for i, at := range a.order {
		if i > 0 {
			b.WriteString(",\n")
		}
		indent(b, depth+1)
		writeJSONString(b, at.name)
		b.WriteString(": ")
		writeJSONExpr(b, at.expr, depth+1)
	}
	if len(a.order) > 0 {
		b.WriteByte('\n')
	}
	indent(b, depth)
	b.WriteByte('}')
}

func writeJSONString(b *bytes.Buffer, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func writeJSONExpr(b *bytes.Buffer, e Expr, depth int) {
	switch n := e.(type) {
	case *litNode:
		v := n.v
		switch v.kind {
		case UndefinedKind:
			b.WriteString("null")
			return
		case BoolKind, IntKind:
			b.WriteString(v.String())
			return
		case RealKind:
			if !math.IsInf(v.fl(), 0) && !math.IsNaN(v.fl()) {
				var sb strings.Builder
				writeValue(&sb, v, true)
				b.WriteString(sb.String())
				return
			}
		case StringKind:
			writeJSONString(b, v.s)
			return
		}
	case *listNode:
		b.WriteString("[\n")
		for i, x := range n.elems {
			if i > 0 {
				b.WriteString(",\n")
			}
			indent(b, depth+1)
			writeJSONExpr(b, x, depth+1)
		}
		if len(n.elems) > 0 {
			b.WriteByte('\n')
		}
		indent(b, depth)
		b.WriteByte(']')
		return
	case *adNode:
		writeJSONAd(b, n.ad, depth)
		return
	}
	var buf bytes.Buffer
	writeJSONString(&buf, e.String())
	enc := buf.Bytes()
	b.WriteString(`"\/Expr(`)
	b.Write(enc[1 : len(enc)-1])
	b.WriteString(`)\/"`)
}
