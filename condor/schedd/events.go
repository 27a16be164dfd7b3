package schedd

import (
	"context"
	"path/filepath"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// writeEvent appends an event to the job's UserLog, if it has one.
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
	s.notifyEvent(id, ad, ev)
	path, ok := ad.EvalAttr("UserLog").StringValue()
	if !ok || path == "" {
		return
	}
	if !filepath.IsAbs(path) {
		iwd, _ := ad.EvalAttr("Iwd").StringValue()
		path = filepath.Join(iwd, path)
	}
	ev.Cluster, ev.Proc = id.Cluster, id.Proc
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
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
