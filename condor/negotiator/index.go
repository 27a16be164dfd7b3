package negotiator

import (
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pond-htc/pond/condor/classad"
)

// index shares the evaluations of one cycle between slots and between
// autoclusters, so that a pool whose slots all differ in some attribute
// (a per-host FILESYSTEM_DOMAIN, a Name) costs little more than one whose
// slots are alike.
//
// A match is made of tests: each top-level conjunct of the job's
// Requirements (a conjunction is true exactly when every conjunct is) and
// the slot's Requirements; the job's and the slot's Rank order the matches.
// For each test the slots fall into classes: two slots share a class when
// they hold the same expression, or none, for every attribute the test can
// read, directly or through other attributes of either ad. Against the
// same job ad a test gives the same result for every slot of a class; and
// two autoclusters whose ads hold the same expressions for those
// attributes get the same results. So a test is evaluated once per class
// and per such job key, on the first slot that needs it, and a slot costs
// an array look-up per test afterwards. A test that may read attributes it
// does not name (eval(), a whole ad as a value) gets one class per slot
// and one key per autocluster, the plain evaluation.
type index struct {
	slots   []*Slot
	jobExp  map[string]refs     // name -> what the clusters' expressions for it read
	text    map[string][]string // name -> per slot expression text, filled on demand
	refsOf  map[string]refs     // expression text -> what it reads
	units   map[string]*unit
	ranks   JobRanks // the negotiator's pre and post job ranks
	scratch []string // partition's seen list, reused
	work    []string // partition's work list, reused
}

// refs are the attribute names an expression reads.
type refs struct {
	names  []string
	opaque bool // it may read attributes it does not name
}

type unitKind uint8

const (
	jobReq   unitKind = iota // a conjunct of the job's Requirements
	jobRank                  // the job's Rank
	slotReq                  // the slot's Requirements
	slotRank                 // the slot's Rank
	negRank                  // NEGOTIATOR_PRE_JOB_RANK or _POST_: MY the slot, TARGET the job
)

// unit is one test (or rank) with its partition of the slots.
type unit struct {
	kind     unitKind
	prog     *classad.Program // job side: the expression
	class    []int32          // per slot
	nclass   int
	jobNames []string // the job attributes the results depend on
	opaque   bool
	memos    map[string]*memo
}

// memo holds a unit's results per slot class for one job key.
type memo struct {
	u    *unit
	b    []int8 // tests: 0 not yet evaluated, 1 true, 2 false
	f    []float64
	done []bool
}

const absent = "\x01"

func newIndex(slots []*Slot) *index {
	x := &index{slots: slots, jobExp: map[string]refs{}, text: map[string][]string{},
		refsOf: map[string]refs{}, units: map[string]*unit{}}
	x.warm([]string{"requirements", "rank", "start"})
	return x
}

// setClusters records what the clusters' expressions read, before any
// unit is made.
func (x *index) setClusters(acs []*autocluster) {
	exp := map[string]map[string]bool{}
	for _, ac := range acs {
		for _, name := range ac.rep.Names() {
			e, _ := ac.rep.Lookup(name)
			ln := strings.ToLower(name)
			r := x.refsOfExpr(e)
			set := exp[ln]
			if set == nil {
				set = map[string]bool{}
				exp[ln] = set
			}
			for _, n := range r.names {
				set[n] = true
			}
			if r.opaque {
				x.jobExp[ln] = refs{opaque: true}
			}
		}
	}
	for ln, set := range exp {
		r := x.jobExp[ln]
		for n := range set {
			r.names = append(r.names, n)
		}
		sort.Strings(r.names)
		x.jobExp[ln] = r
	}
	x.warm(x.likelyNames(acs))
}

