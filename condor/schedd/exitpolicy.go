package schedd

import (
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// onExitHoldDefault is the hold reason of a job held by its OnExitHold
// without an OnExitHoldReason.
const onExitHoldDefault = "The job attribute OnExitHold expression evaluated to TRUE"

// onExitHold evaluates a job's OnExitHold with its exit attrs set and, when
// it holds the job, says why as HTCondor does: the job's OnExitHoldReason
// (on_exit_hold_reason) or the default, and its OnExitHoldSubCode
// (on_exit_hold_subcode) or 0, under HoldReasonCode 3 (HoldCodeJobPolicy).
func onExitHold(ad *classad.Ad, attrs jobqueue.Ad) (reason string, sub int, hold bool) {
	e, ok := ad.Lookup("OnExitHold")
	if !ok || readsNothing(e) && !classad.EvalWith(e, ad, nil).IsTrue() {
		return "", 0, false
	}
	tmp := ad.Copy()
	for k, v := range attrs {
		_ = tmp.SetExpr(k, v)
	}
	if !classad.EvalWith(e, tmp, nil).IsTrue() {
		return "", 0, false
	}
	reason = onExitHoldDefault
	if r, ok := tmp.EvalAttr("OnExitHoldReason").StringValue(); ok && r != "" {
		reason = r
	}
	if n, ok := tmp.EvalAttr("OnExitHoldSubCode").IntValue(); ok {
		sub = int(n)
	}
	return reason, sub, true
}
