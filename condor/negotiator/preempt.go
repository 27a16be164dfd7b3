package negotiator

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// Preemption states of a claimed slot for a job, as HTCondor's negotiator
// names them: a slot the machine ranks the job higher on than the job it
// runs is preempted by rank; one whose running job's user has a worse
// priority than the job's, and whose PREEMPTION_REQUIREMENTS hold, by
// priority.
const (
	noPreemption = iota
	rankPreemption
	prioPreemption
)

// PreemptPolicy is the negotiator's preemption policy: whether claimed
// slots are considered at all (NEGOTIATOR_CONSIDER_PREEMPTION), when a
// user of better priority may take a claimed slot
// (PREEMPTION_REQUIREMENTS, MY the slot, TARGET the job; nil is False,
// HTCondor's default) and which of the slots it could take it takes first
// (PREEMPTION_RANK, higher first; nil is 0). Pslot
// (ALLOW_PSLOT_PREEMPTION, default False) lets a job that does not fit a
// partitionable slot's free resources preempt as many of its dynamic
// slots as it needs at once; dynamic slots are then no longer preempted
// one by one. Ranks are the pool's job ranks, which order the claimed
// slots a job could take before anything else (see preemptCand.better).
type PreemptPolicy struct {
	Consider     bool
	Requirements classad.Expr
	Rank         classad.Expr
	Pslot        bool
	Ranks        JobRanks
}

// ReadPreemptPolicy reads NEGOTIATOR_CONSIDER_PREEMPTION,
// PREEMPTION_REQUIREMENTS and PREEMPTION_RANK from cfg.
func ReadPreemptPolicy(cfg *config.Config) (PreemptPolicy, error) {
	var p PreemptPolicy
	var err error
	if p.Consider, err = cfg.Bool("NEGOTIATOR_CONSIDER_PREEMPTION", true); err != nil {
		return p, fmt.Errorf("NEGOTIATOR_CONSIDER_PREEMPTION: %w", err)
	}
	if p.Pslot, err = cfg.Bool("ALLOW_PSLOT_PREEMPTION", false); err != nil {
		return p, fmt.Errorf("ALLOW_PSLOT_PREEMPTION: %w", err)
	}
	for _, k := range []struct {
		name string
		into *classad.Expr
	}{{"PREEMPTION_REQUIREMENTS", &p.Requirements}, {"PREEMPTION_RANK", &p.Rank}} {
		v, ok := cfg.Get(k.name)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		e, err := classad.ParseExpr(v)
		if err != nil {
			return p, fmt.Errorf("%s = %s: %w", k.name, v, err)
		}
		*k.into = e
	}
	return p, nil
}

// claimedInfo is what a claimed slot's ad says of the job it runs: the
// machine's Rank of it (CurrentRank) and its user (RemoteUser).
func claimedInfo(ad *classad.Ad) (rank float64, user string) {
	rank = ad.EvalNumber("CurrentRank", nil, 0)
	if math.IsNaN(rank) {
		rank = 0
	}
	user, _ = ad.EvalAttr("RemoteUser").StringValue()
	return rank, user
}

// preemptCand is a claimed slot a job could take, with what orders it.
type preemptCand struct {
	slot        int
	pre, post   float64
	jrank       float64
	state       int
	preemptRank float64
	machineRank float64
}

// better orders preemption candidates as HTCondor's negotiator does:
// higher NEGOTIATOR_PRE_JOB_RANK, then higher job Rank, then higher
// NEGOTIATOR_POST_JOB_RANK, then rank preemption before priority
// preemption, then higher PREEMPTION_RANK; then higher machine Rank and
// the earlier slot.
func (c preemptCand) better(o preemptCand) bool {
	switch {
	case c.pre != o.pre:
		return c.pre > o.pre
	case c.jrank != o.jrank:
		return c.jrank > o.jrank
	case c.post != o.post:
		return c.post > o.post
	case c.state != o.state:
		return c.state < o.state
	case c.preemptRank != o.preemptRank:
		return c.preemptRank > o.preemptRank
	case c.machineRank != o.machineRank:
		return c.machineRank > o.machineRank
	}
	return c.slot < o.slot
}

