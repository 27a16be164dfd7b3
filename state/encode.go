package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// validIdentifier reports whether s is an HCL identifier, with a fast path
// for the ASCII names found in practice.
func validIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		case c >= 0x80:
			return hclsyntax.ValidIdentifier(s)
		default:
			return false
		}
	}
	return true
}

// docWriter writes the canonical JSON document. It produces the same bytes
// as encoding/json's indented encoder without HTML escaping would, without
// reflection and without re-indenting the whole document.
type docWriter struct {
	b   bytes.Buffer
	err error
}

func (w *docWriter) nl(depth int) {
	w.b.WriteByte('\n')
	for range depth {
		w.b.WriteString("  ")
	}
}

// key writes a member name; first says whether it is the first member.
func (w *docWriter) key(depth int, first bool, name string) {
	if !first {
		w.b.WriteByte(',')
	}
	w.nl(depth)
	w.str(name)
	w.b.WriteString(": ")
}

func (w *docWriter) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			w.slowStr(s)
			return
		}
	}
	w.b.WriteByte('"')
	w.b.WriteString(s)
	w.b.WriteByte('"')
}

func (w *docWriter) slowStr(s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil && w.err == nil {
		w.err = err
	}
	w.b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte{'\n'}))
}

// raw writes a JSON value indented at depth; nil is written as null.
func (w *docWriter) raw(depth int, what string, r json.RawMessage) {
	if len(bytes.TrimSpace(r)) == 0 {
		w.b.WriteString("null")
		return
	}
	prefix := make([]byte, 2*depth)
	for i := range prefix {
		prefix[i] = ' '
	}
	n := w.b.Len()
	if err := json.Indent(&w.b, bytes.TrimRight(r, " \t\r\n"), string(prefix), "  "); err != nil {
		w.b.Truncate(n)
		if w.err == nil {
			w.err = fmt.Errorf("%s: invalid JSON: %w", what, err)
		}
	}
}

func (w *docWriter) strings(depth int, ss []string) {
	w.b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			w.b.WriteByte(',')
		}
		w.nl(depth + 1)
		w.str(s)
	}
	w.nl(depth)
	w.b.WriteByte(']')
}

// stringMap writes an object of strings, its members sorted by name.
func (w *docWriter) stringMap(depth int, m map[string]string) {
	w.b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		w.key(depth+1, i == 0, k)
		w.str(m[k])
	}
	w.nl(depth)
	w.b.WriteByte('}')
}

// encodeCanonical writes c, which canonical has sorted and validated.
func encodeCanonical(c *State) ([]byte, error) {
	w := &docWriter{}
	w.b.Grow(1024 + 700*len(c.Resources))
	w.b.WriteByte('{')
	w.key(1, true, "format_version")
	w.b.WriteString(strconv.Itoa(c.FormatVersion))
	if c.PondVersion != "" {
		w.key(1, false, "pond_version")
		w.str(c.PondVersion)
	}
	w.key(1, false, "serial")
	w.b.WriteString(strconv.FormatUint(c.Serial, 10))
	w.key(1, false, "lineage")
	w.str(c.Lineage)

	w.key(1, false, "outputs")
	names := make([]string, 0, len(c.Outputs))
	for k := range c.Outputs {
		names = append(names, k)
	}
	slices.Sort(names)
	if len(names) == 0 {
		w.b.WriteString("{}")
	} else {
		w.b.WriteByte('{')
		for i, name := range names {
			o := c.Outputs[name]
			w.key(2, i == 0, name)
			w.b.WriteByte('{')
			w.key(3, true, "value")
			w.raw(3, "output "+name+" value", o.Value)
			w.key(3, false, "type")
			w.raw(3, "output "+name+" type", o.Type)
			if o.Sensitive {
				w.key(3, false, "sensitive")
				w.b.WriteString("true")
			}
			if o.Hash != "" {
				w.key(3, false, "hash")
				w.str(o.Hash)
			}
			w.nl(2)
			w.b.WriteByte('}')
		}
		w.nl(1)
		w.b.WriteByte('}')
	}

	w.key(1, false, "resources")
	if len(c.Resources) == 0 {
		w.b.WriteString("[]")
	} else {
		w.b.WriteByte('[')
		for i, r := range c.Resources {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.nl(2)
			w.b.WriteByte('{')
			w.key(3, true, "mode")
			w.str(r.Mode)
			w.key(3, false, "type")
			w.str(r.Type)
			w.key(3, false, "name")
			w.str(r.Name)
			w.key(3, false, "provider")
			w.str(r.Provider)
			w.key(3, false, "instances")
			if len(r.Instances) == 0 {
				w.b.WriteString("[]")
			} else {
				w.b.WriteByte('[')
				for j, inst := range r.Instances {
					if j > 0 {
						w.b.WriteByte(',')
					}
					w.nl(4)
					w.instance(r, inst)
				}
				w.nl(3)
				w.b.WriteByte(']')
			}
			w.nl(2)
			w.b.WriteByte('}')
		}
		w.nl(1)
		w.b.WriteByte(']')
	}
	if len(c.CheckResults) > 0 {
		w.key(1, false, "check_results")
		w.checkResults(c.CheckResults)
	}
	if len(c.History) > 0 {
		w.key(1, false, "history")
		w.history(c.History)
	}
	w.nl(0)
	w.b.WriteString("}\n")
	if w.err != nil {
		return nil, w.err
	}
	return w.b.Bytes(), nil
}

func (w *docWriter) instance(r *Resource, inst *Instance) {
	w.b.WriteByte('{')
	first := true
	switch k := inst.IndexKey.(type) {
	case int:
		w.key(5, true, "index_key")
		w.b.WriteString(strconv.Itoa(k))
		first = false
	case string:
		w.key(5, true, "index_key")
		w.str(k)
		first = false
	}
	w.key(5, first, "schema_version")
	w.b.WriteString(strconv.Itoa(inst.SchemaVersion))
	w.key(5, false, "attributes")
	if w.err == nil {
		w.raw(5, r.InstanceAddr(inst.IndexKey).String()+" attributes", inst.Attributes)
	}
	if len(inst.SensitiveAttributes) > 0 {
		w.key(5, false, "sensitive_attributes")
		w.strings(5, inst.SensitiveAttributes)
	}
	if len(inst.SensitiveValues) > 0 {
		w.key(5, false, "sensitive_values")
		w.stringMap(5, inst.SensitiveValues)
	}
	if len(inst.Dependencies) > 0 {
		w.key(5, false, "dependencies")
		w.strings(5, inst.Dependencies)
	}
	if inst.Status != "" {
		w.key(5, false, "status")
		w.str(inst.Status)
	}
	if inst.CreateBeforeDestroy {
		w.key(5, false, "create_before_destroy")
		w.b.WriteString("true")
	}
	w.nl(4)
	w.b.WriteByte('}')
}

// history writes the history records as encoding/json indents them: they
// are small next to the resources, and hold no raw JSON to re-indent.
func (w *docWriter) history(h []*HistoryRecord) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", "  ")
	if err := enc.Encode(h); err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("history: %w", err)
		}
		return
	}
	w.b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte{'\n'}))
}
