package glidein

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestSafeMessage(t *testing.T) {
	long := strings.Repeat("é", MaxMessage)
	for _, tt := range []struct{ in, want string }{
		{"validation failed: check disk: 1 MB free, want 2 MB", "validation failed: check disk: 1 MB free, want 2 MB"},
		{"  red \x1b[31mALERT\x1b[0m\r\nnext\tline  ", "red [31mALERT [0m next line"},
		{"bidi \u202eevil\u202c end", "bidi evil end"},
		{"bad \xff\xfe utf8", "bad utf8"},
		{"\x00\x01\x7f", ""},
		{long, strings.Repeat("é", (MaxMessage-len("…"))/2) + "…"},
	} {
		if got := SafeMessage(tt.in); got != tt.want {
			t.Errorf("SafeMessage(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzSafeMessage(f *testing.F) {
	f.Add("validation failed: check disk: 1 MB free")
	f.Add("\x1b[31m\u202e\xff" + strings.Repeat("x", 2*MaxMessage))
	f.Fuzz(func(t *testing.T, s string) {
		got := SafeMessage(s)
		if len(got) > MaxMessage || !utf8.ValidString(got) || strings.Contains(got, "  ") || strings.TrimSpace(got) != got {
			t.Fatalf("SafeMessage(%q) = %q", s, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("SafeMessage(%q) = %q holds %U", s, got, r)
			}
		}
		if SafeMessage(got) != got && !strings.HasSuffix(got, "…") {
			t.Fatalf("SafeMessage is not idempotent on %q", got)
		}
	})
}
