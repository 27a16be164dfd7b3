package negotiator

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pond-htc/pond/condor/config"
)

// RootGroup is the name of the accounting group of the submitters in no
// configured group, as HTCondor names it: the root of the group tree,
// whose quota is the pool less what its subgroups take.
const RootGroup = "<none>"

// GroupTree is the accounting groups of GROUP_NAMES with their quotas, as
// HTCondor's negotiator reads them (hierarchical group quotas): a group
// group_a.b is the child of group_a, a static GROUP_QUOTA_<name> is in
// slot weights (cpus), a GROUP_QUOTA_DYNAMIC_<name> is the fraction of
// its parent's quota left after the static quotas of its siblings.
type GroupTree struct {
	root   *group
	byName map[string]*group // lower-case name -> group
	all    []*group          // breadth first, the root first
	// oversubscribe is NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION: static
	// quotas of subgroups are not scaled down to their parent's.
	oversubscribe bool
	// autoregroup is true when any group has GROUP_AUTOREGROUP: the root
	// group negotiates for the whole pool, with those groups' submitters
	// too.
	autoregroup bool
	// strict is NEGOTIATOR_STRICT_ENFORCE_QUOTA.
	strict bool
	// rounds is GROUP_QUOTA_MAX_ALLOCATION_ROUNDS.
	rounds int
}

// group is one accounting group: its configuration and what a cycle
// works out for it.
type group struct {
	name        string
	parent      *group
	children    []*group
	chmap       map[string]*group // lower-case last component -> child
	configQuota float64
	static      bool
	accept      bool // GROUP_ACCEPT_SURPLUS(_name)
	autoregroup bool // GROUP_AUTOREGROUP(_name)

	// One cycle's figures, in slot weights.
	quota, subtreeQuota         float64
	requested, subtreeRequested float64
	allocated                   float64
	usage, subtreeUsage         float64
	origRequested               float64
	blocked                     int // idle jobs the quota held back
	subs                        int // submitters with idle jobs
}

// GroupKnobPrefixes are the knobs that name a group after their prefix.
var groupKnobPrefixes = []string{"GROUP_QUOTA_DYNAMIC_", "GROUP_ACCEPT_SURPLUS_", "GROUP_AUTOREGROUP_",
	"GROUP_PRIO_FACTOR_", "GROUP_QUOTA_"}

// groupKnobsNotNamingGroups are knobs that begin as a group's knob but
// are knobs of their own.
var groupKnobsNotNamingGroups = map[string]bool{"GROUP_QUOTA_MAX_ALLOCATION_ROUNDS": true,
	"GROUP_QUOTA_ROUND_ROBIN_RATE": true}

