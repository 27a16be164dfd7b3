package classad

import (
	"fmt"
	"strings"
)

// QuoteString renders s as a ClassAd string literal, escaping double
// quotes, backslashes, line feeds, tabs and carriage returns.
func QuoteString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// UnquoteString decodes a ClassAd string literal as QuoteString (or
// HTCondor) writes it, such as an attribute's text in an ad on the wire:
// the escapes \n, \t and \r stand for their control characters, a
// backslash before any other character for that character.
func UnquoteString(expr string) (string, error) {
	t := strings.TrimSpace(expr)
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return "", fmt.Errorf("%s is not a ClassAd string literal", clipText(t))
	}
	t = t[1 : len(t)-1]
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		ch := t[i]
		if ch == '"' {
			return "", fmt.Errorf("unescaped double quote in string literal %q", clipText(expr))
		}
		if ch != '\\' {
			b.WriteByte(ch)
			continue
		}
		if i+1 >= len(t) {
			return "", fmt.Errorf("string literal %q ends with a backslash", clipText(expr))
		}
		i++
		switch t[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(t[i])
		}
	}
	return b.String(), nil
}

// clipText shortens s for an error message.
func clipText(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
