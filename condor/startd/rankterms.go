package startd

import (
	"fmt"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// Knobs and weights of the terms pond adds to the machine's RANK.
const (
	// KnobLendersFirst turns the lenders-first term on (the default) or
	// off on the startds of a pool (POND_POOL): see LendersFirstTerm.
	KnobLendersFirst = "POND_LENDERS_FIRST"
	// KnobPool names the node's pool, "" for none.
	KnobPool = "POND_POOL"
	// AttrPondJobIds is the machine attribute a pond's membership stamps
	// on its members: the ids (CLUSTER.PROC, comma-separated) of the
	// jobs whose query found them. See PondAffinityTerm.
	AttrPondJobIds = "PondJobIds"

	// LendersFirstWeight is what a job of the machine's own pool adds to
	// its Rank: more than an administrator's RANK usually spans.
	LendersFirstWeight = 1000
	// PondAffinityWeight is what a job a pond was made for adds to the
	// Rank of the pond's members: above every other term.
	PondAffinityWeight = 1000000
)

// LendersFirstTerm is the RANK term by which the startds of pool prefer
// its own jobs: those whose schedd stamped them with the pool
// (PondSubmitPool, schedd.AttrSubmitPool). A job flocked in from another
// pool ranks LendersFirstWeight lower, so a job of the pool preempts it
// (rank preemption) within one negotiation cycle: lending a pool's idle
// machines costs the pool little.
func LendersFirstTerm(pool string) string {
	return fmt.Sprintf("%d * (TARGET.PondSubmitPool =?= %s)", LendersFirstWeight, classad.QuoteString(pool))
}

// PondAffinityTerm is the RANK term by which a pond's member prefers the
// jobs the pond was made for: those whose id is in the machine's
// PondJobIds.
func PondAffinityTerm() string {
	return fmt.Sprintf(`%d * (stringListMember(strcat(TARGET.ClusterId, ".", TARGET.ProcId), MY.%s) =?= true)`,
		PondAffinityWeight, AttrPondJobIds)
}

// rankOf is the machine's Rank: the configured RANK (0 by default), plus
// LendersFirstTerm on a node of a pool unless POND_LENDERS_FIRST is false,
// plus PondAffinityTerm on a pond's member with PondJobIds. A RANK that is
// undefined or an error for a job counts 0 in the sum, as HTCondor counts
// such a Rank, so that the terms still order the jobs.
func rankOf(cfg *config.Config) (classad.Expr, error) {
	base, err := policyExpr(cfg, "RANK", "0")
	if err != nil {
		return nil, err
	}
	var terms []string
	if src := base.String(); src != "0" {
		terms = append(terms, fmt.Sprintf("ifThenElse(isUndefined(%[1]s) || isError(%[1]s), 0, %[1]s)", "("+src+")"))
	}
	lenders, err := cfg.Bool(KnobLendersFirst, true)
	if err != nil {
		return nil, err // names the knob and where it is set
	}
	if pool, _ := cfg.Get(KnobPool); lenders && strings.TrimSpace(pool) != "" {
		terms = append(terms, LendersFirstTerm(strings.TrimSpace(pool)))
	}
	if ids, _ := cfg.Get(AttrPondJobIds); strings.Trim(strings.TrimSpace(ids), `"`) != "" {
		terms = append(terms, PondAffinityTerm())
	}
	if len(terms) == 0 {
		return base, nil
	}
	e, err := classad.ParseExpr(strings.Join(terms, " + "))
	if err != nil {
		return nil, fmt.Errorf("configuration knob RANK with pond's terms: %w", err)
	}
	return e, nil
}
