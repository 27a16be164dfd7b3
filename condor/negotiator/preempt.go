package negotiator

import (
	"fmt"
	"math"
	"sort"
	"strings"

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
// (PREEMPTION_RANK, higher first; nil is 0).
type PreemptPolicy struct {
	Consider     bool
	Requirements classad.Expr
	Rank         classad.Expr
}

// ReadPreemptPolicy reads NEGOTIATOR_CONSIDER_PREEMPTION,
// PREEMPTION_REQUIREMENTS and PREEMPTION_RANK from cfg.
func ReadPreemptPolicy(cfg *config.Config) (PreemptPolicy, error) {
	var p PreemptPolicy
	var err error
	if p.Consider, err = cfg.Bool("NEGOTIATOR_CONSIDER_PREEMPTION", true); err != nil {
		return p, fmt.Errorf("NEGOTIATOR_CONSIDER_PREEMPTION: %w", err)
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
	jrank       float64
	state       int
	preemptRank float64
	machineRank float64
}

// better orders preemption candidates as HTCondor's negotiator does:
// higher job Rank, then rank preemption before priority preemption, then
// higher PREEMPTION_RANK, then higher machine Rank, then the earlier slot.
func (c preemptCand) better(o preemptCand) bool {
	switch {
	case c.jrank != o.jrank:
		return c.jrank > o.jrank
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
// Submitters are served best priority first; each job takes the best
// candidate (see preemptCand.better); a slot is taken once a cycle. prio
// gives the effective priority of any user (running or submitting); a
// user it does not know has the best.
func Preempt(claimed []*Slot, subs []Submitter, prio func(user string) float64, matched map[string]int,
	totalCpus float64, pol PreemptPolicy) []Match {
	if !pol.Consider || len(claimed) == 0 {
		return nil
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
			for i, sl := range claimed {
				if taken[i] {
					continue
				}
				c, ok := candidate(sl, job, sub, prio, pol)
				if !ok || c.state == prioPreemption && got+cpus > pie+1e-9 {
					continue
				}
				c.slot = i
				if !found || c.better(best) {
					best, found = c, true
				}
			}
			if !found {
				hopeless[job.Ad] = true
				continue
			}
			taken[best.slot] = true
			if best.state == prioPreemption {
				got += cpus
			}
			out = append(out, Match{Submitter: sub.Name, Schedd: sub.Schedd, Job: job, Slot: claimed[best.slot], Preempt: true})
		}
	}
	return out
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
	out := Preempt(claimed, left, prio, matched, total, pol)
	for _, m := range out {
		n.log.Info("preempting a claimed slot", "slot", m.Slot.Name, "job", m.Job.ID, "submitter", m.Submitter,
			"running_user", m.Slot.Ad.EvalAttr("RemoteUser").String())
	}
	return out
}
