package state

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// scanDocument fills w from data as json.Unmarshal does, several times
// faster, for documents shaped as pond writes them: the known members once
// each, spelled as written, no null where a value is expected. It returns
// false on anything else, from malformed JSON to a member it does not know,
// and json.Unmarshal then decodes, or reports, the document.
func scanDocument(data []byte, w *wireState) bool {
	s := docScanner{data: data}
	var seen fields
	ok := s.object(func(key []byte) bool {
		switch seen.first(key, stateFields) {
		case 0:
			n, ok := s.int()
			w.FormatVersion = &n
			return ok
		case 1:
			var ok bool
			w.PondVersion, ok = s.str()
			return ok
		case 2:
			n, ok := s.uint()
			w.Serial = &n
			return ok
		case 3:
			str, ok := s.str()
			w.Lineage = &str
			return ok
		case 4:
			w.Outputs = map[string]*wireOutput{}
			return s.object(func(name []byte) bool {
				if _, dup := w.Outputs[string(name)]; dup {
					return false
				}
				o := &wireOutput{}
				w.Outputs[string(name)] = o
				return s.output(o)
			})
		case 5:
			w.Resources = []*wireResource{}
			return s.array(func() bool {
				r := &wireResource{}
				w.Resources = append(w.Resources, r)
				return s.resource(r)
			})
		}
		return false
	})
	if !ok {
		return false
	}
	s.space()
	return s.pos == len(s.data)
}

// fields records the members of a struct met so far, by their index in
// names: json.Unmarshal merges a member met twice into what it decoded
// first, which scanDocument leaves to it.
type fields uint32

// first returns the index of key in names when key is there and met for
// the first time, and -1 otherwise.
func (f *fields) first(key []byte, names []string) int {
	for i, n := range names {
		if n == string(key) {
			if *f&(1<<i) != 0 {
				return -1
			}
			*f |= 1 << i
			return i
		}
	}
	return -1
}

var (
	stateFields    = []string{"format_version", "pond_version", "serial", "lineage", "outputs", "resources"}
	outputFields   = []string{"value", "type", "sensitive", "hash"}
	resourceFields = []string{"mode", "type", "name", "provider", "instances"}
	instanceFields = []string{"index_key", "schema_version", "attributes", "sensitive_attributes", "sensitive_values", "dependencies", "status", "create_before_destroy"}
)

type docScanner struct {
	data []byte
	pos  int
}

func (s *docScanner) space() {
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
func (s *docScanner) next() byte {
	s.space()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// object reads an object, calling member for each member after reading
// its name and colon.
func (s *docScanner) object(member func(key []byte) bool) bool {
	if s.next() != '{' {
		return false
	}
	s.pos++
	if s.next() == '}' {
		s.pos++
		return true
	}
	for {
		key, ok := s.key()
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

// array reads an array, calling elem to read each element.
func (s *docScanner) array(elem func() bool) bool {
	if s.next() != '[' {
		return false
	}
	s.pos++
	if s.next() == ']' {
		s.pos++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.next() {
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

// key reads a member name: the bytes between the quotes when it has no
// escapes and is well-formed UTF-8, else what encoding/json makes of it.
func (s *docScanner) key() ([]byte, bool) {
	if s.next() != '"' {
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

// str reads a string; one with escapes or malformed UTF-8 goes through
// encoding/json.
func (s *docScanner) str() (string, bool) {
	if s.next() != '"' {
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

// number reads a number with JSON's syntax and returns its text.
func (s *docScanner) number() ([]byte, bool) {
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

func (s *docScanner) int() (int, bool) {
	text, ok := s.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(text), 10, 0)
	return int(n), err == nil
}

func (s *docScanner) uint() (uint64, bool) {
	text, ok := s.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(string(text), 10, 64)
	return n, err == nil
}

func (s *docScanner) bool() (bool, bool) {
	switch {
	case s.literal("true"):
		return true, true
	case s.literal("false"):
		return false, true
	}
	return false, false
}

// literal consumes lit when it comes next.
func (s *docScanner) literal(lit string) bool {
	s.space()
	if len(s.data)-s.pos >= len(lit) && string(s.data[s.pos:s.pos+len(lit)]) == lit {
		s.pos += len(lit)
		return true
	}
	return false
}

// raw reads any value, checking its syntax, and returns a copy of its
// bytes, as json.RawMessage keeps them.
func (s *docScanner) raw() (json.RawMessage, bool) {
	s.space()
	start := s.pos
	if !s.skip(0) {
		return nil, false
	}
	return append(json.RawMessage{}, s.data[start:s.pos]...), true
}

// skip reads any value, checking its syntax; depth bounds the nesting as
// encoding/json does.
func (s *docScanner) skip(depth int) bool {
	if depth > 10000 {
		return false
	}
	switch s.next() {
	case '{':
		return s.object(func([]byte) bool { return s.skip(depth + 1) })
	case '[':
		return s.array(func() bool { return s.skip(depth + 1) })
	case '"':
		return s.skipStr()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	_, ok := s.number()
	return ok
}

// skipStr reads a string, checking its syntax as encoding/json does.
func (s *docScanner) skipStr() bool {
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
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
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

func (s *docScanner) strings() ([]string, bool) {
	out := []string{}
	ok := s.array(func() bool {
		str, ok := s.str()
		out = append(out, str)
		return ok
	})
	return out, ok
}

func (s *docScanner) output(o *wireOutput) bool {
	var seen fields
	return s.object(func(key []byte) bool {
		var ok bool
		switch seen.first(key, outputFields) {
		case 0:
			o.Value, ok = s.raw()
		case 1:
			o.Type, ok = s.raw()
		case 2:
			o.Sensitive, ok = s.bool()
		case 3:
			o.Hash, ok = s.str()
		}
		return ok
	})
}

func (s *docScanner) resource(r *wireResource) bool {
	var seen fields
	return s.object(func(key []byte) bool {
		var field **string
		switch seen.first(key, resourceFields) {
		case 0:
			field = &r.Mode
		case 1:
			field = &r.Type
		case 2:
			field = &r.Name
		case 3:
			field = &r.Provider
		case 4:
			insts := []*wireInstance{}
			r.Instances = &insts
			return s.array(func() bool {
				wi := &wireInstance{}
				*r.Instances = append(*r.Instances, wi)
				return s.instance(wi)
			})
		default:
			return false
		}
		str, ok := s.str()
		*field = &str
		return ok
	})
}

func (s *docScanner) instance(wi *wireInstance) bool {
	var seen fields
	return s.object(func(key []byte) bool {
		var ok bool
		switch seen.first(key, instanceFields) {
		case 0:
			wi.IndexKey, ok = s.indexKey()
		case 1:
			wi.SchemaVersion, ok = s.int()
		case 2:
			wi.Attributes, ok = s.raw()
		case 3:
			wi.SensitiveAttributes, ok = s.strings()
		case 4:
			m := map[string]string{}
			ok = s.object(func(k []byte) bool {
				v, ok := s.str()
				m[string(k)] = v
				return ok
			})
			wi.SensitiveValues = m
		case 5:
			wi.Dependencies, ok = s.strings()
		case 6:
			wi.Status, ok = s.str()
		case 7:
			wi.CreateBeforeDestroy, ok = s.bool()
		}
		return ok
	})
}

// indexKey reads an index key as encoding/json reads it into an any: a
// string, a float64 or nil.
func (s *docScanner) indexKey() (any, bool) {
	switch s.next() {
	case '"':
		return s.str()
	case 'n':
		return nil, s.literal("null")
	}
	text, ok := s.number()
	if !ok {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(text), 64)
	return f, err == nil
}
