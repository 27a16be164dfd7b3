package classad

import "strings"

// ParseOldAttr parses one "Name = Expr" in old syntax, as HTCondor's wire
// form carries each attribute of an ad. Unlike ParseOldAd it does not split
// at line ends: a string literal may hold a newline.
func ParseOldAttr(src string) (string, Expr, error) {
	return parseOldLine(src, 0)
}

// OldExpr prints the expression of the named attribute in old syntax, as
// HTCondor's wire form carries it, and whether the ad has the attribute.
func (a *Ad) OldExpr(name string) (string, bool) {
	at := a.lookupLower(lower(name))
	if at == nil {
		return "", false
	}
	var b strings.Builder
	at.expr.write(&b, true)
	return b.String(), true
}