// ReadGroups reads GROUP_NAMES and the groups' knobs from cfg. It returns
// nil without GROUP_NAMES (no group quotas: every submitter shares the
// pool by its priority alone), the warnings about configuration HTCondor
// would also ignore or correct (a quota for a group not in GROUP_NAMES, a
// group whose parent is not in it, dynamic quotas of one parent summing
// over 1, which are scaled down), each naming the knob, and an error for
// a value no group could use (a negative or unreadable quota, a dynamic
// quota over 1).
func ReadGroups(cfg *config.Config) (*GroupTree, []string, error) {
	var warns []string
	warnf := func(format string, args ...any) { warns = append(warns, fmt.Sprintf(format, args...)) }
	names := cfg.List("GROUP_NAMES")
	t := &GroupTree{byName: map[string]*group{}}
	t.root = &group{name: RootGroup, accept: true, chmap: map[string]*group{}}
	t.byName[strings.ToLower(RootGroup)] = t.root
	var err error
	if t.oversubscribe, err = cfg.Bool("NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION", true); err != nil {
		return nil, nil, err
	}
	if t.strict, err = cfg.Bool("NEGOTIATOR_STRICT_ENFORCE_QUOTA", true); err != nil {
		return nil, nil, err
	}
	if t.rounds, err = cfg.Int("GROUP_QUOTA_MAX_ALLOCATION_ROUNDS", 3); err != nil {
		return nil, nil, err
	}
	if t.rounds < 1 {
		return nil, nil, fmt.Errorf("GROUP_QUOTA_MAX_ALLOCATION_ROUNDS = %d: want 1 or more", t.rounds)
	}
	defAccept, err := cfg.Bool("GROUP_ACCEPT_SURPLUS", false)
	if err != nil {
		return nil, nil, err
	}
	defRegroup, err := cfg.Bool("GROUP_AUTOREGROUP", false)
	if err != nil {
		return nil, nil, err
	}
	t.autoregroup = defRegroup
	// A parent sorts before its children.
	sort.SliceStable(names, func(i, j int) bool { return strings.ToLower(names[i]) < strings.ToLower(names[j]) })
	for _, name := range names {
		if strings.EqualFold(name, RootGroup) {
			warnf("GROUP_NAMES: %s is the name of the group of submitters in no group: ignored", RootGroup)
			continue
		}
		path := strings.Split(name, ".")
		if strings.Contains(name, "..") || path[0] == "" || path[len(path)-1] == "" {
			return nil, nil, fmt.Errorf("GROUP_NAMES: %q is no group name (names separated by periods)", name)
		}
		parent, missing := t.root, ""
		for i, p := range path[:len(path)-1] {
			c, ok := parent.chmap[strings.ToLower(p)]
			if !ok {
				missing = strings.Join(path[:i+1], ".")
				break
			}
			parent = c
		}
		if missing != "" {
			warnf("GROUP_NAMES: group %s is ignored: its parent group %s is not in GROUP_NAMES", name, missing)
			continue
		}
		last := strings.ToLower(path[len(path)-1])
		if _, dup := parent.chmap[last]; dup {
			warnf("GROUP_NAMES: group %s is named twice", name)
			continue
		}
		g := &group{name: name, parent: parent, chmap: map[string]*group{}}
		parent.children = append(parent.children, g)
		parent.chmap[last] = g
		t.byName[strings.ToLower(name)] = g
		if err := readGroupKnobs(cfg, g, defAccept, defRegroup, warnf); err != nil {
			return nil, nil, err
		}
		t.autoregroup = t.autoregroup || g.autoregroup
	}
	// Knobs of groups GROUP_NAMES does not name.
	for _, k := range cfg.Names() {
		up := strings.ToUpper(k)
		if groupKnobsNotNamingGroups[up] {
			continue
		}
		for _, p := range groupKnobPrefixes {
			if !strings.HasPrefix(up, p) {
				continue
			}
			if _, ok := t.byName[strings.ToLower(k[len(p):])]; !ok {
				warnf("%s: group %s is not in GROUP_NAMES: the knob is ignored", k, k[len(p):])
			}
			break
		}
	}
	// Dynamic quotas of one parent summing over 1 are scaled down.
	for _, g := range t.walk() {
		var sum float64
		for _, c := range g.children {
			if !c.static {
				sum += c.configQuota
			}
		}
		if sum > 1+1e-9 {
			var knobs []string
			for _, c := range g.children {
				if !c.static && c.configQuota > 0 {
					knobs = append(knobs, "GROUP_QUOTA_DYNAMIC_"+c.name)
				}
			}
			warnf("%s sum to %g, over 1: each is scaled down by that sum", strings.Join(knobs, ", "), sum)
		}
	}
	if len(t.root.children) == 0 {
		return nil, warns, nil
	}
	t.all = t.walk()
	return t, warns, nil
}

