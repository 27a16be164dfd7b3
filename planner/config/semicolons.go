package config

import (
	"reflect"
	"sort"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// parseNative parses native-syntax configuration source. Besides plain
// HCL it accepts, as the product's configuration sketch writes them,
// semicolons between the arguments of a block written on one line:
//
//	variable "workers" { type = number; default = 4 }
//
// Such a file is parsed as if each semicolon-separated item were on a line
// of its own, and every source position is then mapped back to the file as
// written, so diagnostics point at the right line and column. The second
// result is the rewritten source (nil when the file needed no rewriting),
// which Format uses to lay the file out in canonical style.
func parseNative(src []byte, filename string) (*hcl.File, []byte, hcl.Diagnostics) {
	if diags := checkNesting(src, filename, false); diags.HasErrors() {
		return &hcl.File{Body: hcl.EmptyBody(), Bytes: src}, nil, diags
	}
	if file := parseChunks(src, filename, chunkBytes); file != nil {
		return file, nil, nil
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if !utf8.Valid(src) {
		// After a malformed UTF-8 sequence, hcl may count a newline as
		// part of the sequence's character and so lose a line: the lines
		// and columns of everything after it are off, while the byte
		// offsets are right. Lines and columns are made again from them.
		m := newPosMapper(src, nil)
		m.fix(reflect.ValueOf(file.Body))
		m.fix(reflect.ValueOf(diags))
	}
	if !diags.HasErrors() {
		return file, nil, diags
	}
	rewritten, inserted := splitSemicolons(src, filename)
	if rewritten == nil {
		return file, nil, diags
	}
	file2, diags2 := hclsyntax.ParseConfig(rewritten, filename, hcl.InitialPos)
	if diags2.HasErrors() {
		return file, nil, diags
	}
	m := newPosMapper(src, inserted)
	m.fix(reflect.ValueOf(file2.Body))
	file2.Bytes = src
	return file2, rewritten, diags2
}

// splitSemicolons rewrites each line holding semicolon separators: every
// semicolon becomes a newline, and newlines are inserted after the opening
// and before the closing brace of blocks on that line. It returns nil when
// there is no semicolon token, and the sorted byte offsets (in src) before
// which a newline was inserted.
func splitSemicolons(src []byte, filename string) ([]byte, []int) {
	tokens, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	semiLines := map[int]bool{}
	for _, t := range tokens {
		if t.Type == hclsyntax.TokenSemicolon {
			semiLines[t.Range.Start.Line] = true
		}
	}
	if len(semiLines) == 0 {
		return nil, nil
	}
	replace := map[int]bool{} // offsets of semicolons, replaced by newlines
	var inserts []int         // offsets before which a newline is inserted
	var stack []bool          // open braces on the line: true for a block's
	line := 0
	for i, t := range tokens {
		if t.Range.Start.Line != line {
			line, stack = t.Range.Start.Line, stack[:0]
		}
		if !semiLines[line] {
			continue
		}
		switch t.Type {
		case hclsyntax.TokenSemicolon:
			replace[t.Range.Start.Byte] = true
		case hclsyntax.TokenOBrace, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			block := t.Type == hclsyntax.TokenOBrace && i > 0 &&
				(tokens[i-1].Type == hclsyntax.TokenIdent || tokens[i-1].Type == hclsyntax.TokenCQuote) &&
				tokens[i-1].Range.Start.Line == line
			stack = append(stack, block)
			if block {
				inserts = append(inserts, t.Range.End.Byte)
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenTemplateSeqEnd:
			if n := len(stack); n > 0 {
				if stack[n-1] {
					inserts = append(inserts, t.Range.Start.Byte)
				}
				stack = stack[:n-1]
			}
		}
	}
	sort.Ints(inserts)
	out := make([]byte, 0, len(src)+len(inserts))
	k := 0
	for i, c := range src {
		for k < len(inserts) && inserts[k] == i {
			out = append(out, '\n')
			k++
		}
		if replace[i] {
			c = '\n'
		}
		out = append(out, c)
	}
	for ; k < len(inserts); k++ {
		out = append(out, '\n')
	}
	return out, inserts
}

// posMapper maps positions in rewritten source back to the original.
type posMapper struct {
	src       []byte
	inserted  []int // sorted offsets in src before which a byte was inserted
	lineStart []int // byte offsets in src at which each line starts
	// col[o] is the column of byte offset o of src: one more than the
	// number of characters between the start of its line and o, counted
	// as utf8.RuneCount does. Made once, so that mapping the many
	// positions of a long line costs no more than the line itself.
	col  []int32
	seen map[seenKey]bool
}

type seenKey struct {
	ptr uintptr
	typ reflect.Type
}

func newPosMapper(src []byte, inserted []int) *posMapper {
	m := &posMapper{
		src:       src,
		inserted:  inserted,
		lineStart: []int{0},
		col:       make([]int32, len(src)+1),
		seen:      map[seenKey]bool{},
	}
	var col int32 = 1
	for i := 0; i < len(src); {
		if src[i] == '\n' {
			m.col[i] = col
			i++
			m.lineStart = append(m.lineStart, i)
			col = 1
			continue
		}
		// An offset inside a character counts each byte of it before
		// the offset as a character of its own, as utf8.RuneCount does
		// with a truncated sequence. No character holds a newline.
		_, w := utf8.DecodeRune(src[i:])
		for k := 0; k < w; k++ {
			m.col[i+k] = col + int32(k)
		}
		col++
		i += w
	}
	m.col[len(src)] = col
	return m
}

// pos maps a position in the rewritten source to the original one.
func (m *posMapper) pos(p hcl.Pos) hcl.Pos {
	// An original byte at offset o moved to o + (inserts at or before o).
	// Invert: find the number of inserts k with inserted[k-1]+k-1 < b.
	b := p.Byte
	k := sort.Search(len(m.inserted), func(k int) bool { return m.inserted[k]+k >= b })
	o := min(max(b-k, 0), len(m.src))
	line := sort.Search(len(m.lineStart), func(l int) bool { return m.lineStart[l] > o }) - 1
	return hcl.Pos{Line: line + 1, Column: int(m.col[o]), Byte: o}
}

var (
	posType   = reflect.TypeOf(hcl.Pos{})
	rangeType = reflect.TypeOf(hcl.Range{})
)

// fix rewrites, in place, every hcl.Pos reachable from v through exported
// fields, pointers, interfaces, slices and maps.
func (m *posMapper) fix(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		key := seenKey{v.Pointer(), v.Type()}
		if v.IsNil() || m.seen[key] {
			return
		}
		m.seen[key] = true
		m.fix(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if e.Kind() == reflect.Pointer {
			m.fix(e)
			return
		}
		if !v.CanSet() || !containsPos(e.Type(), 0) {
			return
		}
		c := reflect.New(e.Type()).Elem()
		c.Set(e)
		m.fix(c)
		v.Set(c)
	case reflect.Struct:
		if v.Type() == posType {
			if v.CanSet() {
				v.Set(reflect.ValueOf(m.pos(v.Interface().(hcl.Pos))))
			}
			return
		}
		if v.Type() == rangeType && !v.CanSet() {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				m.fix(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Len() > 0 && v.Type().Elem().Kind() != reflect.Uint8 {
			for i := 0; i < v.Len(); i++ {
				m.fix(v.Index(i))
			}
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			m.fix(v.Index(i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			e := it.Value()
			switch e.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Map:
				m.fix(e)
			case reflect.Interface, reflect.Struct:
				if containsPos(e.Type(), 0) {
					c := reflect.New(e.Type()).Elem()
					c.Set(e)
					m.fix(c)
					v.SetMapIndex(it.Key(), c)
				}
			}
		}
	}
}

// containsPos reports whether values of type t may hold an hcl.Pos.
func containsPos(t reflect.Type, depth int) bool {
	if depth > 8 {
		return true
	}
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Slice, reflect.Map, reflect.Array:
		return true
	case reflect.Struct:
		if t == posType {
			return true
		}
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() && containsPos(t.Field(i).Type, depth+1) {
				return true
			}
		}
	}
	return false
}
