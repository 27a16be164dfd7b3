package glidein

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessage is the most bytes SafeMessage returns.
const MaxMessage = 400

// SafeMessage is s, a message read from a glidein (its status file, which
// anything running on the far side may have written), made fit to show
// in a reason: invalid UTF-8, control and formatting characters (escape
// sequences, bidirectional overrides) become spaces, runs of spaces one,
// and a message longer than MaxMessage bytes is cut at a character
// boundary and ends with "…".
func SafeMessage(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		if b.Len() > MaxMessage {
			break
		}
	}
	out := b.String()
	if len(out) <= MaxMessage {
		return out
	}
	const more = "…"
	cut := MaxMessage - len(more)
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return strings.TrimRight(out[:cut], " ") + more
}
