package classad

import (
	"math"
	"strconv"
	"strings"
)

// Kind is the type of a ClassAd value.
type Kind uint8

// The kinds of ClassAd values.
const (
	UndefinedKind Kind = iota
	ErrorKind
	BoolKind
	IntKind
	RealKind
	StringKind
	ListKind
	AdKind
	AbsTimeKind
	RelTimeKind
)

var kindNames = [...]string{"undefined", "error", "boolean", "integer", "real", "string", "list", "classad", "abstime", "reltime"}

// String returns the name of the kind as HTCondor's typeOf-style names.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is the result of evaluating a ClassAd expression. The zero Value is
// undefined. Values are small and passed by value.
type Value struct {
	kind Kind
	tz   int32 // abstime offset from UTC in seconds
	i    int64 // int, bool (0/1), abstime seconds; bits of a real or reltime
	s    string
	lp   *listData
	ad   *Ad
}

// listData holds the elements of a list value and, for a list that is the
// value of a list expression, that expression: HTCondor prints such a list
// as its unevaluated element expressions ("{ i,i + 1 }").
type listData struct {
	vals []Value
	src  *listNode
}

func (v Value) fl() float64 { return math.Float64frombits(uint64(v.i)) }

func (v Value) elems() []Value {
	if v.lp == nil {
		return nil
	}
	return v.lp.vals
}

// Undefined returns the undefined value.
func Undefined() Value { return Value{} }

// ErrorValue returns the error value.
func ErrorValue() Value { return Value{kind: ErrorKind} }

// Bool returns a boolean value.
func Bool(b bool) Value {
	if b {
		return Value{kind: BoolKind, i: 1}
	}
	return Value{kind: BoolKind}
}

// Int returns an integer value.
func Int(i int64) Value { return Value{kind: IntKind, i: i} }

// Real returns a real value.
func Real(f float64) Value { return Value{kind: RealKind, i: int64(math.Float64bits(f))} }

// String returns a string value.
func String(s string) Value { return Value{kind: StringKind, s: s} }

// List returns a list value holding vs (not copied).
func List(vs []Value) Value { return Value{kind: ListKind, lp: &listData{vals: vs}} }

// AdValue returns a value holding the nested ad.
func AdValue(a *Ad) Value {
	if a == nil {
		return Undefined()
	}
	return Value{kind: AdKind, ad: a}
}

// AbsTime returns an absolute time value: seconds since the epoch and the
// time zone offset east of UTC in seconds.
func AbsTime(secs int64, offset int) Value {
	return Value{kind: AbsTimeKind, i: secs, tz: int32(offset)}
}

// RelTime returns a relative time value of secs seconds.
func RelTime(secs float64) Value { return Value{kind: RelTimeKind, i: int64(math.Float64bits(secs))} }

// Kind returns the kind of v.
func (v Value) Kind() Kind { return v.kind }

// IsUndefined reports whether v is undefined.
func (v Value) IsUndefined() bool { return v.kind == UndefinedKind }

// IsError reports whether v is the error value.
func (v Value) IsError() bool { return v.kind == ErrorKind }

// BoolValue returns the boolean held by v and whether v is a boolean.
func (v Value) BoolValue() (bool, bool) { return v.i != 0, v.kind == BoolKind }

// IntValue returns the integer held by v and whether v is an integer.
func (v Value) IntValue() (int64, bool) { return v.i, v.kind == IntKind }

// RealValue returns the real held by v and whether v is a real.
func (v Value) RealValue() (float64, bool) { return v.fl(), v.kind == RealKind }

// NumberValue returns v as a float64 when v is an integer, real or boolean.
func (v Value) NumberValue() (float64, bool) {
	switch v.kind {
	case IntKind, BoolKind:
		return float64(v.i), true
	case RealKind:
		return v.fl(), true
	}
	return 0, false
}

// StringValue returns the string held by v and whether v is a string.
func (v Value) StringValue() (string, bool) { return v.s, v.kind == StringKind }

// ListValue returns the elements of v and whether v is a list.
func (v Value) ListValue() ([]Value, bool) { return v.elems(), v.kind == ListKind }

// AdValue returns the ad held by v and whether v is a nested ad.
func (v Value) AdValue() (*Ad, bool) { return v.ad, v.kind == AdKind }

// AbsTimeValue returns the seconds since the epoch and zone offset of an
// absolute time value.
func (v Value) AbsTimeValue() (secs int64, offset int, ok bool) {
	return v.i, int(v.tz), v.kind == AbsTimeKind
}

// RelTimeValue returns the seconds of a relative time value.
func (v Value) RelTimeValue() (float64, bool) { return v.fl(), v.kind == RelTimeKind }

// IsTrue reports whether v is the boolean true or a non-zero number, the
// test HTCondor applies to Requirements and START.
func (v Value) IsTrue() bool {
	switch v.kind {
	case BoolKind, IntKind:
		return v.i != 0
	case RealKind:
		return v.fl() != 0
	}
	return false
}

// String returns v in ClassAd (new) syntax, as unparse would print it.
func (v Value) String() string {
	var b strings.Builder
	writeValue(&b, v, false)
	return b.String()
}

// Equal reports whether v and w are identical in the sense of =?=, with
// lists and ads compared structurally.
func (v Value) Equal(w Value) bool { return sameAs(v, w) }

func formatReal(f float64, old bool) string {
	switch {
	case math.IsInf(f, 1):
		return `real("INF")`
	case math.IsInf(f, -1):
		// As HTCondor writes it: "-real(...)" would read back as a unary
		// minus, which unparses differently.
		return `real("-INF")`
	case math.IsNaN(f):
		return `real("NaN")`
	}
	if old {
		return formatG(f, 16)
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	return cE(f, 15)
}

// cE formats like C's %.*E (two-digit minimum exponent).
func cE(f float64, prec int) string {
	s := strconv.FormatFloat(f, 'E', prec, 64)
	return fixExp(s)
}

func fixExp(s string) string {
	i := strings.LastIndexAny(s, "Ee")
	if i < 0 || i+2 >= len(s) {
		return s
	}
	if len(s)-(i+2) == 1 {
		return s[:i+2] + "0" + s[i+2:]
	}
	return s
}

// formatG formats like C's %.*G.
func formatG(f float64, prec int) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0"
		}
		return "0"
	}
	exp := int(math.Floor(math.Log10(math.Abs(f))))
	// Rounding may bump the exponent; use %E to learn the real exponent.
	es := strconv.FormatFloat(f, 'E', prec-1, 64)
	if k := strings.IndexByte(es, 'E'); k >= 0 {
		if e, err := strconv.Atoi(es[k+1:]); err == nil {
			exp = e
		}
	}
	if exp < -4 || exp >= prec {
		mant := es[:strings.IndexByte(es, 'E')]
		if strings.Contains(mant, ".") {
			mant = strings.TrimRight(mant, "0")
			mant = strings.TrimSuffix(mant, ".")
		}
		return fixExp(mant + es[strings.IndexByte(es, 'E'):])
	}
	s := strconv.FormatFloat(f, 'f', prec-1-exp, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return s
}
