package state

import (
	"strconv"

	"github.com/pond-htc/pond/state/jsonscan"
)

// scanDocument fills w from data as json.Unmarshal does, several times
// faster, for documents shaped as pond writes them: the known members once
// each, spelled as written, no null where a value is expected. It returns
// false on anything else, from malformed JSON to a member it does not know,
// and json.Unmarshal then decodes, or reports, the document.
func scanDocument(data []byte, w *wireState) bool {
	s := docScanner{jsonscan.New(data)}
	var seen fields
	ok := s.Object(func(key []byte) bool {
		switch seen.first(key, stateFields) {
		case 0:
			n, ok := s.Int()
			w.FormatVersion = &n
			return ok
		case 1:
			var ok bool
			w.PondVersion, ok = s.Str()
			return ok
		case 2:
			n, ok := s.Uint()
			w.Serial = &n
			return ok
		case 3:
			str, ok := s.Str()
			w.Lineage = &str
			return ok
		case 4:
			w.Outputs = map[string]*wireOutput{}
			return s.Object(func(name []byte) bool {
				if _, dup := w.Outputs[string(name)]; dup {
					return false
				}
				o := &wireOutput{}
				w.Outputs[string(name)] = o
				return s.output(o)
			})
		case 5:
			w.Resources = []*wireResource{}
			return s.Array(func() bool {
				r := &wireResource{}
				w.Resources = append(w.Resources, r)
				return s.resource(r)
			})
		case 6:
			var ok bool
			w.History, ok = s.Raw()
			return ok
		case 7:
			var ok bool
			w.CheckResults, ok = s.Raw()
			return ok
		}
		return false
	})
	return ok && s.Done()
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
	stateFields    = []string{"format_version", "pond_version", "serial", "lineage", "outputs", "resources", "history", "check_results"}
	outputFields   = []string{"value", "type", "sensitive", "hash"}
	resourceFields = []string{"mode", "type", "name", "provider", "instances"}
	instanceFields = []string{"index_key", "schema_version", "attributes", "sensitive_attributes", "sensitive_values", "dependencies", "status", "create_before_destroy"}
)

// docScanner reads pond's state document with a jsonscan.Scanner.
type docScanner struct {
	*jsonscan.Scanner
}

func (s *docScanner) output(o *wireOutput) bool {
	var seen fields
	return s.Object(func(key []byte) bool {
		var ok bool
		switch seen.first(key, outputFields) {
		case 0:
			o.Value, ok = s.Raw()
		case 1:
			o.Type, ok = s.Raw()
		case 2:
			o.Sensitive, ok = s.Bool()
		case 3:
			o.Hash, ok = s.Str()
		}
		return ok
	})
}

func (s *docScanner) resource(r *wireResource) bool {
	var seen fields
	return s.Object(func(key []byte) bool {
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
			return s.Array(func() bool {
				wi := &wireInstance{}
				*r.Instances = append(*r.Instances, wi)
				return s.instance(wi)
			})
		default:
			return false
		}
		str, ok := s.Str()
		*field = &str
		return ok
	})
}

func (s *docScanner) instance(wi *wireInstance) bool {
	var seen fields
	return s.Object(func(key []byte) bool {
		var ok bool
		switch seen.first(key, instanceFields) {
		case 0:
			wi.IndexKey, ok = s.indexKey()
		case 1:
			wi.SchemaVersion, ok = s.Int()
		case 2:
			wi.Attributes, ok = s.Raw()
		case 3:
			wi.SensitiveAttributes, ok = s.Strings()
		case 4:
			m := map[string]string{}
			ok = s.Object(func(k []byte) bool {
				v, ok := s.Str()
				m[string(k)] = v
				return ok
			})
			wi.SensitiveValues = m
		case 5:
			wi.Dependencies, ok = s.Strings()
		case 6:
			wi.Status, ok = s.Str()
		case 7:
			wi.CreateBeforeDestroy, ok = s.Bool()
		}
		return ok
	})
}

// indexKey reads an index key as encoding/json reads it into an any: a
// string, a float64 or nil.
func (s *docScanner) indexKey() (any, bool) {
	switch s.Next() {
	case '"':
		return s.Str()
	case 'n':
		return nil, s.Literal("null")
	}
	text, ok := s.Number()
	if !ok {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(text), 64)
	return f, err == nil
}
