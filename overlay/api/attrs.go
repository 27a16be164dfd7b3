package api

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The agent's machine attributes (its -attr K=V flags and the STARTD_ATTRS
// of its configuration file) are typed as below, by the agent and by the
// launchers that read its command line back.

// ValidAttrName reports whether s is a ClassAd attribute name: a letter or
// underscore followed by letters, digits and underscores.
func ValidAttrName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// ParseAttrValue types a command-line attribute value: integers become
// int64, reals float64, true/false (any case) bool, a double-quoted string
// its contents, and anything else a string.
func ParseAttrValue(v string) any {
	v = strings.TrimSpace(v)
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !strings.ContainsAny(v, "xXpPnN") {
		return f
	}
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false":
		return false
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		if s, err := strconv.Unquote(v); err == nil && utf8.ValidString(v) {
			return s
		}
		return v[1 : len(v)-1]
	}
	return v
}
