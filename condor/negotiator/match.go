package negotiator

import (
	"math"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
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
	taken          bool
}

// NewSlot prepares a slot ad for matching. Startd is the startd's API
// address and claimID the claim id the startd advertised privately.
func NewSlot(ad *classad.Ad, startd, claimID string) *Slot {
	name, _ := ad.EvalAttr("Name").StringValue()
	p, _ := ad.EvalAttr("PartitionableSlot").BoolValue()
	s := &Slot{Ad: ad, Name: name, Startd: startd, ClaimID: claimID, Partitionable: p, matcher: classad.NewMatcher(ad)}
	s.cpus = ad.EvalNumber("Cpus", nil, 0)
	s.mem = ad.EvalNumber("Memory", nil, 0)
	s.dsk = ad.EvalNumber("Disk", nil, 0)
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
	// Preempt says the slot is claimed: the job preempts the one it runs;
	// or, for a partitionable slot, the dynamic slots of Victims.
	Preempt bool
	// Victims are the dynamic slots of the partitionable slot Slot the
	// job preempts (ALLOW_PSLOT_PREEMPTION), each with its preempting
	// claim id.
	Victims []*Slot
	// ad is the slot's ad as the match leaves it, with the victims'
	// resources (nil: Slot.Ad).
	ad *classad.Ad
}