// readGroupKnobs reads a group's quota, surplus and autoregroup knobs.
func readGroupKnobs(cfg *config.Config, g *group, defAccept, defRegroup bool, warnf func(string, ...any)) error {
	static, dynamic := "GROUP_QUOTA_"+g.name, "GROUP_QUOTA_DYNAMIC_"+g.name
	sv, hasStatic, err := readQuota(cfg, static)
	if err != nil {
		return err
	}
	dv, hasDynamic, err := readQuota(cfg, dynamic)
	if err != nil {
		return err
	}
	if hasDynamic && dv > 1 {
		return fmt.Errorf("%s = %g: a dynamic quota is a fraction of the parent group's, 0 to 1", dynamic, dv)
	}
	switch {
	case hasStatic:
		g.configQuota, g.static = sv, true
		if hasDynamic {
			warnf("%s and %s are both set: the static quota %g is used, as HTCondor does", static, dynamic, sv)
		}
	case hasDynamic:
		g.configQuota = dv
	default:
		warnf("group %s has neither %s nor %s: its quota is 0", g.name, static, dynamic)
	}
	if v, ok := cfg.Get("GROUP_PRIO_FACTOR_" + g.name); ok && strings.TrimSpace(v) != "" {
		warnf("GROUP_PRIO_FACTOR_%s is not read: the group's users have DEFAULT_PRIO_FACTOR", g.name)
	}
	if g.accept, err = cfg.Bool("GROUP_ACCEPT_SURPLUS_"+g.name, defAccept); err != nil {
		return err
	}
	if g.autoregroup, err = cfg.Bool("GROUP_AUTOREGROUP_"+g.name, defRegroup); err != nil {
		return err
	}
	return nil
}

// readQuota reads a quota knob: a number, 0 or more.
func readQuota(cfg *config.Config, knob string) (float64, bool, error) {
	v, ok := cfg.Get(knob)
	if !ok || strings.TrimSpace(v) == "" {
		return 0, false, nil
	}
	f, err := cfg.Float(knob, 0)
	if err != nil {
		return 0, false, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false, fmt.Errorf("%s = %s: a quota is a number, 0 or more", knob, strings.TrimSpace(v))
	}
	return f, true, nil
}

// walk lists the groups breadth first, the root first.
func (t *GroupTree) walk() []*group {
	out := []*group{t.root}
	for i := 0; i < len(out); i++ {
		out = append(out, out[i].children...)
	}
	return out
}

// GroupOf returns the accounting group a submitter (group.user@domain,
// or user@domain) negotiates in, as HTCondor assigns it: the name before
// the last period, walked down the tree as far as its groups are
// configured; RootGroup for a submitter without a group.
func (t *GroupTree) GroupOf(submitter string) string {
	return t.groupOf(submitter).name
}

func (t *GroupTree) groupOf(submitter string) *group {
	at := strings.LastIndexByte(submitter, '@')
	if at < 0 {
		return t.root
	}
	name := submitter[:at]
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return t.root
	}
	g := t.root
	for _, p := range strings.Split(name[:dot], ".") {
		c, ok := g.chmap[strings.ToLower(p)]
		if !ok {
			break
		}
		g = c
	}
	return g
}

// assignQuotas gives each group its share of quota, the quota of g's
// subtree (hgq_assign_quotas).
func (t *GroupTree) assignQuotas(g *group, quota float64) {
	if quota <= 0 {
		return
	}
	g.subtreeQuota = quota
	var sqsum, dqsum float64
	for _, c := range g.children {
		if c.static {
			sqsum += c.configQuota
		} else {
			dqsum += c.configQuota
		}
	}
	sqa := sqsum
	if !t.oversubscribe {
		sqa = min(sqsum, quota)
	}
	dqa := max(0, quota-sqa)
	zs := sqsum
	if zs <= 0 {
		zs = 1
	}
	zd := max(dqsum, 1)
	var chq float64
	for _, c := range g.children {
		q := c.configQuota * (dqa / zd)
		if c.static {
			q = c.configQuota * (sqa / zs)
		}
		q = max(q, 0)
		t.assignQuotas(c, q)
		chq += q
	}
	g.quota = quota
	if !t.oversubscribe || g == t.root {
		g.quota = quota - chq
	}
	g.quota = max(g.quota, 0)
}

