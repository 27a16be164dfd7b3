package startd

import (
	"fmt"
	"math"
	"time"

	"github.com/pond-htc/pond/condor/classad"
)

// HoldCodeMissedDeferral is HTCondor's HoldReasonCode of a job that could
// not start within its deferral_window of its deferral_time.
const HoldCodeMissedDeferral = 20

// deferralMissed is the hold of a job that reached the startd later than
// its DeferralTime and DeferralWindow allow.
type deferralMissed struct{ late int64 }

func (d *deferralMissed) Error() string {
	return fmt.Sprintf("Job missed deferred execution time by %d seconds", d.late)
}

// deferralWait is how long a job waits on its claimed slot before it
// starts: until its DeferralTime, evaluated in the job's ad at the startd
// as HTCondor's starter does (0 for a job without one, or whose time has
// come); missed is not nil for a job later than its DeferralTime by more
// than its DeferralWindow, which does not start.
func deferralWait(job *classad.Ad, now time.Time) (wait time.Duration, missed *deferralMissed) {
	if _, has := job.Lookup("DeferralTime"); !has {
		return 0, nil
	}
	at := job.EvalNumber("DeferralTime", nil, math.NaN())
	if math.IsNaN(at) || at <= 0 || at > math.MaxInt32*4 {
		return 0, nil
	}
	window := job.EvalNumber("DeferralWindow", nil, 0)
	if math.IsNaN(window) || window < 0 {
		window = 0
	}
	when := time.Unix(int64(at), 0)
	if d := when.Sub(now); d > 0 {
		return d, nil
	}
	if late := int64(now.Sub(when) / time.Second); late > int64(window) {
		return 0, &deferralMissed{late: late}
	}
	return 0, nil
}
