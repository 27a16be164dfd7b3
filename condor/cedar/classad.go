package cedar

import (
	"fmt"

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
