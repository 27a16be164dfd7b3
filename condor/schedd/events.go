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
		var err error
		if ad, err = s.eventAd(ctx, id); err != nil {
			return
		}
	}
	s.notifyEvent(id, ad, ev)
	ev.Cluster, ev.Proc = id.Cluster, id.Proc
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	for _, path := range eventLogs(ad) {
		s.writeLog(ad, path, ev)
	}
}

// eventAd is the ad of a job, in the queue or, once it left, its history.
func (s *Schedd) eventAd(ctx context.Context, id jobqueue.JobID) (*classad.Ad, error) {
	j, err := s.q.Get(ctx, id)
	if err != nil {
		hist, herr := s.q.History(ctx, jobqueue.HistoryQuery{Sel: jobqueue.OneJob(id), Limit: 1})
		if herr != nil {
			return nil, herr
		}
		if len(hist) == 0 {
			return nil, err
		}
		j = hist[0]
	}
	return wire.ToClassAd(j.Ad)
}

// eventLogs are the event logs of a job: its UserLog and, for a DAG
// node's job, the DAG manager's nodes' log (DAGManNodesLog), as HTCondor's
// schedd writes them; each once, relative ones in the job's Iwd.
func eventLogs(ad *classad.Ad) []string {
	var paths []string
	for _, attr := range []string{"UserLog", "DAGManNodesLog"} {
		path, ok := ad.EvalAttr(attr).StringValue()
		if !ok || path == "" {
			continue
		}
		if !filepath.IsAbs(path) {
			iwd, _ := ad.EvalAttr("Iwd").StringValue()
			path = filepath.Join(iwd, path)
		}
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	return paths
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
