package tree

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

// Frame bodies come in two formats, told apart by their first byte. The
// binary format, which every node sends, starts with wireBinary; a body
// that starts with '{' is the JSON form of an envelope, which the first
// release sent and which is still accepted.
//
// The binary format is a sequence of fields in a fixed order: unsigned
// integers as uvarints, signed ones as zig-zag varints, strings as a
// uvarint length and the bytes, identifiers as their 20 bytes, instants as
// Unix nanoseconds (0 for the zero time), floating-point numbers as the 8
// little-endian bytes of their IEEE 754 bits, and lists as a uvarint count
// followed by the items.
const wireBinary = 0x01

// The kinds of envelope body.
const (
	bodyRequest  = 0
	bodyResponse = 1
	bodyError    = 2
)

// The tags of attribute values in a match.
const (
	valNull   = 0
	valFalse  = 1
	valTrue   = 2
	valInt    = 3
	valFloat  = 4
	valString = 5
)

// appendEnvelope appends the binary form of env to b.
func appendEnvelope(b []byte, env *envelope) ([]byte, error) {
	b = append(b, wireBinary)
	b = binary.AppendUvarint(b, env.ID)
	switch {
	case env.Req != nil && env.Resp != nil:
		return nil, errors.New("both a request and an answer")
	case env.Req != nil:
		b = append(b, bodyRequest)
		return appendRequest(b, env.Req), nil
	case env.Resp != nil:
		b = append(b, bodyResponse)
		return appendResponse(b, env.Resp)
	default:
		b = append(b, bodyError)
		return appendString(b, env.Err), nil
	}
}

func appendRequest(b []byte, r *Request) []byte {
	b = append(b, byte(r.Kind))
	b = appendQuery(b, &r.Query)
	b = append(b, byte(r.Dir))
	b = appendInterval(b, r.Region)
	b = appendTime(b, r.Deadline)
	b = binary.AppendVarint(b, int64(r.Depth))
	b = appendString(b, r.From)
	b = binary.AppendVarint(b, int64(r.Round))
	b = binary.AppendVarint(b, int64(r.MaxDepth))
	return appendBool(b, r.Ack)
}

func appendQuery(b []byte, q *api.Query) []byte {
	b = appendString(b, q.ID)
	b = appendString(b, q.Requirements)
	b = appendString(b, q.Rank)
	b = binary.AppendVarint(b, int64(q.K))
	b = append(b, byte(q.Mode))
	b = binary.AppendUvarint(b, uint64(len(q.Attrs)))
	for _, a := range q.Attrs {
		b = appendString(b, a)
	}
	b = appendTime(b, q.Deadline)
	return appendBool(b, q.Redundant)
}

func appendResponse(b []byte, r *Response) ([]byte, error) {
	b = appendString(b, r.QueryID)
	b = binary.AppendUvarint(b, uint64(len(r.Matches)))
	for i := range r.Matches {
		m := &r.Matches[i]
		b = appendString(b, m.Name)
		b = appendString(b, m.Addr)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Rank))
		b = binary.AppendUvarint(b, uint64(len(m.Attrs)))
		for k, v := range m.Attrs {
			b = appendString(b, k)
			var err error
			if b, err = appendValue(b, v); err != nil {
				return nil, fmt.Errorf("match %s: attribute %s: %w", m.Name, k, err)
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(len(r.Coverage)))
	for _, iv := range r.Coverage {
		b = appendInterval(b, iv)
	}
	b = binary.AppendVarint(b, int64(r.Visited))
	b = binary.AppendVarint(b, int64(r.Messages))
	return binary.AppendVarint(b, int64(r.Depth)), nil
}

// appendValue appends an attribute value: a boolean, a number or a string,
// as in JSON.
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, valNull), nil
	case bool:
		if v {
			return append(b, valTrue), nil
		}
		return append(b, valFalse), nil
	case int:
		return binary.AppendVarint(append(b, valInt), int64(v)), nil
	case int32:
		return binary.AppendVarint(append(b, valInt), int64(v)), nil
	case int64:
		return binary.AppendVarint(append(b, valInt), v), nil
	case float32:
		return binary.LittleEndian.AppendUint64(append(b, valFloat), math.Float64bits(float64(v))), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, valFloat), math.Float64bits(v)), nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return binary.AppendVarint(append(b, valInt), i), nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", v, err)
		}
		return binary.LittleEndian.AppendUint64(append(b, valFloat), math.Float64bits(f)), nil
	case string:
		return appendString(append(b, valString), v), nil
	}
	return nil, fmt.Errorf("value of type %T: want a boolean, a number or a string", v)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendInterval(b []byte, iv ring.Interval) []byte {
	b = append(b, iv.Begin[:]...)
	return append(b, iv.End[:]...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	return binary.AppendVarint(b, t.UnixNano())
}

// wireReader decodes the binary format, remembering the first error and
// where it happened.
type wireReader struct {
	b   []byte
	off int
	err error
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("byte %d: %s", r.off, fmt.Sprintf(format, args...))
	}
	r.off = len(r.b)
}

func (r *wireReader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("%s: body ends early", what)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *wireReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("%s: bad or cut-short integer", what)
		return 0
	}
	r.off += n
	return v
}

func (r *wireReader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail("%s: bad or cut-short integer", what)
		return 0
	}
	r.off += n
	return v
}

