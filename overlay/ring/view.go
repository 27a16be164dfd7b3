package ring

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Member is one node of the sea as the ring sees it.
type Member struct {
	// Name is the node's unique name; its ring position is IDOf(Name).
	Name string `json:"name"`
	// Addr is where the node answers tree queries (host:port).
	Addr string `json:"addr,omitempty"`
	// ID is the ring position, IDOf(Name).
	ID ID `json:"-"`
}

// NewMember returns the member named name at address addr, with its ID set.
func NewMember(name, addr string) Member { return Member{Name: name, Addr: addr, ID: IDOf(name)} }

// View is an immutable snapshot of the membership, sorted by ring position.
// It is safe for concurrent use.
type View struct {
	members []Member
	// prefix holds the first 64 bits of each member's ID, for searching.
	prefix []uint64
}

func newView(ms []Member) *View {
	p := make([]uint64, len(ms))
	for i := range ms {
		p[i] = binary.BigEndian.Uint64(ms[i].ID[:8])
	}
	return &View{members: ms, prefix: p}
}

// NewView returns a view of members. Members with a zero ID get IDOf(Name);
// later duplicates of a name are dropped. The slice is copied.
func NewView(members []Member) *View {
	ms := make([]Member, 0, len(members))
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		if seen[m.Name] {
			continue
		}
		seen[m.Name] = true
		if m.ID.IsZero() {
			m.ID = IDOf(m.Name)
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID.Cmp(ms[j].ID) < 0 })
	return newView(ms)
}

// NewSortedView returns a view over members, which must already be sorted
// by ID, have distinct IDs, and every ID set. It does not copy the slice,
// which the caller must not modify afterwards; it suits very large
// simulated memberships.
func NewSortedView(members []Member) (*View, error) {
	for i := 1; i < len(members); i++ {
		if members[i-1].ID.Cmp(members[i].ID) >= 0 {
			return nil, fmt.Errorf("ring view: member %d (%q) is not after member %d (%q)", i, members[i].Name, i-1, members[i-1].Name)
		}
	}
	return newView(members), nil
}

// Len returns the number of members.
func (v *View) Len() int { return len(v.members) }

// At returns the i-th member in ring order.
func (v *View) At(i int) Member { return v.members[i] }

// Members returns the members in ring order. The slice must not be modified.
func (v *View) Members() []Member { return v.members }

// Search returns the index of the first member whose ID is >= id, which is
// Len() when there is none (the successor is then At(0)).
func (v *View) Search(id ID) int {
	key := binary.BigEndian.Uint64(id[:8])
	lo, hi := 0, len(v.prefix)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		p := v.prefix[m]
		if p < key || (p == key && v.members[m].ID.Cmp(id) < 0) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Index returns the index of the member named name, and whether it exists.
func (v *View) Index(name string) (int, bool) {
	id := IDOf(name)
	i := v.Search(id)
	if i < len(v.members) && v.members[i].ID == id && v.members[i].Name == name {
		return i, true
	}
	return -1, false
}

// Successor returns the index of the first member at or clockwise after id.
// It returns -1 for an empty view.
func (v *View) Successor(id ID) int {
	if len(v.members) == 0 {
		return -1
	}
	i := v.Search(id)
	if i == len(v.members) {
		i = 0
	}
	return i
}

// Predecessor returns the index of the first member at or counter-clockwise
// before id. It returns -1 for an empty view.
func (v *View) Predecessor(id ID) int {
	n := len(v.members)
	if n == 0 {
		return -1
	}
	i := v.Search(id)
	if i < n && v.members[i].ID == id {
		return i
	}
	return (i - 1 + n) % n
}

// Count returns the number of members whose ID lies in iv.
func (v *View) Count(iv Interval) int {
	if iv.IsFull() {
		return len(v.members)
	}
	b, e := v.Search(iv.Begin), v.Search(iv.End)
	if iv.Begin.Cmp(iv.End) < 0 {
		return e - b
	}
	return len(v.members) - b + e
}

// In returns up to limit members whose ID lies in iv, in clockwise order
// from iv.Begin (limit < 0 means no limit).
func (v *View) In(iv Interval, limit int) []Member {
	n := v.Count(iv)
	if limit >= 0 && n > limit {
		n = limit
	}
	if n == 0 {
		return nil
	}
	out := make([]Member, 0, n)
	i := v.Search(iv.Begin)
	for len(out) < n {
		out = append(out, v.members[i%len(v.members)])
		i++
	}
	return out
}

// TableConfig sizes a routing table.
type TableConfig struct {
	// Successors and Predecessors are how many immediate neighbours to
	// keep on each side (default 3 each).
	Successors, Predecessors int
	// Fingers caps the fingers kept in each direction (default
	// ceil(log2 N)+1, at most 160).
	Fingers int
}

func (c TableConfig) withDefaults(n int) TableConfig {
	if c.Successors <= 0 {
		c.Successors = 3
	}
	if c.Predecessors <= 0 {
		c.Predecessors = 3
	}
	if c.Fingers <= 0 {
		c.Fingers = log2Ceil(n) + 1
	}
	if c.Fingers > Bits {
		c.Fingers = Bits
	}
	return c
}

// Table returns the routing table of the member at index self: its
// immediate successors and predecessors and its clockwise and
// counter-clockwise power-of-two fingers, without self and without
// duplicates, in clockwise order from self. Building it costs
// O(Fingers * log N).
func (v *View) Table(self int, cfg TableConfig) []Member {
	n := len(v.members)
	if n <= 1 || self < 0 || self >= n {
		return nil
	}
	cfg = cfg.withDefaults(n)
	idx := make([]int, 0, cfg.Successors+cfg.Predecessors+2*cfg.Fingers)
	for k := 1; k <= cfg.Successors && k < n; k++ {
		idx = append(idx, (self+k)%n)
	}
	for k := 1; k <= cfg.Predecessors && k < n; k++ {
		idx = append(idx, (self-k+n)%n)
	}
	me := v.members[self].ID
	for j := 1; j <= cfg.Fingers; j++ {
		d := Pow2(Bits - j)
		idx = append(idx, v.Successor(me.Add(d)), v.Predecessor(me.Sub(d)))
	}
	// Order clockwise from self and drop self and duplicates.
	rel := func(i int) int { return (i - self + n) % n }
	sort.Slice(idx, func(a, b int) bool { return rel(idx[a]) < rel(idx[b]) })
	out := make([]Member, 0, len(idx))
	last := -1
	for _, i := range idx {
		if i == self || i == last {
			continue
		}
		last = i
		out = append(out, v.members[i])
	}
	return out
}
