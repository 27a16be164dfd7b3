// Package jsonscan reads JSON a token at a time, without reflection, for
// decoders that know the shape of what they read and fall back to
// encoding/json on anything else. Every method returns false on input it
// does not accept; a caller then hands the whole document to
// encoding/json, which decodes or reports it.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds the nesting Skip accepts, as encoding/json does.
const maxDepth = 10000

// Scanner reads one JSON text from a byte slice.
type Scanner struct {
	data []byte
	pos  int
}

// New returns a Scanner at the start of data.
func New(data []byte) *Scanner { return &Scanner{data: data} }

// Done reports whether only white space is left.
func (s *Scanner) Done() bool {
	s.space()
	return s.pos == len(s.data)
}

func (s *Scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// Next skips white space and returns the next byte, 0 at the end.
func (s *Scanner) Next() byte {
	s.space()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// Literal consumes lit (true, false, null) when it comes next.
func (s *Scanner) Literal(lit string) bool {
	s.space()
	if len(s.data)-s.pos >= len(lit) && string(s.data[s.pos:s.pos+len(lit)]) == lit {
		s.pos += len(lit)
		return true
	}
	return false
}

// Object reads an object, calling member for each member after reading
// its name and colon; member reads the value.
func (s *Scanner) Object(member func(key []byte) bool) bool {
	if s.Next() != '{' {
		return false
	}
	s.pos++
	if s.Next() == '}' {
		s.pos++
		return true
	}
	for {
		key, ok := s.Key()
		if !ok || s.Next() != ':' {
			return false
		}
		s.pos++
		if !member(key) {
			return false
		}
		switch s.Next() {
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

// Array reads an array, calling elem to read each element.
func (s *Scanner) Array(elem func() bool) bool {
	if s.Next() != '[' {
		return false
	}
	s.pos++
	if s.Next() == ']' {
		s.pos++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.Next() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// Key reads a member name: the bytes between the quotes when it has no
// escapes and is well-formed UTF-8, else what encoding/json makes of it.
// The bytes may alias the input.
func (s *Scanner) Key() ([]byte, bool) {
	if s.Next() != '"' {
		return nil, false
	}
	start := s.pos
	if !s.skipStr() {
		return nil, false
	}
	body := s.data[start+1 : s.pos-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return body, true
	}
	var out string
	if err := json.Unmarshal(s.data[start:s.pos], &out); err != nil {
		return nil, false
	}
	return []byte(out), true
}

// Str reads a string; one with escapes or malformed UTF-8 goes through
// encoding/json, so the result is what json.Unmarshal gives.
func (s *Scanner) Str() (string, bool) {
	if s.Next() != '"' {
		return "", false
	}
	start := s.pos
	plain := true
	for i := start + 1; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '\\':
			plain = false
			i++
		case c == '"':
			s.pos = i + 1
			body := s.data[start+1 : i]
			if plain && utf8.Valid(body) {
				return string(body), true
			}
			var out string
			err := json.Unmarshal(s.data[start:s.pos], &out)
			return out, err == nil
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// Number reads a number with JSON's syntax and returns its text, which
// aliases the input.
func (s *Scanner) Number() ([]byte, bool) {
	s.space()
	d, i := s.data, s.pos
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
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	text := d[s.pos:i]
	s.pos = i
	return text, true
}

// Int reads a number that is a decimal integer of the platform's size.
func (s *Scanner) Int() (int, bool) {
	text, ok := s.Number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(text), 10, 0)
	return int(n), err == nil
}

// Uint reads a number that is a non-negative decimal integer.
func (s *Scanner) Uint() (uint64, bool) {
	text, ok := s.Number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(string(text), 10, 64)
	return n, err == nil
}

// Bool reads true or false.
func (s *Scanner) Bool() (v, ok bool) {
	switch {
	case s.Literal("true"):
		return true, true
	case s.Literal("false"):
		return false, true
	}
	return false, false
}

// Raw reads any value, checking its syntax, and returns a copy of its
// bytes, as json.RawMessage keeps them.
func (s *Scanner) Raw() (json.RawMessage, bool) {
	s.space()
	start := s.pos
	if !s.skip(0) {
		return nil, false
	}
	return append(json.RawMessage{}, s.data[start:s.pos]...), true
}

// Strings reads an array of strings; an empty array gives an empty,
// non-nil slice, as encoding/json does.
func (s *Scanner) Strings() ([]string, bool) {
	out := []string{}
	ok := s.Array(func() bool {
		str, ok := s.Str()
		out = append(out, str)
		return ok
	})
	return out, ok
}

// skip reads any value, checking its syntax.
func (s *Scanner) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch s.Next() {
	case '{':
		return s.Object(func([]byte) bool { return s.skip(depth + 1) })
	case '[':
		return s.Array(func() bool { return s.skip(depth + 1) })
	case '"':
		return s.skipStr()
	case 't':
		return s.Literal("true")
	case 'f':
		return s.Literal("false")
	case 'n':
		return s.Literal("null")
	}
	_, ok := s.Number()
	return ok
}

// skipStr reads a string, checking its syntax as encoding/json does.
func (s *Scanner) skipStr() bool {
	d := s.data
	for i := s.pos + 1; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			i++
			if i >= len(d) {
				return false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(d) {
					return false
				}
				for _, h := range d[i+1 : i+5] {
					if !isHex(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(h byte) bool {
	return '0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F'
}
