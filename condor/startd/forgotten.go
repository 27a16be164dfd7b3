package startd

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// idleClaimCheck is how long a claim stays idle before the startd asks
// its schedd whether it still holds it. The schedd runs the next job on a
// claim, or releases it, as soon as a job ends; a claim idle this long is
// one whose schedd died between claiming (or reusing) the slot and
// activating it.
const idleClaimCheck = 5 * time.Second

// claimCheckTimeout bounds the wait for a schedd's answer to that
// question: a schedd that answers later is asked again at the next check.
const claimCheckTimeout = 5 * time.Second

// releaseForgottenClaims asks the schedds holding claims idle for
// idleClaimCheck whether they still hold them, and releases those a
// schedd answers it does not hold, or whose schedd's address refuses the
// connection: a schedd restarted after kill -9 (perhaps at another
// address) forgets the claims on which it ran no job, which would
// otherwise keep their slots for CLAIM_IDLE_TIMEOUT. A schedd never
// leaves a claim idle on purpose, so releasing one loses nothing a live
// schedd would use.
//
// A schedd that does not answer in time, or answers with an error, keeps
// its claims: a schedd busy applying its jobs' reports answers late, and
// activates the claim soon after; releasing it then would refuse that
// activation. Such a claim is still released once idle for
// CLAIM_IDLE_TIMEOUT (releaseIdleClaims), whatever its schedd says.
func (s *Startd) releaseForgottenClaims(ctx context.Context) {
	type check struct {
		sl      *slot
		claimID string
		schedd  string
	}
	var checks []check
	cutoff := time.Now().Add(-idleClaimCheck)
	s.mu.Lock()
	for id, sl := range s.claims {
		if !sl.partitionable && sl.state == "Claimed" && sl.run == nil && !sl.reporting && !sl.receiving() && sl.schedd != "" && idleSince(sl).Before(cutoff) {
			checks = append(checks, check{sl, id, sl.schedd})
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, s.claimCheck)
			defer cancel()
			info, err := s.peer(c.schedd).Schedd().ClaimInfo(cctx, &wire.ClaimInfoRequest{ClaimID: c.claimID})
			why := ""
			switch {
			case err == nil && info.Exists:
				return
			case err == nil:
				why = "releasing a claim its schedd no longer holds"
			case errors.Is(err, syscall.ECONNREFUSED):
				// Nothing listens where the schedd was: it is gone, or
				// restarted at another address, without the claim.
				why = "releasing a claim whose schedd is gone (nothing listens at its address)"
			case ctx.Err() != nil:
				return // shutting down
			default:
				// A late answer, or an error of the schedd's: the claim
				// is not known to be forgotten.
				s.log.Debug("the schedd of an idle claim did not say whether it still holds it; keeping the claim",
					"slot", c.sl.name, "schedd", c.schedd, "err", err)
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			// Release only if nothing happened to the claim meanwhile.
			if s.claims[c.claimID] == c.sl && c.sl.state == "Claimed" && c.sl.run == nil && !c.sl.reporting && idleSince(c.sl).Before(cutoff) {
				s.log.Info(why, "slot", c.sl.name, "schedd", c.schedd)
				s.releaseLocked(c.sl)
			}
		})
	}
	wg.Wait()
}
