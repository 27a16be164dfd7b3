package startd

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// idleClaimCheck is how long a claim stays idle before the startd asks
// its schedd whether it still holds it. The schedd runs the next job on a
// claim, or releases it, as soon as a job ends; a claim idle this long is
// one whose schedd died between claiming (or reusing) the slot and
// activating it.
const idleClaimCheck = 5 * time.Second

// releaseForgottenClaims asks the schedds holding claims idle for
// idleClaimCheck whether they still hold them, and releases those a schedd
// answers it does not hold, or whose schedd does not answer at all: a
// schedd restarted after kill -9 (perhaps at another address) forgets the
// claims on which it ran no job, which would otherwise keep their slots
// for CLAIM_IDLE_TIMEOUT. A schedd never leaves a claim idle on purpose,
// so releasing one loses nothing a live schedd would use.
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
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			info, err := s.peer(c.schedd).Schedd().ClaimInfo(cctx, &wire.ClaimInfoRequest{ClaimID: c.claimID})
			var we *wire.Error
			switch {
			case err == nil && info.Exists:
				return
			case errors.As(err, &we):
				return // the schedd answered, but not the question
			case err != nil && ctx.Err() != nil:
				return // shutting down
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			// Release only if nothing happened to the claim meanwhile.
			if s.claims[c.claimID] == c.sl && c.sl.state == "Claimed" && c.sl.run == nil && !c.sl.reporting && idleSince(c.sl).Before(cutoff) {
				s.log.Info("releasing a claim its schedd no longer holds", "slot", c.sl.name, "schedd", c.schedd)
				s.releaseLocked(c.sl)
			}
		})
	}
	wg.Wait()
}
