// Package ring places sea members on a 160-bit identifier ring and derives
// each member's small routing table from the membership list.
//
// Identifiers are the SHA-1 digest of the member name, held in fixed
// 20-byte arrays so that a sorted membership of a million nodes costs a few
// tens of megabytes and every lookup is a binary search.
//
// Routing tables are small-world in the deterministic, Chord-like form: a
// node keeps a few immediate successors and predecessors and, in each
// direction, one finger per power of two — the first member at or beyond
// distance 2^(160-j) for j = 1, 2, ... up to about log2(N)+1. Fingers at
// powers of two were chosen over Kleinberg's harmonic (randomised) fingers
// because recursive partitioning of a region [self, end) among the fingers
// that fall inside it then halves the region at each level, so a tree that
// spans the whole ring has depth close to log2(N) and the shape depends only
// on the membership, never on a random draw: every node that sees the same
// membership builds the same tree, and a failed sub-region can be handed to
// its next member without coordination. Harmonic fingers give O(log^2 N)
// greedy routing in expectation and uneven sub-regions.
package ring

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
)

// Bits is the width of the identifier ring.
const Bits = 160

// ID is a position on the ring: an unsigned 160-bit big-endian integer.
type ID [20]byte

// IDOf returns the ring position of a member name (its SHA-1 digest).
func IDOf(name string) ID { return ID(sha1.Sum([]byte(name))) }

// ParseID parses the 40-digit hexadecimal form produced by ID.String.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("ring id %q: want %d hexadecimal digits, got %d", s, 2*len(id), len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("ring id %q: %w", s, err)
	}
	return id, nil
}

// String returns the identifier as 40 hexadecimal digits.
func (a ID) String() string { return hex.EncodeToString(a[:]) }

// MarshalText implements encoding.TextMarshaler.
func (a ID) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *ID) UnmarshalText(b []byte) error {
	id, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*a = id
	return nil
}

// Cmp compares a and b as unsigned integers and returns -1, 0 or +1.
func (a ID) Cmp(b ID) int {
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}

// IsZero reports whether a is the zero identifier.
func (a ID) IsZero() bool { return a == ID{} }

// Add returns a+b modulo 2^160.
func (a ID) Add(b ID) ID {
	var r ID
	carry := 0
	for i := len(a) - 1; i >= 0; i-- {
		s := int(a[i]) + int(b[i]) + carry
		r[i] = byte(s)
		carry = s >> 8
	}
	return r
}

// Sub returns a-b modulo 2^160: the clockwise distance from b to a.
func (a ID) Sub(b ID) ID {
	var r ID
	borrow := 0
	for i := len(a) - 1; i >= 0; i-- {
		s := int(a[i]) - int(b[i]) - borrow
		borrow = 0
		if s < 0 {
			s += 256
			borrow = 1
		}
		r[i] = byte(s)
	}
	return r
}

// Not returns the bitwise complement of a, which is 2^160-1-a: the mirror
// image of a, turning clockwise order into counter-clockwise order.
func (a ID) Not() ID {
	for i := range a {
		a[i] = ^a[i]
	}
	return a
}

// Pow2 returns 2^k for 0 <= k < 160 (other k give the zero identifier).
func Pow2(k int) ID {
	var r ID
	if k < 0 || k >= Bits {
		return r
	}
	r[len(r)-1-k/8] = 1 << (k % 8)
	return r
}

// One is the identifier 1.
var one = Pow2(0)

// Fraction returns a as a fraction of the whole ring, a/2^160, in [0, 1).
func (a ID) Fraction() float64 {
	f := 0.0
	for i := len(a) - 1; i >= 0; i-- {
		f = (f + float64(a[i])) / 256
	}
	return f
}

// log2Ceil returns ceil(log2(n)) for n >= 1.
func log2Ceil(n int) int {
	if n <= 1 {
		return 0
	}
	return int(math.Ceil(math.Log2(float64(n))))
}