// fairshare allocates to every group of g's subtree the smaller of what
// it requests and its quota, and the surplus to those that accept it;
// it returns the surplus left (hgq_fairshare).
func (t *GroupTree) fairshare(g *group) float64 {
	g.allocated = min(g.requested, g.quota)
	g.requested -= g.allocated
	g.subtreeRequested = g.requested
	surplus := g.quota - g.allocated
	if len(g.children) == 0 {
		return surplus
	}
	for _, c := range g.children {
		surplus += t.fairshare(c)
		if c.accept {
			g.subtreeRequested += c.subtreeRequested
		}
	}
	return allocateSurplus(g, surplus)
}

// allocateSurplus shares surplus between g and its children that accept
// it, as much as each asks for when there is enough, else by quota then
// evenly (hgq_allocate_surplus); it returns what nobody took.
func allocateSurplus(g *group, surplus float64) float64 {
	if surplus <= 0 {
		return 0
	}
	if g.subtreeRequested <= 0 {
		return surplus
	}
	groups := append(append([]*group(nil), g.children...), g)
	allocated := make([]float64, len(groups))
	saveAccept, saveSubtreeQuota := g.accept, g.subtreeQuota
	g.accept, g.subtreeQuota = true, g.quota
	requested := g.subtreeRequested
	g.subtreeRequested = g.requested
	if surplus >= requested {
		for j, grp := range groups {
			if grp.accept && grp.subtreeRequested > 0 {
				allocated[j] = grp.subtreeRequested
			}
		}
		surplus -= requested
		requested = 0
	} else {
		req := make([]float64, len(groups))
		for j, grp := range groups {
			if grp.accept && grp.subtreeRequested > 0 {
				req[j] = grp.subtreeRequested
			}
		}
		surplusLoop(true, groups, allocated, req, &surplus, &requested)
		surplusLoop(false, groups, allocated, req, &surplus, &requested)
	}
	for j, grp := range groups[:len(groups)-1] {
		if allocated[j] > 0 {
			allocateSurplus(grp, allocated[j])
		}
	}
	g.allocated += allocated[len(allocated)-1]
	g.requested -= allocated[len(allocated)-1]
	g.subtreeRequested = requested
	g.accept, g.subtreeQuota = saveAccept, saveSubtreeQuota
	return surplus
}

// surplusLoop shares surplus between the groups still requesting, in
// proportion to their subtree quotas (byQuota) or evenly.
func surplusLoop(byQuota bool, groups []*group, allocated, req []float64, surplus, requested *float64) {
	for iter := 0; *surplus > 0 && iter < 1000; iter++ {
		var z float64
		for j, grp := range groups {
			if req[j] > 0 {
				if byQuota {
					z += grp.subtreeQuota
				} else {
					z++
				}
			}
		}
		if z <= 0 {
			return
		}
		neverGT := true
		var sum float64
		for j, grp := range groups {
			if req[j] <= 0 {
				continue
			}
			n := 1.0
			if byQuota {
				n = grp.subtreeQuota
			}
			a := *surplus * (n / z)
			if a > req[j] {
				a, neverGT = req[j], false
			}
			allocated[j] += a
			req[j] -= a
			sum += a
		}
		*surplus -= sum
		*requested -= sum
		if neverGT || *surplus < 1e-9 {
			*surplus = 0
		}
	}
}

// subtreeUsage sums each group's usage with its subgroups'.
func subtreeUsage(g *group) float64 {
	u := g.usage
	for _, c := range g.children {
		u += subtreeUsage(c)
	}
	g.subtreeUsage = u
	return u
}

