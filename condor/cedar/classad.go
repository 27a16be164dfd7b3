package cedar

import (
	"fmt"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
)

// MaxAdAttrs bounds the attribute count a peer may announce for one ad, so
// that a forged count fails at once rather than after reading the whole
// message.
const MaxAdAttrs = 1 << 16

// secretMarker stands in an ad for a private attribute that follows as a
// separate secret field.
const secretMarker = "ZKM"

// PutAd appends a ClassAd in HTCondor's wire form: the attribute count, one
// "Name = Expr" string per attribute in old syntax, then MyType and
// TargetType. With a projection (attribute names, any case), only those
// attributes the ad has are sent. MyType and TargetType travel in their
// own slots after the attributes, and among the attributes as well: the
// clients of HTCondor 23 and later read them only there.
func (s *Stream) PutAd(ad *classad.Ad, projection []string) error {
	return s.PutWireAd(NewWireAd(ad), NewProjection(projection))
}

func typeOf(ad *classad.Ad, name string) string {
	if v := ad.EvalAttr(name); v.Kind() == classad.StringKind {
		s, _ := v.StringValue()
		return s
	}
	return ""
}

// GetAd reads a ClassAd in HTCondor's wire form. Each attribute must parse
// on its own; a count over MaxAdAttrs, an expression that does not parse,
// or a private attribute sent as a secret field on a stream that cannot
// open it is an error naming the attribute's position.
func (s *Stream) GetAd() (*classad.Ad, error) {
	n, err := s.GetInt()
	if err != nil {
		return nil, fmt.Errorf("reading a ClassAd's attribute count: %w", err)
	}
	if n < 0 || n > MaxAdAttrs {
		return nil, fmt.Errorf("%w: ClassAd announces %d attributes (limit %d)", ErrDecode, n, MaxAdAttrs)
	}
	ad := classad.NewAd()
	for i := int64(0); i < n; i++ {
		line, err := s.GetString()
		if err != nil {
			return nil, fmt.Errorf("reading attribute %d of %d: %w", i+1, n, err)
		}
		if line == secretMarker {
			// The attribute follows as a secret field, sealed when the
			// stream has a key and in the clear otherwise.
			if line, err = s.GetString(); err != nil {
				return nil, fmt.Errorf("reading secret attribute %d of %d: %w", i+1, n, err)
			}
		}
		name, expr, err := classad.ParseOldAttr(line)
		if err != nil {
			return nil, fmt.Errorf("%w: attribute %d of %d: %w", ErrDecode, i+1, n, err)
		}
		ad.Set(name, expr)
	}
	for _, name := range []string{"MyType", "TargetType"} {
		v, err := s.GetString()
		if err != nil {
			return nil, fmt.Errorf("reading the ClassAd's %s: %w", name, err)
		}
		if v != "" && v != "(unknown type)" {
			ad.SetString(name, v)
		}
	}
	return ad, nil
}

// PutAttrs appends an ad given as attribute texts in ClassAd syntax (as
// pond's wire ads carry them: name to expression) in HTCondor's wire
// form, as PutAd does with the parsed ad, with the same projection. A
// literal that reads the same in both syntaxes (an integer, true, false,
// undefined, a string without a backslash) is sent as it is; every other
// expression is parsed and printed in old syntax. An expression that does
// not parse is an error naming the attribute.
func (s *Stream) PutAttrs(attrs map[string]string, projection []string) error {
	var want map[string]bool
	if len(projection) > 0 {
		want = make(map[string]bool, len(projection))
		for _, p := range projection {
			want[strings.ToLower(p)] = true
		}
	}
	lines := make([]string, 0, len(attrs))
	var myType, targetType string
	for name, text := range attrs {
		if want != nil && !want[strings.ToLower(name)] {
			continue
		}
		// MyType and TargetType go in their own slots and among the
		// attributes too, where clients of HTCondor 23 and later read them.
		if isTypeAttr(name) {
			if v, err := classad.UnquoteString(text); err == nil {
				if strings.EqualFold(name, "MyType") {
					myType = v
				} else {
					targetType = v
				}
			}
		}
		if !sameInOldSyntax(text) {
			ad := classad.NewAd()
			if err := ad.SetExpr(name, text); err != nil {
				return fmt.Errorf("%w: attribute %s: %w", ErrDecode, name, err)
			}
			text, _ = ad.OldExpr(name)
		}
		lines = append(lines, name+" = "+text)
	}
	if err := s.PutInt(int64(len(lines))); err != nil {
		return err
	}
	for _, l := range lines {
		if err := s.PutString(l); err != nil {
			return err
		}
	}
	if err := s.PutString(myType); err != nil {
		return err
	}
	return s.PutString(targetType)
}

// sameInOldSyntax reports whether text is a literal both syntaxes read
// and print alike: an integer, true, false, undefined, or a string whose
// only escapes are none (no backslash) and that holds printable ASCII.
func sameInOldSyntax(text string) bool {
	switch text {
	case "true", "false", "undefined":
		return true
	case "":
		return false
	}
	if text[0] == '"' {
		if len(text) < 2 || text[len(text)-1] != '"' {
			return false
		}
		for i := 1; i < len(text)-1; i++ {
			if c := text[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x7f {
				return false
			}
		}
		return true
	}
	digits := text
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (len(digits) > 1 && digits[0] == '0') {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// isTypeAttr reports whether n names MyType or TargetType.
func isTypeAttr(n string) bool {
	return strings.EqualFold(n, "MyType") || strings.EqualFold(n, "TargetType")
}