// Preempt matches the jobs the free slots could not take to claimed slots
// (each with its preempting claim id), as HTCondor's negotiator preempts:
//
//   - by rank: the slot's machine Rank of the job is higher than that of
//     the job it runs (its CurrentRank), whoever's jobs they are;
//   - by priority: the machine ranks the job no lower, the running job's
//     user (RemoteUser) is another one of a worse (higher) effective
//     priority, and pol.Requirements holds (MY the slot, with
//     RemoteUserPrio, TARGET the job, with SubmitterUserPrio). A submitter
//     preempts by priority only up to its fair share of all the slots'
//     cpus (its pie slice), counting what it runs and what it was matched
//     in this cycle (matched, by submitter name).
//
// With pol.Pslot, a job may also take a partitionable slot of free (with
// the resources this cycle left it) together with dynamic slots of it
// from claimed that it may preempt, as HTCondor's ALLOW_PSLOT_PREEMPTION:
// see pslotCandidate. Dynamic slots are then not preempted one by one.
//
// Submitters are served best priority first; each job takes the best
// candidate (see preemptCand.better); a slot is taken once a cycle. prio
// gives the effective priority of any user (running or submitting); a
// user it does not know has the best.
func Preempt(free, claimed []*Slot, subs []Submitter, prio func(user string) float64, matched map[string]int,
	totalCpus float64, pol PreemptPolicy) []Match {
	if !pol.Consider || len(claimed) == 0 {
		return nil
	}
	// With pslot preemption, the dynamic slots of each partitionable
	// slot, by index in claimed.
	var pslots []*Slot
	var kids [][]int
	if pol.Pslot {
		for _, p := range free {
			if !p.Partitionable {
				continue
			}
			var ks []int
			for i, c := range claimed {
				if isDynamicOf(c, p) {
					ks = append(ks, i)
				}
			}
			if len(ks) > 0 {
				pslots = append(pslots, p)
				kids = append(kids, ks)
			}
		}
	}
	order := make([]int, len(subs))
	var inv float64
	for i := range subs {
		order[i] = i
		inv += 1 / max(subs[i].Priority, 0.5)
	}
	sort.SliceStable(order, func(a, b int) bool { return subs[order[a]].Priority < subs[order[b]].Priority })
	taken := make([]bool, len(claimed))
	var out []Match
	for _, k := range order {
		sub := subs[k]
		pie := math.Ceil(totalCpus*(1/max(sub.Priority, 0.5))/inv) - float64(sub.Running) - float64(matched[sub.Name])
		var got float64
		// Jobs sharing an ad (one autocluster) that found no slot: the
		// others of it find none either.
		hopeless := map[*classad.Ad]bool{}
		for _, job := range sub.Jobs {
			if hopeless[job.Ad] {
				continue
			}
			cpus := max(job.Ad.EvalNumber("RequestCpus", nil, 1), 1)
			best, found := preemptCand{}, false
			var bestVictims []int
			bestPslot := -1
			for i, sl := range claimed {
				if taken[i] || pol.Pslot && isDynamic(sl) {
					continue
				}
				c, ok := candidate(sl, job, sub, prio, pol)
				if !ok || c.state == prioPreemption && got+cpus > pie+1e-9 {
					continue
				}
				c.slot = i
				if !found || c.better(best) {
					best, found, bestPslot, bestVictims = c, true, -1, nil
				}
			}
			for pi, p := range pslots {
				c, victims, ok := pslotCandidate(p, claimed, kids[pi], taken, job, sub, prio, pol)
				if !ok || c.state == prioPreemption && got+cpus > pie+1e-9 {
					continue
				}
				// After the claimed slots, in slot order.
				c.slot = len(claimed) + pi
				if !found || c.better(best) {
					best, found, bestPslot, bestVictims = c, true, pi, victims
				}
			}
			if !found {
				hopeless[job.Ad] = true
				continue
			}
			if best.state == prioPreemption {
				got += cpus
			}
			if bestPslot < 0 {
				taken[best.slot] = true
				out = append(out, Match{Submitter: sub.Name, Schedd: sub.Schedd, Job: job, Slot: claimed[best.slot], Preempt: true})
				continue
			}
			p := pslots[bestPslot]
			m := Match{Submitter: sub.Name, Schedd: sub.Schedd, Job: job, Slot: p, Preempt: true}
			for _, v := range bestVictims {
				taken[v] = true
				p.cpus += claimed[v].cpus
				p.mem += claimed[v].mem
				p.dsk += claimed[v].dsk
				m.Victims = append(m.Victims, claimed[v])
			}
			// The schedd matches the job against the slot as the
			// preemption leaves it.
			m.ad = p.Ad.Copy()
			m.ad.SetReal("Cpus", p.cpus)
			m.ad.SetReal("Memory", p.mem)
			m.ad.SetReal("Disk", p.dsk)
			p.cpus -= cpus
			p.mem -= job.Ad.EvalNumber("RequestMemory", nil, 0)
			p.dsk -= job.Ad.EvalNumber("RequestDisk", nil, 0)
			out = append(out, m)
		}
	}
	return out
}

