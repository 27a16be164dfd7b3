package negotiator

import (
	"fmt"
	"math"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// DefaultPreJobRank is HTCondor's default NEGOTIATOR_PRE_JOB_RANK: the
// machine's Rank of the job first, then an unclaimed slot before a
// claimed one, then the smallest slot (best fit).
const DefaultPreJobRank = "(10000000 * My.Rank) + (1000000 * (RemoteOwner =?= UNDEFINED)) - (100000 * Cpus) - Memory"

// DefaultPostJobRank is HTCondor's default NEGOTIATOR_POST_JOB_RANK: of
// the slots the job ranks the same, an unclaimed one, the fastest
// (KFlops, 1000 when not advertised), then the lowest SlotID, and never
// an offline one.
const DefaultPostJobRank = "(RemoteOwner =?= UNDEFINED) * (ifThenElse(isUndefined(KFlops), 1000, KFlops) - SlotID - 1.0e10*(Offline =?= True))"

// noRank is what a negotiator rank that does not evaluate to a number
// (undefined, an error, a string) counts as: the lowest, as HTCondor's
// negotiator takes it (-FLT_MAX).
const noRank = -math.MaxFloat32

// JobRanks are the pool administrator's rankings of the slots that match
// a job, NEGOTIATOR_PRE_JOB_RANK (before the job's own Rank) and
// NEGOTIATOR_POST_JOB_RANK (after it), each evaluated with MY the slot
// and TARGET the job. A nil expression ranks every slot the same.
type JobRanks struct {
	Pre  classad.Expr
	Post classad.Expr
}

// ReadJobRanks reads NEGOTIATOR_PRE_JOB_RANK and NEGOTIATOR_POST_JOB_RANK
// from cfg: not set, each has HTCondor's default (DefaultPreJobRank,
// DefaultPostJobRank); set to nothing, it has no effect. An expression
// that does not parse is refused, naming the knob.
func ReadJobRanks(cfg *config.Config) (JobRanks, error) {
	var r JobRanks
	for _, k := range []struct {
		name, def string
		into      *classad.Expr
	}{{"NEGOTIATOR_PRE_JOB_RANK", DefaultPreJobRank, &r.Pre}, {"NEGOTIATOR_POST_JOB_RANK", DefaultPostJobRank, &r.Post}} {
		v, ok, err := cfg.Lookup(k.name)
		if err != nil {
			return r, fmt.Errorf("%s: %w", k.name, err)
		}
		if !ok {
			v = k.def
		}
		if strings.TrimSpace(v) == "" {
			continue
		}
		e, err := classad.ParseExpr(v)
		if err != nil {
			return r, fmt.Errorf("%s = %s: %w", k.name, v, err)
		}
		*k.into = e
	}
	return r, nil
}

// negotiatorRank evaluates a negotiator rank with MY the slot and TARGET
// the job: a number (a boolean counts as 1 or 0), or noRank.
func negotiatorRank(v classad.Value) float64 {
	f, ok := v.NumberValue()
	if !ok || math.IsNaN(f) {
		return noRank
	}
	return f
}

// eval returns the pre and post job ranks of slot for job (0 for a nil
// expression).
func (r JobRanks) eval(slot, job *classad.Ad) (pre, post float64) {
	if r.Pre != nil {
		pre = negotiatorRank(classad.EvalWith(r.Pre, slot, job))
	}
	if r.Post != nil {
		post = negotiatorRank(classad.EvalWith(r.Post, slot, job))
	}
	return pre, post
}

// attrs adds the attributes the ranks refer to (lower-case) to into: jobs
// that differ in one of them may rank the slots differently, so they are
// not of one autocluster.
func (r JobRanks) attrs(into map[string]bool) {
	for _, e := range []classad.Expr{r.Pre, r.Post} {
		if e != nil {
			idents(e.String(), into)
		}
	}
}