// strictCap bounds what g may reach (target, in slot weights) by its
// own and its ancestors' quotas where they accept no surplus
// (NEGOTIATOR_STRICT_ENFORCE_QUOTA).
func (t *GroupTree) strictCap(g *group, target float64) float64 {
	if !t.strict {
		return target
	}
	subtreeUsage(t.root)
	add := target - g.usage
	for l := g; l != nil; l = l.parent {
		if l.accept {
			continue
		}
		avail := l.subtreeQuota - l.subtreeUsage
		if l.static {
			avail = l.configQuota - l.subtreeUsage
		}
		add = min(add, max(avail, 0))
	}
	return add + g.usage
}

// sortKey is HTCondor's default GROUP_SORT_EXPR: the share of its
// allocation a group uses, starved first; groups with none allocated
// after, the root group last.
func (t *GroupTree) sortKey(g *group) float64 {
	switch {
	case g == t.root:
		return 3.4e38
	case g.allocated > 0:
		return g.usage / g.allocated
	}
	return 3.3e38
}

// GroupQuota is what a negotiation cycle worked out for one accounting
// group, in slot weights (cpus), as condor_userprio -quotas shows it.
type GroupQuota struct {
	Name string
	// ConfigQuota is GROUP_QUOTA_<name> (Static) or
	// GROUP_QUOTA_DYNAMIC_<name>, a fraction of the parent's.
	ConfigQuota float64
	Static      bool
	// Quota is the group's own effective quota, SubtreeQuota that of the
	// group and its subgroups.
	Quota        float64
	SubtreeQuota float64
	// AcceptSurplus is GROUP_ACCEPT_SURPLUS(_<name>).
	AcceptSurplus bool
	// Requested is what its submitters run and want to run; Allocated
	// what the cycle allowed it; Usage what it runs.
	Requested float64
	Allocated float64
	Usage     float64
	// Submitters is how many of its submitters had idle jobs; Blocked the
	// idle jobs its quota held back.
	Submitters int
	Blocked    int
}

// report returns the groups' figures of the cycle.
func (t *GroupTree) report() []GroupQuota {
	out := make([]GroupQuota, 0, len(t.all))
	for _, g := range t.all {
		out = append(out, GroupQuota{Name: g.name, ConfigQuota: g.configQuota, Static: g.static, Quota: g.quota,
			SubtreeQuota: g.subtreeQuota, AcceptSurplus: g.accept, Requested: g.origRequested,
			Allocated: g.allocated, Usage: g.usage, Submitters: g.subs, Blocked: g.blocked})
	}
	return out
}

// clone returns a copy of the tree for one cycle's figures.
func (t *GroupTree) clone() *GroupTree {
	c := *t
	c.byName = map[string]*group{}
	var cp func(g, parent *group) *group
	cp = func(g, parent *group) *group {
		n := &group{name: g.name, parent: parent, chmap: map[string]*group{}, configQuota: g.configQuota,
			static: g.static, accept: g.accept, autoregroup: g.autoregroup}
		c.byName[strings.ToLower(g.name)] = n
		for _, ch := range g.children {
			k := cp(ch, n)
			n.children = append(n.children, k)
			last := ch.name[strings.LastIndexByte(ch.name, '.')+1:]
			n.chmap[strings.ToLower(last)] = k
		}
		return n
	}
	c.root = cp(t.root, nil)
	c.all = c.walk()
	return &c
}

// groupCycle is one negotiation cycle with group quotas: the groups, the
// pool's size and what each submitter's claims hold, in slot weights.
type groupCycle struct {
	t     *GroupTree
	total float64
	usage map[string]float64
}

// newGroupCycle prepares a cycle of t (nil: no group quotas) over a pool
// of total slot weight whose submitters hold usage.
func newGroupCycle(t *GroupTree, total float64, usage map[string]float64) *groupCycle {
	if t == nil {
		return nil
	}
	return &groupCycle{t: t.clone(), total: total, usage: usage}
}