// isDynamic reports whether a slot is a dynamic slot.
func isDynamic(sl *Slot) bool {
	d, _ := sl.Ad.EvalAttr("DynamicSlot").BoolValue()
	if d {
		return true
	}
	t, _ := sl.Ad.EvalAttr("SlotType").StringValue()
	return t == "Dynamic"
}

// isDynamicOf reports whether the claimed slot c is a dynamic slot of the
// partitionable slot p: of the same startd and the same SlotID.
func isDynamicOf(c, p *Slot) bool {
	if c.Startd != p.Startd || !isDynamic(c) {
		return false
	}
	a, ok1 := c.Ad.EvalAttr("SlotID").IntValue()
	b, ok2 := p.Ad.EvalAttr("SlotID").IntValue()
	if !ok1 || !ok2 || a != b {
		return false
	}
	// Of the same machine too, when the ads say.
	cm, _ := c.Ad.EvalAttr("Machine").StringValue()
	pm, _ := p.Ad.EvalAttr("Machine").StringValue()
	return cm == pm
}

// retirementLeft is how many seconds of retirement the job a claimed slot
// runs has left: its RetirementTimeRemaining, less the time since the
// collector heard of the slot.
func retirementLeft(ad *classad.Ad, now time.Time) float64 {
	r := ad.EvalNumber("RetirementTimeRemaining", nil, 0)
	if math.IsNaN(r) || r <= 0 {
		return 0
	}
	if t, ok := ad.EvalAttr("LastHeardFrom").IntValue(); ok && t > 0 {
		r -= float64(now.Unix() - t)
	}
	return max(r, 0)
}

// pslotCandidate tells whether job (of sub) may take the partitionable
// slot p by preempting some of its dynamic slots (kids, indexes in
// claimed, those not taken yet), as HTCondor's negotiator does with
// ALLOW_PSLOT_PREEMPTION: of the dynamic slots the job may preempt (by
// rank or by priority, as a static slot: see candidate) and whose jobs
// have no retirement time left, the lowest CurrentRank first, it adds
// each one's cpus, memory and disk to p's free ones until the job fits
// and matches p with them. It returns the candidate and the dynamic
// slots to preempt (at least one).
func pslotCandidate(p *Slot, claimed []*Slot, kids []int, taken []bool, job Job, sub Submitter,
	prio func(string) float64, pol PreemptPolicy) (preemptCand, []int, bool) {
	type victim struct {
		i    int
		cur  float64
		cand preemptCand
	}
	now := time.Now()
	var vs []victim
	for _, i := range kids {
		if taken[i] {
			continue
		}
		k := claimed[i]
		if retirementLeft(k.Ad, now) > 0 {
			continue
		}
		c, ok := victimState(k, job, sub, prio, pol)
		if !ok {
			continue
		}
		cur, _ := claimedInfo(k.Ad)
		vs = append(vs, victim{i: i, cur: cur, cand: c})
	}
	if len(vs) == 0 {
		return preemptCand{}, nil, false
	}
	sort.SliceStable(vs, func(a, b int) bool {
		if vs[a].cur != vs[b].cur {
			return vs[a].cur < vs[b].cur
		}
		return claimed[vs[a].i].Name < claimed[vs[b].i].Name
	})
	ad := p.Ad.Copy()
	cpus, mem, dsk := p.cpus, p.mem, p.dsk
	var out []int
	c := vs[0].cand
	for _, v := range vs {
		k := claimed[v.i]
		cpus, mem, dsk = cpus+k.cpus, mem+k.mem, dsk+k.dsk
		out = append(out, v.i)
		// A victim of priority preemption makes it one; PREEMPTION_RANK
		// is the first victim's.
		c.state = max(c.state, v.cand.state)
		ad.SetReal("Cpus", cpus)
		ad.SetReal("Memory", mem)
		ad.SetReal("Disk", dsk)
		if job.Ad.EvalNumber("RequestCpus", ad, 1) > cpus || job.Ad.EvalNumber("RequestMemory", ad, 0) > mem ||
			job.Ad.EvalNumber("RequestDisk", ad, 0) > dsk || !classad.Match(job.Ad, ad) {
			continue
		}
		c.jrank = classad.Rank(job.Ad, ad)
		if math.IsNaN(c.jrank) {
			c.jrank = 0
		}
		c.machineRank = classad.Rank(ad, job.Ad)
		if math.IsNaN(c.machineRank) {
			c.machineRank = 0
		}
		c.pre, c.post = pol.Ranks.eval(ad, job.Ad)
		return c, out, true
	}
	return preemptCand{}, nil, false
}

