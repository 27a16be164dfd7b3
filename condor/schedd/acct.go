package schedd

import (
	"strings"

	"github.com/pond-htc/pond/condor/classad"
)

// submitterOf is the submitter a job's owner submits it as: its
// AccountingGroup ("group.user", from accounting_group and
// accounting_group_user), as HTCondor's schedd advertises and the
// negotiator's fair share counts it, or the owner when it has none (or
// one that is no name).
func submitterOf(owner string, ad *classad.Ad) string {
	g, ok := ad.EvalAttr("AccountingGroup").StringValue()
	if !ok || !acctName(g) {
		return owner
	}
	return g
}

// acctName reports whether g may name an accounting group submitter: 1 to
// 255 characters of letters, digits and "._-", as group and user names
// are; anything else would garble the submitter's name.
func acctName(g string) bool {
	if g == "" || len(g) > 255 {
		return false
	}
	return strings.IndexFunc(g, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) < 0
}

// groupCounts are the idle and running jobs of the accounting-group
// submitters, each with its jobs' owner: what advertise counts under the
// group rather than under the owner; s.mu held.
func (s *Schedd) groupCountsLocked() map[string]*groupCount {
	out := map[string]*groupCount{}
	get := func(sub, owner string) *groupCount {
		g := out[sub]
		if g == nil {
			g = &groupCount{owner: owner}
			out[sub] = g
		}
		return g
	}
	for _, ac := range s.idle.clusters {
		if ac.owner != ac.user {
			get(ac.owner, ac.user).idle += ac.n
		}
	}
	for _, c := range s.active {
		if c.ad == nil {
			continue
		}
		owner, _ := c.ad.EvalAttr("Owner").StringValue()
		if sub := submitterOf(owner, c.ad); sub != owner {
			get(sub, owner).running++
		}
	}
	return out
}

// groupCount is what groupCountsLocked counts of one submitter.
type groupCount struct {
	owner         string
	idle, running int
}

// splitGroups moves the jobs of accounting-group submitters out of their
// owners' counts (from the queue, by owner) into their own.
func splitGroups(per map[string]*jobCounts, groups map[string]*groupCount) {
	for sub, g := range groups {
		if o := per[g.owner]; o != nil {
			o.idle = max(o.idle-g.idle, 0)
			o.running = max(o.running-g.running, 0)
		}
		c := per[sub]
		if c == nil {
			c = &jobCounts{}
			per[sub] = c
		}
		c.idle += g.idle
		c.running += g.running
	}
}

// sameSubmitter reports whether a job of submitter sub may reuse a claim
// matched for prev, as HTCondor's schedd allows: the negotiator charged
// the claim to prev's submitter (its user, or its accounting group, whose
// quota it counts in), so only that submitter's jobs run on it.
func sameSubmitter(prev *classad.Ad, sub string) bool {
	if prev == nil {
		return true
	}
	return submitterOf(ownerOf(prev), prev) == sub
}

// ownerOf is a job's Owner.
func ownerOf(ad *classad.Ad) string {
	o, _ := ad.EvalAttr("Owner").StringValue()
	return o
}
