package negotiator

import (
	"math"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/daemon/wire"
)

// Slot is a slot offered for matching: its ad (Requirements and Rank are
// the machine's), where its startd is and the claim id to hand out.
type Slot struct {
	Ad            *classad.Ad
	Name          string
	Startd        string
	ClaimID       string
	Partitionable bool

	matcher        *classad.Matcher
	cpus, mem, dsk float64 // resources left in this cycle
	rankConst      bool
	taken          bool
}

// NewSlot prepares a slot ad for matching. Startd is the startd's API
// address and claimID the claim id the startd advertised privately.
func NewSlot(ad *classad.Ad, startd, claimID string) *Slot {
	name, _ := ad.EvalAttr("Name").StringValue()
	p, _ := ad.EvalAttr("PartitionableSlot").BoolValue()
	s := &Slot{Ad: ad, Name: name, Startd: startd, ClaimID: claimID, Partitionable: p, matcher: classad.NewMatcher(ad)}
	s.cpus = num(ad, "Cpus", nil, 0)
	s.mem = num(ad, "Memory", nil, 0)
	s.dsk = num(ad, "Disk", nil, 0)
	s.rankConst = constExpr(ad, classad.AttrRank)
	return s
}

// Job is an idle job offered for matching.
type Job struct {
	ID string
	Ad *classad.Ad
}

// Submitter is one user's idle jobs at one schedd with the user's effective
// priority (lower is better).
type Submitter struct {
	Name     string // owner@uid-domain
	Schedd   string // the schedd's API address
	Priority float64
	Running  int
	Jobs     []Job
}

// Match is a job matched to a slot.
type Match struct {
	Submitter string
	Schedd    string
	Job       Job
	Slot      *Slot
}

// Wire renders a match for the schedd.
func (m Match) Wire() wire.Match {
	return wire.Match{JobID: m.Job.ID, SlotName: m.Slot.Name, Startd: m.Slot.Startd, ClaimID: m.Slot.ClaimID,
		Slot: wire.FromClassAd(m.Slot.Ad)}
}

func num(ad *classad.Ad, name string, target *classad.Ad, def float64) float64 {
	e, ok := ad.Lookup(name)
	if !ok {
		return def
	}
	f, ok := classad.EvalWith(e, ad, target).NumberValue()
	if !ok || math.IsNaN(f) {
		return def
	}
	return f
}

// constExpr reports whether ad's attribute is absent or a literal.
func constExpr(ad *classad.Ad, name string) bool {
	e, ok := ad.Lookup(name)
	if !ok {
		return true
	}
	return !identRE.MatchString(stripStrings(e.String()))
}

var identRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_.]*`)

func stripStrings(s string) string {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// idents returns the attribute names an expression refers to, lower-cased,
// without MY./TARGET. prefixes.
func idents(src string, into map[string]bool) {
	for _, id := range identRE.FindAllString(stripStrings(src), -1) {
		l := strings.ToLower(id)
		l = strings.TrimPrefix(strings.TrimPrefix(l, "target."), "my.")
		switch l {
		case "true", "false", "undefined", "error", "target", "my", "is", "isnt":
			continue
		}
		if i := strings.IndexByte(l, '.'); i >= 0 {
			l = l[:i]
		}
		into[l] = true
	}
}

// autocluster is a set of jobs of one submitter that are identical in every
// attribute matchmaking looks at.
type autocluster struct {
	rep       *classad.Ad
	matcher   *classad.Matcher
	jobs      []Job
	next      int
	cpus      float64
	mem, dsk  float64
	rankConst bool
	classes   []*slotClass
	cands     []cand
	scanned   bool
	partial   bool // the last scan stopped early
	full      bool // scan every class
	// slotRanksConst: every slot's Rank is constant.
	slotRanksConst bool
}

// Autoclusters groups jobs by the significant attributes: those the jobs'
// and the slots' Requirements and Rank refer to, and the resource requests.
func Autoclusters(jobs []Job, slotAttrs map[string]bool) [][]Job {
	base := map[string]bool{"requirements": true, "rank": true, "requestcpus": true, "requestmemory": true,
		"requestdisk": true, "owner": true}
	for k := range slotAttrs {
		base[k] = true
	}
	groups := map[string]int{}
	var out [][]Job
	var b strings.Builder
	for _, j := range jobs {
		sig := map[string]bool{}
		for k := range base {
			sig[k] = true
		}
		for _, n := range []string{"Requirements", "Rank", "RequestCpus", "RequestMemory", "RequestDisk"} {
			if e, ok := j.Ad.Lookup(n); ok {
				idents(e.String(), sig)
			}
		}
		names := make([]string, 0, len(sig))
		for k := range sig {
			names = append(names, k)
		}
		sort.Strings(names)
		b.Reset()
		for _, n := range names {
			if e, ok := j.Ad.Lookup(n); ok {
				b.WriteString(n)
				b.WriteByte('=')
				b.WriteString(e.String())
				b.WriteByte(';')
			}
		}
		k := b.String()
		i, ok := groups[k]
		if !ok {
			i = len(out)
			groups[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], j)
	}
	return out
}

// SlotAttrs returns the job attributes the slots' policy refers to.
func SlotAttrs(slots []*Slot) map[string]bool {
	out := map[string]bool{}
	seen := map[string]bool{}
	for _, s := range slots {
		for _, n := range []string{"Requirements", "Start", "Rank"} {
			if e, ok := s.Ad.Lookup(n); ok {
				src := e.String()
				if !seen[src] {
					seen[src] = true
					idents(src, out)
				}
			}
		}
	}
	return out
}

// Matchmake matches the submitters' jobs to the slots: jobs in autoclusters,
// each matched symmetrically (job Requirements against the slot, slot
// Requirements against the job) to the slot with the highest job Rank, then
// the highest machine Rank, with partitionable slots shared by as many jobs
// as their resources allow. Submitters are served by fair share: first each
// up to its pie slice (the slots' cpus divided in inverse proportion to the
// effective priorities, less what it already runs), best priority first,
// then the leftovers in priority order.
func Matchmake(slots []*Slot, subs []Submitter) []Match {
	attrs := SlotAttrs(slots)
	type subState struct {
		s     Submitter
		acs   []*autocluster
		limit float64
		got   float64
	}
	states := make([]*subState, 0, len(subs))
	var inv, totalCpus float64
	for _, s := range slots {
		totalCpus += max(s.cpus, 0)
	}
	for _, s := range subs {
		st := &subState{s: s}
		for _, g := range Autoclusters(s.Jobs, attrs) {
			rep := g[0].Ad
			st.acs = append(st.acs, &autocluster{rep: rep, matcher: classad.NewMatcher(rep), jobs: g,
				cpus: max(num(rep, "RequestCpus", nil, 1), 1), mem: num(rep, "RequestMemory", nil, 0),
				dsk: num(rep, "RequestDisk", nil, 0), rankConst: constExpr(rep, classad.AttrRank)})
		}
		prio := s.Priority
		if prio <= 0 {
			prio = 0.5
		}
		inv += 1 / prio
		states = append(states, st)
	}
	slotRanksConst := true
	for _, s := range slots {
		slotRanksConst = slotRanksConst && s.rankConst
	}
	jobRefs := map[string]bool{}
	for _, st := range states {
		for _, ac := range st.acs {
			for _, n := range []string{classad.AttrRequirements, classad.AttrRank} {
				if e, ok := ac.rep.Lookup(n); ok {
					idents(e.String(), jobRefs)
				}
			}
		}
	}
	classes := classify(slots, jobRefs)
	for _, st := range states {
		for _, ac := range st.acs {
			ac.slotRanksConst = slotRanksConst
			ac.classes = classes
		}
	}
	sort.SliceStable(states, func(i, j int) bool { return states[i].s.Priority < states[j].s.Priority })
	for _, st := range states {
		prio := st.s.Priority
		if prio <= 0 {
			prio = 0.5
		}
		st.limit = math.Ceil(totalCpus*(1/prio)/inv) - float64(st.s.Running)
	}
	var out []Match
	serve := func(st *subState, limited bool) {
		for _, ac := range st.acs {
			for ac.next < len(ac.jobs) {
				if limited && st.got+ac.cpus > st.limit+1e-9 {
					return
				}
				sl, weight := ac.pick()
				if sl == nil {
					break
				}
				out = append(out, Match{Submitter: st.s.Name, Schedd: st.s.Schedd, Job: ac.jobs[ac.next], Slot: sl})
				ac.next++
				st.got += weight
			}
		}
	}
	for _, st := range states {
		serve(st, true)
	}
	for _, st := range states {
		serve(st, false)
	}
	return out
}

func (ac *autocluster) fits(s *Slot) bool {
	return !s.taken && s.cpus >= ac.cpus && s.mem >= ac.mem && s.dsk >= ac.dsk
}

// slotClass is a set of slots identical in every attribute matchmaking can
// look at: one evaluation of a job's Requirements and Rank serves them all.
type slotClass struct {
	rep     *Slot
	members []*Slot // in slot order
	first   int     // index of the first member
}

// classify groups slots into classes by the attributes the jobs' and the
// slots' Requirements and Rank can refer to (with the slots' references
// followed through their own attributes, such as START).
func classify(slots []*Slot, jobRefs map[string]bool) []*slotClass {
	identCache := map[string]map[string]bool{}
	refs := func(src string) map[string]bool {
		r, ok := identCache[src]
		if !ok {
			r = map[string]bool{}
			idents(src, r)
			identCache[src] = r
		}
		return r
	}
	byKey := map[string]*slotClass{}
	var out []*slotClass
	var b strings.Builder
	for i, sl := range slots {
		names := map[string]bool{}
		for k := range jobRefs {
			names[k] = true
		}
		work := []string{"requirements", "rank", "start"}
		for len(work) > 0 {
			n := work[len(work)-1]
			work = work[:len(work)-1]
			names[n] = true
			e, ok := sl.Ad.Lookup(n)
			if !ok {
				continue
			}
			for r := range refs(e.String()) {
				if !names[r] {
					names[r] = true
					work = append(work, r)
				}
			}
		}
		sorted := make([]string, 0, len(names))
		for n := range names {
			sorted = append(sorted, n)
		}
		sort.Strings(sorted)
		b.Reset()
		for _, n := range sorted {
			if e, ok := sl.Ad.Lookup(n); ok {
				b.WriteString(n)
				b.WriteByte('=')
				b.WriteString(e.String())
				b.WriteByte(0)
			}
		}
		if sl.Partitionable {
			b.WriteString("\x00p")
		}
		k := b.String()
		c := byKey[k]
		if c == nil {
			c = &slotClass{rep: sl, first: i}
			byKey[k] = c
			out = append(out, c)
		}
		c.members = append(c.members, sl)
	}
	return out
}

// pick returns the best slot with room for one more job of the cluster and
// takes that job's resources from it. It returns the slot and the weight
// (cpus) charged to the submitter.
func (ac *autocluster) pick() (*Slot, float64) {
	for {
		if !ac.scanned {
			ac.scan(len(ac.jobs) - ac.next)
		}
		best := -1
		for i := range ac.cands {
			c := &ac.cands[i]
			for c.pos < len(c.cl.members) && !ac.fits(c.cl.members[c.pos]) {
				c.pos++
			}
			if c.pos == len(c.cl.members) {
				continue
			}
			if best < 0 || c.better(&ac.cands[best]) {
				best = i
			}
			if ac.rankConst && ac.slotRanksConst {
				break // first fit: candidates are in slot order
			}
		}
		if best < 0 {
			if ac.partial {
				// The first classes filled up: scan them all this time.
				ac.scanned, ac.partial, ac.full = false, false, true
				continue
			}
			ac.cands = nil
			return nil, 0
		}
		s := ac.cands[best].cl.members[ac.cands[best].pos]
		if s.Partitionable {
			s.cpus -= ac.cpus
			s.mem -= ac.mem
			s.dsk -= ac.dsk
			return s, ac.cpus
		}
		s.taken = true
		return s, s.cpus
	}
}

type cand struct {
	cl         *slotClass
	pos        int // first member that may still fit
	jrank, mrk float64
}

func (c *cand) better(o *cand) bool {
	if c.jrank != o.jrank {
		return c.jrank > o.jrank
	}
	if c.mrk != o.mrk {
		return c.mrk > o.mrk
	}
	return c.cl.first < o.cl.first
}

// scan collects the slot classes matching the cluster. With constant ranks
// it stops once the classes hold want slots (first fit); otherwise it scans
// every class, spreading the work over the available CPUs.
func (ac *autocluster) scan(want int) {
	ac.scanned = true
	ac.partial = false
	ac.cands = ac.cands[:0]
	all := ac.classes
	check := func(i int) (cand, bool) {
		cl := all[i]
		s := cl.rep
		if !s.matcher.Matches(ac.rep) || !ac.matcher.Matches(s.Ad) {
			return cand{}, false
		}
		c := cand{cl: cl}
		if !ac.rankConst {
			c.jrank = ac.matcher.Rank(s.Ad)
		}
		if !s.rankConst {
			c.mrk = s.matcher.Rank(ac.rep)
		}
		return c, true
	}
	if ac.rankConst && ac.slotRanksConst && !ac.full {
		n := 0
		for i := range all {
			if c, ok := check(i); ok {
				ac.cands = append(ac.cands, c)
				n += len(c.cl.members)
				if n >= want {
					ac.partial = i < len(all)-1
					return
				}
			}
		}
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if len(all) < 512 {
		workers = 1
	}
	parts := make([][]cand, workers)
	var wg sync.WaitGroup
	chunk := (len(all) + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, len(all))
		wg.Add(1)
		go func(w, lo, hi int) {
			defer wg.Done()
			var cs []cand
			for i := lo; i < hi; i++ {
				if c, ok := check(i); ok {
					cs = append(cs, c)
				}
			}
			parts[w] = cs
		}(w, lo, hi)
	}
	wg.Wait()
	for _, p := range parts {
		ac.cands = append(ac.cands, p...)
	}
}
