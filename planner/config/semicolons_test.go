package config

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// TestPosMapperColumns checks the column table against counting the
// characters from the start of the line, at every offset of source with
// multi-byte, malformed and truncated UTF-8.
func TestPosMapperColumns(t *testing.T) {
	for _, src := range []string{
		"",
		"a = 1\n",
		"é = \"日本\" # 🙂\nb\n\n",
		"\xff\xfe = 1\n\xe6\x97\n\xf0\x9f\x99",
		"x = \"\xe6\x97\xa5\xe6\"\r\n\t\xc3",
	} {
		m := newPosMapper([]byte(src), nil)
		for o := 0; o <= len(src); o++ {
			ls := strings.LastIndexByte(src[:o], '\n') + 1
			want := hcl.Pos{Line: strings.Count(src[:o], "\n") + 1, Column: utf8.RuneCountInString(src[ls:o]) + 1, Byte: o}
			if got := m.pos(hcl.Pos{Byte: o}); got != want {
				t.Errorf("%q at %d: %+v, want %+v", src, o, got, want)
			}
		}
	}
}