// negotiate serves the submitters group by group, as HTCondor's
// negotiator does with hierarchical group quotas: each group's quota is
// worked out from the pool's size, each is allocated the smaller of its
// quota and what it requests (its usage and idle jobs), the surplus goes
// to the groups that accept it, and the groups negotiate, starved first,
// each up to its allocation, its submitters sharing it by priority. The
// allocation is worked out again (GROUP_QUOTA_MAX_ALLOCATION_ROUNDS)
// while some group could not use all of its own.
func (gc *groupCycle) negotiate(states []*subState, pick func(*autocluster) *Slot, lim *limiter) []Match {
	t := gc.t
	for name, u := range gc.usage {
		t.groupOf(name).usage += u
	}
	members := map[*group][]*subState{}
	for _, st := range states {
		g := t.groupOf(st.s.Name)
		st.grp = g
		members[g] = append(members[g], st)
		g.subs++
		for _, ac := range st.acs {
			g.requested += float64(len(ac.jobs)) * ac.cpus
		}
	}
	for _, g := range t.all {
		g.requested += g.usage
		g.origRequested = g.requested
	}
	if t.autoregroup {
		for _, g := range t.all[1:] {
			if g.autoregroup {
				members[t.root] = append(members[t.root], members[g]...)
			}
		}
	}
	t.assignQuotas(t.root, gc.total)
	capped := map[*group]bool{}
	var out []Match
	for round := 0; round < t.rounds; round++ {
		for _, g := range t.all {
			g.allocated, g.subtreeRequested = 0, 0
		}
		t.fairshare(t.root)
		if t.autoregroup {
			t.root.quota, t.root.allocated = gc.total, gc.total
		}
		order := append([]*group(nil), t.all...)
		sort.SliceStable(order, func(i, j int) bool { return t.sortKey(order[i]) < t.sortKey(order[j]) })
		for _, g := range order {
			ms := members[g]
			if g.allocated <= 0 || len(ms) == 0 {
				continue
			}
			target := t.strictCap(g, max(g.allocated, g.quota))
			r := &room{left: target - g.usage}
			if round == 0 {
				setPies(ms, target, lim)
			} else {
				setPies(ms, target, nil)
			}
			for _, limited := range []bool{true, false} {
				for _, st := range ms {
					before := st.got
					out = serve(out, st, limited, r, pick, lim)
					st.grp.usage += st.got - before
				}
			}
			if r.capped || r.left < 1e-9 {
				capped[g] = true
			}
		}
		var used, allocated float64
		for _, g := range t.all {
			used += min(g.usage, g.allocated)
			allocated += g.allocated
			if g.usage < g.allocated {
				g.requested = g.usage
			} else {
				g.requested += g.allocated
			}
		}
		if used >= allocated {
			break
		}
	}
	for g := range capped {
		for _, st := range members[g] {
			if st.grp != g && g == t.root {
				continue
			}
			for _, ac := range st.acs {
				g.blocked += len(ac.jobs) - ac.next
			}
		}
	}
	return out
}

// roomLeft is what the group of submitter may still take this cycle.
func (gc *groupCycle) roomLeft(submitter string) (*group, float64) {
	g := gc.t.groupOf(submitter)
	target := gc.t.strictCap(g, max(g.allocated, g.quota))
	if g.allocated <= 0 {
		target = g.usage
	}
	return g, target - g.usage
}

// filterPreemptions drops the preemptions that would take a group past
// what it may take this cycle.
func (gc *groupCycle) filterPreemptions(ms []Match) []Match {
	if gc == nil {
		return ms
	}
	out := ms[:0]
	for _, m := range ms {
		g, left := gc.roomLeft(m.Submitter)
		w := max(m.Job.Ad.EvalNumber("RequestCpus", nil, 1), 1)
		if w > left+1e-9 {
			g.blocked++
			continue
		}
		g.usage += w
		out = append(out, m)
	}
	return out
}
