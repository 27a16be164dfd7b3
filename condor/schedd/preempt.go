package schedd

import (
	"context"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// PreemptClaimTimeout bounds how long the schedd waits for a preempting
// claim: the startd answers once the slot's job has retired (up to its
// MaxJobRetirementTime) and been vacated, as HTCondor's startd answers a
// preempting request claim only then.
const PreemptClaimTimeout = 30 * time.Minute

// claimContext is the context the shadow claims the slot of match m with:
// ctx, or, for a preempting match, one of PreemptClaimTimeout.
func claimContext(ctx context.Context, m wire.Match) (context.Context, context.CancelFunc) {
	if !m.Preempt {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), PreemptClaimTimeout)
}