// int reads a signed integer that must fit an int and be at least lo.
func (r *wireReader) int(what string, lo int64) int {
	off := r.off
	v := r.varint(what)
	if r.err == nil && (v < lo || v > math.MaxInt32) {
		r.off = off
		r.fail("%s: %d out of range", what, v)
		return 0
	}
	return int(v)
}

// count reads a list length, which cannot exceed the bytes left divided by
// the smallest encoding of an item.
func (r *wireReader) count(what string, minItem int) int {
	off := r.off
	n := r.uvarint(what)
	if r.err == nil && n > uint64((len(r.b)-r.off)/minItem) {
		r.off = off
		r.fail("%s: %d items cannot fit in the %d bytes left", what, n, len(r.b)-r.off)
		return 0
	}
	return int(n)
}

func (r *wireReader) bytes(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b)-r.off {
		r.fail("%s: %d bytes wanted, %d left", what, n, len(r.b)-r.off)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *wireReader) string(what string) string {
	off := r.off
	s := r.bytes(what, r.count(what, 1))
	if r.err == nil && !utf8.Valid(s) {
		r.off = off
		r.fail("%s: not UTF-8", what)
		return ""
	}
	return string(s)
}

func (r *wireReader) bool(what string) bool {
	off := r.off
	switch r.byte(what) {
	case 0:
		return false
	case 1:
		return true
	}
	r.off = off
	r.fail("%s: not a boolean", what)
	return false
}

func (r *wireReader) float(what string) float64 {
	b := r.bytes(what, 8)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

func (r *wireReader) id(what string) ring.ID {
	var id ring.ID
	copy(id[:], r.bytes(what, len(id)))
	return id
}

func (r *wireReader) interval(what string) ring.Interval {
	return ring.Interval{Begin: r.id(what), End: r.id(what)}
}

func (r *wireReader) time(what string) time.Time {
	ns := r.varint(what)
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func (r *wireReader) value(what string) any {
	off := r.off
	switch r.byte(what) {
	case valNull:
		return nil
	case valFalse:
		return false
	case valTrue:
		return true
	case valInt:
		return r.varint(what)
	case valFloat:
		return r.float(what)
	case valString:
		return r.string(what)
	}
	if r.err == nil {
		r.off = off
		r.fail("%s: unknown value tag", what)
	}
	return nil
}

func (r *wireReader) request() *Request {
	req := &Request{}
	req.Kind = Kind(r.byte("request kind"))
	if req.Kind > KindAck && r.err == nil {
		r.off--
		r.fail("request kind %d: unknown", req.Kind)
	}
	r.query(&req.Query)
	req.Dir = Direction(r.byte("direction"))
	if req.Dir > CounterClockwise && r.err == nil {
		r.off--
		r.fail("direction %d: unknown", req.Dir)
	}
	req.Region = r.interval("region")
	req.Deadline = r.time("deadline")
	req.Depth = r.int("depth", 0)
	req.From = r.string("sender")
	req.Round = r.int("round", 0)
	req.MaxDepth = r.int("maximum depth", 0)
	req.Ack = r.bool("ack")
	return req
}

func (r *wireReader) query(q *api.Query) {
	q.ID = r.string("query id")
	q.Requirements = r.string("requirements")
	q.Rank = r.string("rank")
	q.K = r.int("k", math.MinInt32)
	q.Mode = api.Mode(r.byte("mode"))
	if q.Mode > api.FirstFit && r.err == nil {
		r.off--
		r.fail("mode %d: unknown", q.Mode)
	}
	if n := r.count("attributes", 1); n > 0 {
		q.Attrs = make([]string, n)
		for i := range q.Attrs {
			q.Attrs[i] = r.string("attribute name")
		}
	}
	q.Deadline = r.time("query deadline")
	q.Redundant = r.bool("redundant")
}

func (r *wireReader) response() *Response {
	resp := &Response{}
	resp.QueryID = r.string("query id")
	if n := r.count("matches", 11); n > 0 {
		resp.Matches = make([]api.Match, n)
		for i := range resp.Matches {
			m := &resp.Matches[i]
			m.Name = r.string("match name")
			m.Addr = r.string("match address")
			m.Rank = r.float("match rank")
			if n := r.count("match attributes", 2); n > 0 {
				m.Attrs = make(map[string]any, n)
				for range n {
					k := r.string("attribute name")
					m.Attrs[k] = r.value("attribute " + k)
				}
			}
		}
	}
	if n := r.count("coverage", 2*len(ring.ID{})); n > 0 {
		resp.Coverage = make([]ring.Interval, n)
		for i := range resp.Coverage {
			resp.Coverage[i] = r.interval("coverage")
		}
	}
	resp.Visited = r.int("visited", 0)
	resp.Messages = r.int("messages", 0)
	resp.Depth = r.int("depth", 0)
	return resp
}

// decodeBinary parses a binary frame body.
func decodeBinary(b []byte) (*envelope, error) {
	r := &wireReader{b: b, off: 1}
	env := &envelope{ID: r.uvarint("message id")}
	switch kind := r.byte("body kind"); {
	case r.err != nil:
	case kind == bodyRequest:
		env.Req = r.request()
	case kind == bodyResponse:
		env.Resp = r.response()
	case kind == bodyError:
		env.Err = r.string("error")
	default:
		r.off--
		r.fail("body kind %d: unknown", kind)
	}
	if r.err == nil && r.off != len(b) {
		r.fail("%d bytes after the end of the message", len(b)-r.off)
	}
	if r.err != nil {
		return nil, fmt.Errorf("frame body: %w", r.err)
	}
	return env, nil
}