// likelyNames returns the slot attributes the partitions will most likely
// read: those the clusters' Requirements and Rank name, one step through
// the clusters' own expressions, and those the slots' policy names.
func (x *index) likelyNames(acs []*autocluster) []string {
	set := map[string]bool{"requirements": true, "rank": true, "start": true}
	add := func(names []string) {
		for _, n := range names {
			set[n] = true
			for _, m := range x.jobExp[n].names {
				set[m] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, ac := range acs {
		for _, n := range []string{classad.AttrRequirements, classad.AttrRank} {
			if e, ok := ac.rep.Lookup(n); ok {
				if t := e.String(); !seen[t] {
					seen[t] = true
					add(x.refsOfExpr(e).names)
				}
			}
		}
	}
	for i := range x.slots {
		for _, n := range []string{"requirements", "rank", "start"} {
			_, r := x.refsAt(n, i)
			add(r.names)
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (x *index) refsOfExpr(e classad.Expr) refs {
	t := e.String()
	r, ok := x.refsOf[t]
	if !ok {
		r.names, r.opaque = classad.AttrNames(e)
		x.refsOf[t] = r
	}
	return r
}

// textOf returns slot i's expression for the lower-case name, or absent.
func (x *index) textOf(name string, i int) string {
	col := x.column(name)
	if col[i] == "" {
		col[i] = slotText(x.slots[i], name)
	}
	return col[i]
}

// column returns the per slot expression texts for the lower-case name,
// making the column the first time.
func (x *index) column(name string) []string {
	col := x.text[name]
	if col == nil {
		col = make([]string, len(x.slots))
		x.text[name] = col
	}
	return col
}

func slotText(s *Slot, name string) string {
	e, ok := s.Ad.Lookup(name)
	if !ok {
		return absent
	}
	return e.String()
}

// refsAt returns slot i's expression for the lower-case name and what it
// reads.
func (x *index) refsAt(name string, i int) (string, refs) {
	t := x.textOf(name, i)
	if t == absent {
		return t, refs{}
	}
	r, ok := x.refsOf[t]
	if !ok {
		e, _ := x.slots[i].Ad.Lookup(name)
		r.names, r.opaque = classad.AttrNames(e)
		x.refsOf[t] = r
	}
	return t, r
}

// warm fills the slots' expression texts for names on all CPUs: the
// texts of every slot are needed to partition the slots, and rendering
// them is most of the cost of a partition.
func (x *index) warm(names []string) {
	cols := make([][]string, len(names))
	for k, n := range names {
		cols[k] = x.column(n)
	}
	workers := runtime.GOMAXPROCS(0)
	if len(x.slots) < 1024 {
		workers = 1
	}
	chunk := (len(x.slots) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(x.slots); lo += chunk {
		hi := min(lo+chunk, len(x.slots))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				for k, col := range cols {
					if col[i] == "" {
						col[i] = slotText(x.slots[i], names[k])
					}
				}
			}
		})
	}
	wg.Wait()
}

// unitFor returns the unit of a test, partitioning the slots the first
// time. For job-side units e is the expression; slot-side units read each
// slot's own Requirements or Rank.
func (x *index) unitFor(kind unitKind, e classad.Expr) *unit {
	key := string(rune('0'+kind)) + ":"
	if e != nil {
		key += e.String()
	}
	if u, ok := x.units[key]; ok {
		return u
	}
	u := &unit{kind: kind, memos: map[string]*memo{}}
	var root refs
	slotRoot := ""
	switch kind {
	case jobReq, jobRank, negRank:
		u.prog = classad.CompileExpr(e)
		root = x.refsOfExpr(e)
	case slotReq:
		slotRoot = "requirements"
	case slotRank:
		slotRoot = "rank"
	}
	x.partition(u, root, slotRoot)
	x.units[key] = u
	return u
}

// partition puts the slots into u's classes.
func (x *index) partition(u *unit, root refs, slotRoot string) {
	u.class = make([]int32, len(x.slots))
	keys := map[string]int32{}
	jobNames := map[string]bool{}
	var b strings.Builder
	for i := range x.slots {
		b.Reset()
		seen := x.scratch[:0]
		work := append(x.work[:0], root.names...)
		opaque := root.opaque
		if slotRoot != "" {
			t, r := x.refsAt(slotRoot, i)
			b.WriteString(t)
			b.WriteByte(0)
			work = append(work, r.names...)
			opaque = opaque || r.opaque
		}
		for len(work) > 0 {
			n := work[len(work)-1]
			work = work[:len(work)-1]
			if contains(seen, n) {
				continue
			}
			seen = append(seen, n)
			_, r := x.refsAt(n, i)
			work = append(work, r.names...)
			opaque = opaque || r.opaque
			if r, ok := x.jobExp[n]; ok {
				work = append(work, r.names...)
				opaque = opaque || r.opaque
			}
		}
		x.scratch, x.work = seen, work
		if opaque {
			u.opaque = true
			b.WriteString("\x00slot")
			b.WriteString(strconv.Itoa(i))
		}
		sort.Strings(seen)
		for _, n := range seen {
			jobNames[n] = true
			b.WriteString(n)
			b.WriteByte('=')
			b.WriteString(x.textOf(n, i))
			b.WriteByte(0)
		}
		k := b.String()
		c, ok := keys[k]
		if !ok {
			c = int32(len(keys))
			keys[k] = c
		}
		u.class[i] = c
	}
	u.nclass = len(keys)
	for n := range jobNames {
		u.jobNames = append(u.jobNames, n)
	}
	sort.Strings(u.jobNames)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// memoFor returns the results of u for the cluster's job key.
func (x *index) memoFor(u *unit, ac *autocluster) *memo {
	var b strings.Builder
	if u.opaque {
		b.WriteString("\x00cluster")
		b.WriteString(strconv.Itoa(ac.id))
	} else {
		for _, n := range u.jobNames {
			b.WriteString(n)
			b.WriteByte('=')
			if e, ok := ac.rep.Lookup(n); ok {
				b.WriteString(e.String())
			} else {
				b.WriteString(absent)
			}
			b.WriteByte(0)
		}
	}
	k := b.String()
	m := u.memos[k]
	if m == nil {
		m = &memo{u: u}
		switch u.kind {
		case jobReq, slotReq:
			m.b = make([]int8, u.nclass)
		default:
			m.f = make([]float64, u.nclass)
			m.done = make([]bool, u.nclass)
		}
		u.memos[k] = m
	}
	return m
}

// prepare sets up the cluster's tests and ranks.
func (x *index) prepare(ac *autocluster) {
	ac.prepared = true
	if e, ok := ac.rep.Lookup(classad.AttrRequirements); ok {
		for _, c := range classad.Conjuncts(e) {
			ac.tests = append(ac.tests, x.memoFor(x.unitFor(jobReq, c), ac))
		}
	} else {
		ac.noReq = true
	}
	ac.tests = append(ac.tests, x.memoFor(x.unitFor(slotReq, nil), ac))
	// Cheapest first: tests with few classes are evaluated least and
	// reject many slots at the cost of a look-up.
	sort.SliceStable(ac.tests, func(i, j int) bool { return ac.tests[i].u.nclass < ac.tests[j].u.nclass })
	if e, ok := ac.rep.Lookup(classad.AttrRank); ok {
		ac.jrank = x.memoFor(x.unitFor(jobRank, e), ac)
	}
	ac.mrank = x.memoFor(x.unitFor(slotRank, nil), ac)
	if x.ranks.Pre != nil {
		ac.pre = x.memoFor(x.unitFor(negRank, x.ranks.Pre), ac)
	}
	if x.ranks.Post != nil {
		ac.post = x.memoFor(x.unitFor(negRank, x.ranks.Post), ac)
	}
	one := func(m *memo) bool { return m == nil || m.u.nclass <= 1 }
	ac.firstFit = one(ac.jrank) && one(ac.mrank) && one(ac.pre) && one(ac.post)
}

// holds reports whether the test holds between the cluster and slot i.
func (m *memo) holds(x *index, ac *autocluster, i int) bool {
	c := m.u.class[i]
	r := m.b[c]
	if r == 0 {
		var ok bool
		s := x.slots[i]
		if m.u.kind == slotReq {
			ok = s.matcher.Matches(ac.rep)
		} else {
			ok = m.u.prog.EvalBool(ac.rep, s.Ad)
		}
		r = 2
		if ok {
			r = 1
		}
		m.b[c] = r
	}
	return r == 1
}

// value returns the rank of slot i for the cluster (job Rank), of the
// cluster for slot i (machine Rank) or the negotiator's rank of the pair.
func (m *memo) value(x *index, ac *autocluster, i int) float64 {
	c := m.u.class[i]
	if !m.done[c] {
		s := x.slots[i]
		switch m.u.kind {
		case slotRank:
			m.f[c] = rankValue(s.matcher.Rank(ac.rep))
		case negRank:
			m.f[c] = negotiatorRank(m.u.prog.Eval(s.Ad, ac.rep))
		default:
			f, _ := m.u.prog.EvalNumber(ac.rep, s.Ad)
			m.f[c] = rankValue(f)
		}
		m.done[c] = true
	}
	return m.f[c]
}

// rankValue makes a rank orderable: NaN ranks as 0, like a Rank that does
// not evaluate to a number.
func rankValue(f float64) float64 {
	if math.IsNaN(f) {
		return 0
	}
	return f
}
