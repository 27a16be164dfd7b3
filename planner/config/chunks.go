package config

import (
	"bytes"
	"runtime"
	"sync"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/pond-htc/pond/planner/internal/hclnest"
)

// chunkBytes is about how much source parseChunks gives the parser at a
// time. The lexer collects a file's tokens in one slice, which it grows as
// it goes: for a large file the growing costs as much as the lexing, and
// the slice, a hundred bytes a token, dominates what loading allocates.
// Chunks of a few kilobytes keep the slices small and short-lived.
const chunkBytes = 1 << 10

// parseChunks parses native-syntax source as hclsyntax.ParseConfig does,
// piece by piece: the source is cut after lines that close a top-level
// block, the pieces are parsed on every core, and their bodies joined. It
// returns nil when the source is small, when it cannot be cut safely, or
// when any piece has diagnostics or the pieces set an argument twice: then
// only a parse of the whole file gives the right diagnostics. (A piece is
// parsed as its place in the file: byte offset and line, at column 1.)
func parseChunks(src []byte, filename string, size int) *hcl.File {
	if len(src) < 2*size || !utf8.Valid(src) {
		return nil
	}
	// The offsets where pieces start, the first at 0.
	starts := []int{0}
	_, ok := hclnest.Scan(src, func(off int) {
		if off-starts[len(starts)-1] >= size && off < len(src) {
			starts = append(starts, off)
		}
	})
	if !ok || len(starts) < 2 {
		return nil
	}
	type piece struct {
		file  *hcl.File
		diags hcl.Diagnostics
	}
	pieces := make([]piece, len(starts))
	lines := make([]int, len(starts))
	lines[0] = 1
	for i := 1; i < len(starts); i++ {
		lines[i] = lines[i-1] + bytes.Count(src[starts[i-1]:starts[i]], []byte{'\n'})
	}
	parse := func(i int) {
		end := len(src)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		f, d := hclsyntax.ParseConfig(src[starts[i]:end], filename, hcl.Pos{Line: lines[i], Column: 1, Byte: starts[i]})
		pieces[i] = piece{f, d}
	}
	workers := min(runtime.GOMAXPROCS(0), len(starts))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker parses a run of consecutive pieces.
			for i := w * len(starts) / workers; i < (w+1)*len(starts)/workers; i++ {
				parse(i)
			}
		}()
	}
	wg.Wait()
	for _, p := range pieces {
		if len(p.diags) > 0 {
			return nil
		}
	}
	// The first piece's body becomes the file's: its navigation refers to
	// it.
	file := pieces[0].file
	body := file.Body.(*hclsyntax.Body)
	for _, p := range pieces[1:] {
		b := p.file.Body.(*hclsyntax.Body)
		for name, a := range b.Attributes {
			if _, dup := body.Attributes[name]; dup {
				return nil
			}
			body.Attributes[name] = a
		}
		body.Blocks = append(body.Blocks, b.Blocks...)
	}
	last := pieces[len(pieces)-1].file.Body.(*hclsyntax.Body)
	body.SrcRange = hcl.RangeBetween(body.SrcRange, last.SrcRange)
	body.EndRange = last.EndRange
	file.Bytes = src
	return file
}
