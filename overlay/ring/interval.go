package ring

import (
	"fmt"
	"sort"
)

// Interval is the clockwise half-open arc [Begin, End) of the ring. An
// interval whose Begin equals End is the whole ring; the empty arc has no
// Interval form and is represented by the absence of an interval.
type Interval struct {
	Begin ID `json:"b"`
	End   ID `json:"e"`
}

// Full returns the interval covering the whole ring.
func Full() Interval { return Interval{} }

// IsFull reports whether iv covers the whole ring.
func (iv Interval) IsFull() bool { return iv.Begin == iv.End }

// Contains reports whether id lies in iv.
func (iv Interval) Contains(id ID) bool {
	if iv.IsFull() {
		return true
	}
	return id.Sub(iv.Begin).Cmp(iv.End.Sub(iv.Begin)) < 0
}

// Fraction returns the length of iv as a fraction of the ring, in (0, 1].
func (iv Interval) Fraction() float64 {
	if iv.IsFull() {
		return 1
	}
	return iv.End.Sub(iv.Begin).Fraction()
}

// Mirror maps an interval of the mirrored ring (positions x.Not()) back to
// the ring: x.Not() lies in iv exactly when x lies in iv.Mirror(). Mirror is
// its own inverse.
func (iv Interval) Mirror() Interval {
	if iv.IsFull() {
		return iv
	}
	return Interval{Begin: iv.End.Not().Add(one), End: iv.Begin.Not().Add(one)}
}

// String returns "[begin,end)" with shortened identifiers.
func (iv Interval) String() string {
	if iv.IsFull() {
		return "[ring)"
	}
	return fmt.Sprintf("[%s…,%s…)", iv.Begin.String()[:10], iv.End.String()[:10])
}

// offset is a position relative to a base: an ID, or 2^160 when top is set.
type offset struct {
	v   ID
	top bool
}

func (a offset) less(b offset) bool {
	if a.top != b.top {
		return b.top
	}
	return a.v.Cmp(b.v) < 0
}

type span struct{ lo, hi offset }

// Union returns the union of ivs as a minimal list of disjoint intervals,
// ordered clockwise starting from base. Overlapping and adjacent intervals
// are merged; if the union is the whole ring the result is [Full()].
func Union(base ID, ivs []Interval) []Interval {
	if len(ivs) == 0 {
		return nil
	}
	spans := make([]span, 0, len(ivs)+1)
	for _, iv := range ivs {
		if iv.IsFull() {
			return []Interval{Full()}
		}
		lo := iv.Begin.Sub(base)
		hi := iv.End.Sub(base)
		switch {
		case hi.IsZero():
			spans = append(spans, span{offset{v: lo}, offset{top: true}})
		case lo.Cmp(hi) < 0:
			spans = append(spans, span{offset{v: lo}, offset{v: hi}})
		default: // wraps past base
			spans = append(spans, span{offset{v: lo}, offset{top: true}}, span{offset{}, offset{v: hi}})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo.less(spans[j].lo) })
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if !last.hi.less(s.lo) { // overlapping or adjacent
			if last.hi.less(s.hi) {
				last.hi = s.hi
			}
			continue
		}
		merged = append(merged, s)
	}
	first, last := merged[0], merged[len(merged)-1]
	if first.lo == (offset{}) && last.hi.top {
		if len(merged) == 1 {
			return []Interval{Full()}
		}
		// Rejoin the arc that crosses base.
		merged[0].lo = last.lo
		merged = merged[:len(merged)-1]
	}
	out := make([]Interval, len(merged))
	for i, s := range merged {
		end := base
		if !s.hi.top {
			end = s.hi.v.Add(base)
		}
		out[i] = Interval{Begin: s.lo.v.Add(base), End: end}
	}
	return out
}

// Complement returns the parts of the ring not covered by ivs, as disjoint
// intervals ordered clockwise from base.
func Complement(base ID, ivs []Interval) []Interval {
	u := Union(base, ivs)
	if len(u) == 0 {
		return []Interval{Full()}
	}
	if u[0].IsFull() {
		return nil
	}
	out := make([]Interval, 0, len(u))
	for i := range u {
		next := u[(i+1)%len(u)]
		out = append(out, Interval{Begin: u[i].End, End: next.Begin})
	}
	return out
}

// Fraction returns the total length of the union of ivs as a fraction of
// the ring.
func Fraction(ivs []Interval) float64 {
	f := 0.0
	for _, iv := range Union(ID{}, ivs) {
		f += iv.Fraction()
	}
	return f
}
