package negotiator

import "strings"

// DefaultNiceUserPrioFactor is NICE_USER_PRIO_FACTOR's default, as
// HTCondor's: the priority factor of a nice user's jobs, which run in the
// nice-user accounting group, so that they get only what nobody else
// wants.
const DefaultNiceUserPrioFactor = 1e10

// niceUserGroup is the accounting group of nice_user jobs: their
// submitter is "nice-user.OWNER@UID_DOMAIN".
const niceUserGroup = "nice-user."

// prioFactor is the priority factor of submitter name: nice for one of
// the nice-user accounting group, factor (DEFAULT_PRIO_FACTOR) for any
// other.
func prioFactor(name string, factor, nice float64) float64 {
	if strings.HasPrefix(strings.ToLower(name), niceUserGroup) {
		return nice
	}
	return factor
}

// factorOf is the priority factor of submitter name; n.mu held.
func (n *Negotiator) factorOf(name string) float64 {
	nice := n.niceFactor
	if nice == 0 {
		nice = DefaultNiceUserPrioFactor
	}
	return prioFactor(name, n.factor, nice)
}
