package cedar

import (
	"strings"

	"github.com/pond-htc/pond/condor/classad"
)

// WireAd is a ClassAd printed once in the wire form PutAd sends, so that
// an ad sent to many clients (a collector's slot ads) is printed once
// rather than at every query. It does not change once made.
type WireAd struct {
	lower      []string // each attribute's name, lower case
	lines      []string // each attribute as "Name = Expr", old syntax
	myType     string
	targetType string
}

// NewWireAd prints ad in the wire form.
func NewWireAd(ad *classad.Ad) *WireAd {
	names := ad.Names()
	w := &WireAd{lower: make([]string, len(names)), lines: make([]string, len(names)),
		myType: typeOf(ad, "MyType"), targetType: typeOf(ad, "TargetType")}
	for i, n := range names {
		e, _ := ad.OldExpr(n)
		w.lower[i] = strings.ToLower(n)
		w.lines[i] = n + " = " + e
	}
	return w
}

// Projection is a set of attribute names, lower case, to send of each ad;
// a nil Projection sends every attribute.
type Projection map[string]bool

// NewProjection returns the projection of names (any case); none: nil.
func NewProjection(names []string) Projection {
	if len(names) == 0 {
		return nil
	}
	p := make(Projection, len(names))
	for _, n := range names {
		p[strings.ToLower(n)] = true
	}
	return p
}

// PutWireAd appends w as PutAd appends the ad it was made from, keeping
// only the attributes of p.
func (s *Stream) PutWireAd(w *WireAd, p Projection) error {
	n := len(w.lines)
	if p != nil {
		n = 0
		for _, l := range w.lower {
			if p[l] {
				n++
			}
		}
	}
	if err := s.PutInt(int64(n)); err != nil {
		return err
	}
	for i, line := range w.lines {
		if p != nil && !p[w.lower[i]] {
			continue
		}
		if err := s.PutString(line); err != nil {
			return err
		}
	}
	if err := s.PutString(w.myType); err != nil {
		return err
	}
	return s.PutString(w.targetType)
}
