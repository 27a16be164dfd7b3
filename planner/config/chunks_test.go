package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// checkChunks fails when parseChunks, cutting src into pieces of about
// size bytes, gives anything but what a parse of the whole file gives.
func checkChunks(t *testing.T, src []byte, size int) *hcl.File {
	t.Helper()
	got := parseChunks(src, "main.pond.hcl", size)
	if got == nil {
		return nil
	}
	want, diags := hclsyntax.ParseConfig(src, "main.pond.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parseChunks(%q) parsed what the parser rejects: %s", src, diags.Error())
	}
	if !reflect.DeepEqual(got, want) {
		g, w := got.Body.(*hclsyntax.Body), want.Body.(*hclsyntax.Body)
		t.Fatalf("parseChunks(%q) differs from the parser's:\nranges %v %v, want %v %v\n%d attributes, %d blocks, want %d, %d",
			src, g.SrcRange, g.EndRange, w.SrcRange, w.EndRange, len(g.Attributes), len(g.Blocks), len(w.Attributes), len(w.Blocks))
	}
	return got
}

var chunkSources = []string{
	"pool \"a\" {\n  nodes = 1\n}\npool \"b\" {\n  labels = { x = \"${var.y}\" }\n}\n",
	"\xef\xbb\xbf# lead\npool \"a\" {\n}\n\n// between\npool \"b\" { nodes = 2 }\nx = 1\n/* a\n} */\ny = 2\n",
	"pool \"a\" {\r\n  nodes = 1\r\n}\r\npool \"b\" {\r\n}\r\n",
	"locals {\n  s = \"caf\xc3\xa9 }\"\n}\npool \"a\" {\n  inner {\n    x = [1, {a = 2}]\n  }\n}\n",
	"a = 1\npool \"a\" {\n}\na = 2\n",
	"pool \"a\" {\n}\npool \"b\"\n{\n}\n",
	"pool \"a\" {\n  x = <<EOT\n}\nEOT\n}\npool \"b\" {\n}\n",
	"pool \"a\" {\n} # c\npool \"b\" {\n}  \npool \"c\" {\n}",
	"x = \"${a}\"\npool \"a\" {\n}\ny = \"}\"\n",
}

// TestParseChunks checks that a file parsed piece by piece is the file
// parsed whole, and that a large configuration is parsed in pieces.
func TestParseChunks(t *testing.T) {
	for _, src := range chunkSources {
		for _, size := range []int{1, 8, 64} {
			checkChunks(t, []byte(src), size)
		}
	}
	var sb strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&sb, "pool \"p%d\" {\n  nodes = %d\n  labels = { site = \"s%d\" }\n}\n", i, 1+i%4, i%10)
		if i%100 == 0 {
			fmt.Fprintf(&sb, "# group %d\nlocals {\n  l%d = \"${var.x}-%d\"\n}\n\n", i, i, i)
		}
	}
	if checkChunks(t, []byte(sb.String()), chunkBytes) == nil {
		t.Fatal("a configuration of 2,000 pools was not parsed in pieces")
	}
}

func FuzzParseChunks(f *testing.F) {
	for _, src := range chunkSources {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		checkChunks(t, src, 1)
	})
}
