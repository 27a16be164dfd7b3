package schedd

import (
	"context"
	"fmt"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// maxOtherRemoveDepth bounds the chain of removals OtherJobRemoveRequirements
// sets off (a DAG job's nodes, a nested DAG job's nodes, ...).
const maxOtherRemoveDepth = 32

// removeOthers removes, as HTCondor's schedd does, the jobs a removed
// job's OtherJobRemoveRequirements expression selects (a DAG manager's
// job: "DAGManJobId =?= CLUSTER", its nodes' jobs), so that a DAG's nodes
// go with its DAG job even when the DAG manager's process is gone. Only
// jobs of the removed job's owner are removed; those removed in turn
// remove theirs, up to maxOtherRemoveDepth levels.
func (s *Schedd) removeOthers(ctx context.Context, removed []jobqueue.JobID, depth int) {
	if depth >= maxOtherRemoveDepth {
		return
	}
	for _, id := range removed {
		hist, err := s.q.History(ctx, jobqueue.HistoryQuery{Sel: jobqueue.OneJob(id), Limit: 1, Attrs: []string{"OtherJobRemoveRequirements", "Owner"}})
		if err != nil || len(hist) == 0 {
			continue
		}
		raw, ok := hist[0].Ad["OtherJobRemoveRequirements"]
		if !ok {
			continue
		}
		ad, err := wire.ToClassAd(hist[0].Ad)
		if err != nil {
			continue
		}
		expr, ok := ad.EvalAttr("OtherJobRemoveRequirements").StringValue()
		if !ok || expr == "" {
			s.log.Warn("OtherJobRemoveRequirements is not a string: ignored", "job", id, "value", raw)
			continue
		}
		sels, err := selectors(nil, expr)
		if err != nil {
			s.log.Warn("OtherJobRemoveRequirements does not parse: ignored", "job", id, "expr", expr, "err", err)
			continue
		}
		// HTCondor's words, which a DAG manager reads (condor/dagman,
		// removedWithRe): a node job removed so went with the DAG's job.
		reason := fmt.Sprintf("removed because OtherJobRemoveRequirements = %s fired when job %s was removed", expr, id)
		req := &wire.ActRequest{Action: wire.ActRemove, Reason: reason}
		var next []jobqueue.JobID
		for _, sel := range sels {
			sel.Owner = hist[0].Owner
			var changed []jobqueue.Changed
			// Each job's abort event is stored with its removal (outbox.go).
			events, err := s.recordEvents(ctx, joblog.Event{Type: joblog.Aborted, Message: reason}, func(ctx context.Context) (err error) {
				changed, err = s.q.Remove(ctx, sel, reason)
				return err
			})
			for _, e := range events {
				s.deliverEvent(ctx, e, nil, false)
			}
			if err != nil {
				continue
			}
			for _, c := range changed {
				s.afterAct(ctx, req, c)
				next = append(next, c.ID)
			}
		}
		if len(next) > 0 {
			s.removeOthers(ctx, next, depth+1)
		}
	}
}
