package schedd

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// writeEvent appends an event to the job's UserLog, if it has one, and
// to its DAGManNodesLog.
func (s *Schedd) writeEvent(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, ev joblog.Event) {
	if ad == nil {
		j, err := s.q.Get(ctx, id)
		if err != nil {
			hist, herr := s.q.History(ctx, jobqueue.HistoryQuery{Sel: jobqueue.OneJob(id), Limit: 1})
			if herr != nil || len(hist) == 0 {
				return
			}
			j = hist[0]
		}
		if ad, err = wire.ToClassAd(j.Ad); err != nil {
			return
		}
	}
	ev.Cluster, ev.Proc = id.Cluster, id.Proc
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	// A DAG node's job writes its own log and the DAG manager's nodes'
	// log (DAGManNodesLog), as HTCondor's schedd does.
	var done []string
	for _, attr := range []string{"UserLog", "DAGManNodesLog"} {
		path, ok := ad.EvalAttr(attr).StringValue()
		if !ok || path == "" {
			continue
		}
		if !filepath.IsAbs(path) {
			iwd, _ := ad.EvalAttr("Iwd").StringValue()
			path = filepath.Join(iwd, path)
		}
		if slices.Contains(done, path) {
			continue
		}
		done = append(done, path)
		if replaying(ctx) && s.logHas(ad, path, ev) {
			continue // written before the schedd stopped (outbox.go)
		}
		s.writeLog(ad, path, ev)
	}
}

// writeLog appends ev to the event log at path with the job's owner's
// rights.
func (s *Schedd) writeLog(ad *classad.Ad, path string, ev joblog.Event) {
	s.logMu.Lock()
	w := s.logs[path]
	if w == nil {
		w = joblog.NewWriter(path, joblog.WriterOptions{})
		s.logs[path] = w
	}
	s.logMu.Unlock()
	acct, err := s.jobAccount(ad)
	if err == nil {
		// The log is the owner's: written with the owner's rights.
		err = asuser.Do(acct, func() error { return w.Write(ev) })
	}
	if err != nil {
		s.log.Warn("writing job event log", "path", path, "err", err)
	}
}