// candidate tells whether job (of sub) may preempt the claimed slot sl,
// and how it ranks.
func candidate(sl *Slot, job Job, sub Submitter, prio func(string) float64, pol PreemptPolicy) (preemptCand, bool) {
	var c preemptCand
	if job.Ad.EvalNumber("RequestCpus", sl.Ad, 1) > sl.cpus ||
		job.Ad.EvalNumber("RequestMemory", sl.Ad, 0) > sl.mem ||
		job.Ad.EvalNumber("RequestDisk", sl.Ad, 0) > sl.dsk {
		return c, false
	}
	if !classad.Match(job.Ad, sl.Ad) {
		return c, false
	}
	return victimState(sl, job, sub, prio, pol)
}

// victimState tells whether job (of sub) may preempt the job the claimed
// slot sl runs, by rank or by priority, whatever the slot's size, and
// how it ranks.
func victimState(sl *Slot, job Job, sub Submitter, prio func(string) float64, pol PreemptPolicy) (preemptCand, bool) {
	var c preemptCand
	cur, remote := claimedInfo(sl.Ad)
	mrank := classad.Rank(sl.Ad, job.Ad)
	if math.IsNaN(mrank) {
		mrank = 0
	}
	switch {
	case mrank > cur:
		c.state = rankPreemption
	case mrank == cur && remote != "" && remote != sub.Name:
		remotePrio, subPrio := prio(remote), sub.Priority
		if !(remotePrio > subPrio) || pol.Requirements == nil {
			return c, false
		}
		my, target := sl.Ad.Copy(), job.Ad.Copy()
		my.SetReal("RemoteUserPrio", remotePrio)
		target.SetReal("SubmitterUserPrio", subPrio)
		if !classad.EvalWith(pol.Requirements, my, target).IsTrue() {
			return c, false
		}
		c.state = prioPreemption
	default:
		return c, false
	}
	c.jrank = classad.Rank(job.Ad, sl.Ad)
	if math.IsNaN(c.jrank) {
		c.jrank = 0
	}
	c.machineRank = mrank
	c.pre, c.post = pol.Ranks.eval(sl.Ad, job.Ad)
	if pol.Rank != nil {
		my, target := sl.Ad.Copy(), job.Ad.Copy()
		my.SetReal("RemoteUserPrio", prio(remote))
		target.SetReal("SubmitterUserPrio", sub.Priority)
		if f, ok := classad.EvalWith(pol.Rank, my, target).NumberValue(); ok && !math.IsNaN(f) {
			c.preemptRank = f
		}
	}
	return c, true
}

// preemptions matches the jobs the free slots left unmatched to the
// claimed slots (see Preempt).
func (n *Negotiator) preemptions(free, claimed []*Slot, subs []Submitter, matches []Match, pol PreemptPolicy) []Match {
	if !pol.Consider || len(claimed) == 0 {
		return nil
	}
	taken := map[string]bool{}
	matched := map[string]int{}
	for _, m := range matches {
		taken[m.Job.ID] = true
		matched[m.Submitter]++
	}
	left := make([]Submitter, 0, len(subs))
	for _, s := range subs {
		var jobs []Job
		for _, j := range s.Jobs {
			if !taken[j.ID] {
				jobs = append(jobs, j)
			}
		}
		if len(jobs) > 0 {
			s.Jobs = jobs
			left = append(left, s)
		}
	}
	var total float64
	for _, s := range free {
		total += max(s.Ad.EvalNumber("Cpus", nil, 0), 0)
	}
	for _, s := range claimed {
		total += max(s.cpus, 0)
	}
	n.mu.Lock()
	usage := make(map[string]float64, len(n.usage))
	for k, v := range n.usage {
		usage[k] = v
	}
	factor, nice := n.factor, n.niceFactor
	n.mu.Unlock()
	prio := func(user string) float64 { return math.Max(usage[user], 0.5) * prioFactor(user, factor, nice) }
	out := Preempt(free, claimed, left, prio, matched, total, pol)
	for _, m := range out {
		if len(m.Victims) > 0 {
			names := make([]string, len(m.Victims))
			for i, v := range m.Victims {
				names[i] = v.Name
			}
			n.log.Info("preempting dynamic slots of a partitionable slot", "slot", m.Slot.Name, "job", m.Job.ID,
				"submitter", m.Submitter, "dynamic_slots", strings.Join(names, ","))
			continue
		}
		n.log.Info("preempting a claimed slot", "slot", m.Slot.Name, "job", m.Job.ID, "submitter", m.Submitter,
			"running_user", m.Slot.Ad.EvalAttr("RemoteUser").String())
	}
	return out
}