// Wire renders a match for the schedd.
func (m Match) Wire() wire.Match {
	ad := m.Slot.Ad
	if m.ad != nil {
		ad = m.ad
	}
	w := wire.Match{JobID: m.Job.ID, SlotName: m.Slot.Name, Startd: m.Slot.Startd, ClaimID: m.Slot.ClaimID,
		Slot: wire.FromClassAd(ad), Preempt: m.Preempt}
	for _, v := range m.Victims {
		w.Preempts = append(w.Preempts, wire.PreemptedSlot{SlotName: v.Name, ClaimID: v.ClaimID})
	}
	return w
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

// autoclusterBase lists the attributes every autocluster key holds.
var autoclusterBase = []string{"concurrencylimits", "owner", "rank", "requestcpus", "requestdisk", "requestmemory", "requirements"}

// AutoclusterKey returns the key that groups a job ad into its
// autocluster: the values of the significant attributes, those the job's
// Requirements, Rank and resource requests refer to, its Owner, and
// slotAttrs (the attributes the slots' policy refers to, lower-case). Jobs
// with equal keys match the same slots with the same ranks.
func AutoclusterKey(ad *classad.Ad, slotAttrs map[string]bool) string {
	texts := map[string]string{}
	text := func(n string) (string, bool) {
		t, ok := texts[n]
		if !ok {
			if e, found := ad.Lookup(n); found {
				t = e.String()
			} else {
				t = absent
			}
			texts[n] = t
		}
		return t, t != absent
	}
	names := autoclusterNames(text, slotAttrs)
	var b strings.Builder
	for i, n := range names {
		if i > 0 && names[i-1] == n {
			continue
		}
		if t, ok := text(n); ok {
			b.WriteString(n)
			b.WriteByte('=')
			b.WriteString(t)
			b.WriteByte(';')
		}
	}
	return b.String()
}

// AutoclusterAttrs returns the names of the attributes of ad whose texts
// make its AutoclusterKey (lower-case, sorted, perhaps repeated): two ads
// whose attributes of these names have the same texts have the same key.
func AutoclusterAttrs(ad *classad.Ad, slotAttrs map[string]bool) []string {
	return autoclusterNames(func(n string) (string, bool) {
		if e, found := ad.Lookup(n); found {
			return e.String(), true
		}
		return "", false
	}, slotAttrs)
}

// autoclusterNames are AutoclusterAttrs, text giving an attribute's text.
func autoclusterNames(text func(string) (string, bool), slotAttrs map[string]bool) []string {
	names := make([]string, 0, len(autoclusterBase)+len(slotAttrs)+8)
	names = append(names, autoclusterBase...)
	for k := range slotAttrs {
		names = append(names, k)
	}
	refs := map[string]bool{}
	for _, n := range []string{"requirements", "rank", "requestcpus", "requestmemory", "requestdisk"} {
		if t, ok := text(n); ok {
			idents(t, refs)
		}
	}
	for k := range refs {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Autoclusters groups jobs by the significant attributes: those the jobs'
// and the slots' Requirements and Rank refer to, and the resource requests
// (see AutoclusterKey). Jobs sharing one ad (the jobs of an autocluster a
// schedd sent) are keyed once.
func Autoclusters(jobs []Job, slotAttrs map[string]bool) [][]Job {
	groups := map[string]int{}
	keys := map[*classad.Ad]string{}
	var out [][]Job
	for _, j := range jobs {
		k, ok := keys[j.Ad]
		if !ok {
			k = AutoclusterKey(j.Ad, slotAttrs)
			keys[j.Ad] = k
		}
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

// autoclustersOf returns each submitter's autoclusters, grouping the
// submitters' jobs on all CPUs.
func autoclustersOf(subs []Submitter, attrs map[string]bool) [][][]Job {
	out := make([][][]Job, len(subs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for k := range subs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[k] = Autoclusters(subs[k].Jobs, attrs)
		})
	}
	wg.Wait()
	return out
}

// SlotAttrs returns the job attributes the slots' policy refers to.
func SlotAttrs(slots []*Slot) map[string]bool {
	return newIndex(slots).slotAttrs()
}

func (x *index) slotAttrs() map[string]bool {
	out := map[string]bool{}
	seen := map[string]bool{}
	for i := range x.slots {
		for _, n := range []string{"requirements", "start", "rank"} {
			if src := x.textOf(n, i); src != absent {
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
// the highest machine Rank, then the earliest in slots (see
// MatchmakeRanked for the negotiator's own ranks), with partitionable
// slots shared by as many jobs as their resources allow. Submitters are
// served by fair share: first each up to its pie slice (the slots' cpus
// divided in inverse proportion to the effective priorities, less what it
// already runs), best priority first, then the leftovers in priority order.
//
// The result is the same as testing every job against every slot; see
// index for how evaluations are shared between slots and autoclusters.
func Matchmake(slots []*Slot, subs []Submitter) []Match {
	return MatchmakeRanked(slots, subs, JobRanks{})
}

// MatchmakeRanked is Matchmake with the pool's NEGOTIATOR_PRE_JOB_RANK and
// NEGOTIATOR_POST_JOB_RANK: of the slots a job matches, it takes the one
// with the highest pre job rank, then the highest job Rank, then the
// highest post job rank, then the highest machine Rank, then the earliest.
func MatchmakeRanked(slots []*Slot, subs []Submitter, ranks JobRanks) []Match {
	ms, _ := matchmake(slots, subs, nil, nil, ranks)
	return ms
}

// MatchmakeGroups is Matchmake with the accounting-group quotas of t
// (see GroupTree): the pool holds total slot weight (cpus), claimed or
// not, and usage gives the slot weight each submitter's claims hold. It
// also returns each group's figures.
func MatchmakeGroups(slots []*Slot, subs []Submitter, t *GroupTree, total float64, usage map[string]float64) ([]Match, []GroupQuota) {
	gc := newGroupCycle(t, total, usage)
	ms, _ := matchmake(slots, subs, nil, gc, JobRanks{})
	if gc == nil {
		return ms, nil
	}
	return ms, gc.t.report()
}

// matchmake is MatchmakeRanked within the concurrency limits of lim (nil:
// none) and the group quotas of gc (nil: none) that also returns the
// number of autoclusters.
func matchmake(slots []*Slot, subs []Submitter, lim *limiter, gc *groupCycle, ranks JobRanks) ([]Match, int) {
	x := newIndex(slots)
	x.ranks = ranks
	attrs := x.slotAttrs()
	ranks.attrs(attrs)
	return negotiate(slots, subs, attrs, x.setClusters, func(ac *autocluster) *Slot { return ac.pick(x) }, lim, gc)
}

// fairShare serves the submitters' autoclusters in fair-share order and
// returns the matches and the number of autoclusters; pick returns the
// slot for an autocluster's next job (nil for none), and clusters, when
// not nil, sees every autocluster before the first pick. An autocluster
// whose concurrency limits (lim, nil for none) are full takes no more.
func fairShare(slots []*Slot, subs []Submitter, attrs map[string]bool, clusters func([]*autocluster),
	pick func(*autocluster) *Slot, lim *limiter) ([]Match, int) {
	return negotiate(slots, subs, attrs, clusters, pick, lim, nil)
}

// subState is one submitter in a cycle: its autoclusters, its pie slice
// (limit) and what it got.
type subState struct {
	s     Submitter
	acs   []*autocluster
	limit float64
	got   float64
	grp   *group // its accounting group, with group quotas
}

// negotiate is fairShare, group by group with the quotas of gq (nil: no
// group quotas).
func negotiate(slots []*Slot, subs []Submitter, attrs map[string]bool, clusters func([]*autocluster),
	pick func(*autocluster) *Slot, lim *limiter, gq *groupCycle) ([]Match, int) {
	states := make([]*subState, 0, len(subs))
	var totalCpus float64
	for _, s := range slots {
		totalCpus += max(s.cpus, 0)
	}
	var all []*autocluster
	groups := autoclustersOf(subs, attrs)
	for k, s := range subs {
		st := &subState{s: s}
		for _, g := range groups[k] {
			rep := g[0].Ad
			ac := &autocluster{id: len(all), rep: rep, jobs: g,
				cpus: max(rep.EvalNumber("RequestCpus", nil, 1), 1), mem: rep.EvalNumber("RequestMemory", nil, 0),
				dsk: rep.EvalNumber("RequestDisk", nil, 0)}
			st.acs = append(st.acs, ac)
			all = append(all, ac)
		}
		states = append(states, st)
	}
	if clusters != nil {
		clusters(all)
	}
	sort.SliceStable(states, func(i, j int) bool { return states[i].s.Priority < states[j].s.Priority })
	var out []Match
	if gq != nil {
		out = gq.negotiate(states, pick, lim)
		return out, len(all)
	}
	setPies(states, totalCpus, lim)
	for _, st := range states {
		out = serve(out, st, true, nil, pick, lim)
	}
	for _, st := range states {
		out = serve(out, st, false, nil, pick, lim)
	}
	return out, len(all)
}

// setPies gives each submitter its pie slice of pie (cpus): the pie
// divided in inverse proportion to their effective priorities, less what
// each already runs.
func setPies(states []*subState, pie float64, lim *limiter) {
	var inv float64
	for _, st := range states {
		inv += 1 / prioOf(st.s)
	}
	for _, st := range states {
		st.limit = math.Ceil(pie*(1/prioOf(st.s))/inv) - float64(st.s.Running)
		lim.share(st.s, st.limit+float64(st.s.Running))
	}
}

func prioOf(s Submitter) float64 {
	if s.Priority <= 0 {
		return 0.5
	}
	return s.Priority
}

// room is what a group may still take in a negotiation (slot weights),
// and whether that stopped a match.
type room struct {
	left   float64
	capped bool
}

// fits reports whether weight fits in the room (always without one),
// noting when it does not.
func (r *room) fits(weight float64) bool {
	if r == nil || weight <= r.left+1e-9 {
		return true
	}
	r.capped = true
	return false
}

// serve matches a submitter's jobs, up to its pie slice when limited, and
// within the room of its group (nil without group quotas). It returns out
// with the matches added.
func serve(out []Match, st *subState, limited bool, r *room, pick func(*autocluster) *Slot, lim *limiter) []Match {
	for _, ac := range st.acs {
		for ac.next < len(ac.jobs) {
			if limited && st.got+ac.cpus > st.limit+1e-9 {
				return out
			}
			if !r.fits(ac.cpus) {
				break
			}
			if lim != nil && !lim.room(ac) {
				break
			}
			sl := pick(ac)
			if sl == nil {
				break
			}
			// A static slot weighs all its cpus, however few the job
			// asks for.
			if !sl.Partitionable && !r.fits(sl.cpus) {
				break
			}
			if lim != nil {
				lim.charge(ac, sl)
			}
			weight := ac.take(sl)
			out = append(out, Match{Submitter: st.s.Name, Schedd: st.s.Schedd, Job: ac.jobs[ac.next], Slot: sl})
			ac.next++
			st.got += weight
			if r != nil {
				r.left -= weight
			}
		}
	}
	return out
}

// autocluster is a set of jobs of one submitter that are identical in every
// attribute matchmaking looks at.
type autocluster struct {
	id       int
	rep      *classad.Ad
	jobs     []Job
	next     int
	cpus     float64
	mem, dsk float64

	prepared bool
	tests    []*memo // the Requirements tests, cheapest first; nil tests with noReq
	noReq    bool    // the job has no Requirements: it matches nothing
	jrank    *memo   // nil: the job's Rank is 0
	mrank    *memo
	pre      *memo  // NEGOTIATOR_PRE_JOB_RANK; nil: none
	post     *memo  // NEGOTIATOR_POST_JOB_RANK; nil: none
	firstFit bool   // every slot ranks the same: take them in order
	pos      int    // first fit: the first slot that may still fit
	heap     []cand // ranked: the matching slots that fitted, best first
	built    bool
}

func (ac *autocluster) fits(s *Slot) bool {
	return !s.taken && s.cpus >= ac.cpus && s.mem >= ac.mem && s.dsk >= ac.dsk
}

// matches reports whether the cluster's jobs and slot i match in both
// directions.
func (ac *autocluster) matches(x *index, i int) bool {
	if ac.noReq {
		return false
	}
	for _, m := range ac.tests {
		if !m.holds(x, ac, i) {
			return false
		}
	}
	return true
}

// pick returns the best slot with room for one more job of the cluster.
// Slots only lose resources during a
// cycle, so a slot that does not fit the cluster once never will again.
func (ac *autocluster) pick(x *index) *Slot {
	if !ac.prepared {
		x.prepare(ac)
	}
	var s *Slot
	if ac.firstFit {
		for ; ac.pos < len(x.slots); ac.pos++ {
			sl := x.slots[ac.pos]
			if ac.fits(sl) && ac.matches(x, ac.pos) {
				s = sl
				break
			}
		}
	} else {
		if !ac.built {
			ac.build(x)
		}
		for len(ac.heap) > 0 {
			sl := x.slots[ac.heap[0].slot]
			if ac.fits(sl) {
				s = sl
				break
			}
			ac.pop()
		}
	}
	return s
}

// take takes the resources of one job of the cluster from slot s (all of
// a static slot) and returns the weight (cpus) charged to the submitter.
func (ac *autocluster) take(s *Slot) float64 {
	if s.Partitionable {
		s.cpus -= ac.cpus
		s.mem -= ac.mem
		s.dsk -= ac.dsk
		return ac.cpus
	}
	s.taken = true
	return s.cpus
}

// cand is a matching slot with the negotiator's, the cluster's and the
// slot's ranks.
type cand struct {
	pre, jrank, post, mrank float64
	slot                    int
}

// better orders candidates as HTCondor's negotiator does: higher
// NEGOTIATOR_PRE_JOB_RANK, then higher job Rank, then higher
// NEGOTIATOR_POST_JOB_RANK; then higher machine Rank and the earlier slot.
func (c cand) better(o cand) bool {
	switch {
	case c.pre != o.pre:
		return c.pre > o.pre
	case c.jrank != o.jrank:
		return c.jrank > o.jrank
	case c.post != o.post:
		return c.post > o.post
	case c.mrank != o.mrank:
		return c.mrank > o.mrank
	}
	return c.slot < o.slot
}

// build collects the slots that fit and match into a heap, best first.
func (ac *autocluster) build(x *index) {
	ac.built = true
	ac.heap = ac.heap[:0]
	for i, s := range x.slots {
		if !ac.fits(s) || !ac.matches(x, i) {
			continue
		}
		c := cand{slot: i}
		if ac.jrank != nil {
			c.jrank = ac.jrank.value(x, ac, i)
		}
		c.mrank = ac.mrank.value(x, ac, i)
		if ac.pre != nil {
			c.pre = ac.pre.value(x, ac, i)
		}
		if ac.post != nil {
			c.post = ac.post.value(x, ac, i)
		}
		ac.heap = append(ac.heap, c)
	}
	for i := len(ac.heap)/2 - 1; i >= 0; i-- {
		ac.down(i)
	}
}

func (ac *autocluster) pop() {
	n := len(ac.heap) - 1
	ac.heap[0] = ac.heap[n]
	ac.heap = ac.heap[:n]
	ac.down(0)
}

func (ac *autocluster) down(i int) {
	h := ac.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		b := l
		if r := l + 1; r < len(h) && h[r].better(h[l]) {
			b = r
		}
		if !h[b].better(h[i]) {
			return
		}
		h[i], h[b] = h[b], h[i]
		i = b
	}
}
