package schedd

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// writeEvent appends an event to the job's UserLog, if it has one, and
// to its DAGManNodesLog.
func (s *Schedd) writeEvent(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, ev joblog.Event) {
	s.writeEvents(ctx, id, ad, ev)
}

// writeEvents appends events of one job to its logs as writeEvent does
// each, in one write to each log: the events a shadow writes one after
// the other (an input transfer of no files, the end of an output
// transfer and the job's image size) cost one opening of the log, not
// one each.
func (s *Schedd) writeEvents(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, evs ...joblog.Event) {
	if ad == nil {
		var err error
		if ad, err = s.eventAd(ctx, id); err != nil {
			return
		}
	}
	now := time.Time{}
	for i := range evs {
		s.notifyEvent(id, ad, evs[i])
		evs[i].Cluster, evs[i].Proc = id.Cluster, id.Proc
		if evs[i].Time.IsZero() {
			if now.IsZero() {
				now = s.now()
			}
			evs[i].Time = now
		}
	}
	for _, path := range eventLogs(ad) {
		s.writeLogEvents(ad, path, evs)
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
	s.writeLogEvents(ad, path, []joblog.Event{ev})
}

// eventAttrs are the attributes of a job's ad writeEvent reads: its logs'
// paths (eventLogs), its owner, whose rights they are written with
// (jobAccount), and whether it is notified of the event (notifyEvent).
var eventAttrs = []string{"UserLog", "DAGManNodesLog", "Iwd", "Owner", "JobNotification"}

// eventAttrsOf is the part of ad writeEvent reads: its eventAttrs.
func eventAttrsOf(ad jobqueue.Ad) jobqueue.Ad {
	out := make(jobqueue.Ad, len(eventAttrs))
	for _, name := range eventAttrs {
		if v, ok := ad[name]; ok {
			out[name] = v
			continue
		}
		for k, v := range ad {
			if strings.EqualFold(k, name) {
				out[k] = v
				break
			}
		}
	}
	return out
}

// eventAdOf parses a, a job's eventAttrs only, for its events, and
// reports whether they are written from it as from the job's whole ad:
// none of its attributes refers to any other (a UserLog of
// strcat(Iwd, "/", Name) does), and the job is not to be mailed about
// its events (the mail may tell of any attribute). closed remembers,
// for each attribute text, whether it refers to no other.
func (s *Schedd) eventAdOf(parse adParser, closed map[string]bool, a jobqueue.Ad) (*classad.Ad, bool) {
	if a == nil {
		return nil, false
	}
	ad, err := parse.ad(a)
	if err != nil {
		return nil, false
	}
	if len(closed) > maxParsed {
		clear(closed)
	}
	for _, text := range a {
		ok, seen := closed[text]
		if !seen {
			names, opaque := classad.AttrNames(parse[text])
			ok = !opaque
			for _, n := range names {
				ok = ok && slices.ContainsFunc(eventAttrs, func(e string) bool { return strings.EqualFold(e, n) })
			}
			closed[text] = ok
		}
		if !ok {
			return nil, false
		}
	}
	if s.notify != nil && int(ad.EvalNumber("JobNotification", nil, notifyNever)) != notifyNever {
		return nil, false
	}
	return ad, true
}

// writeEntries writes the events of a batch of outbox entries, as
// writeEntry does each, ads[id] the ad of job id (read again when
// missing), recorded[id] the event of job id's entry as it was recorded
// (decoded from the entry's record when missing): each log's events of
// each owner in one write rather than one each, in the entries' order.
// The entries stay in the outbox.
func (s *Schedd) writeEntries(ctx context.Context, entries []jobqueue.OutboxEntry, ads map[jobqueue.JobID]*classad.Ad, recorded map[jobqueue.JobID]joblog.Event) {
	type run struct {
		owner string
		ad    *classad.Ad // the first job's, for its owner's account
		evs   []joblog.Event
	}
	runs := map[string][]*run{}
	var paths []string
	for _, e := range entries {
		ev, ok := recorded[e.ID]
		if !ok {
			if err := json.Unmarshal(e.Record, &ev); err != nil {
				s.log.Warn("an unreadable job event in the outbox; dropped", "job", e.ID, "err", err)
				continue
			}
		}
		ad := ads[e.ID]
		if ad == nil {
			var err error
			if ad, err = s.eventAd(ctx, e.ID); err != nil {
				continue
			}
		}
		s.notifyEvent(e.ID, ad, ev)
		ev.Cluster, ev.Proc = e.ID.Cluster, e.ID.Proc
		if ev.Time.IsZero() {
			ev.Time = s.now()
		}
		owner, _ := ad.EvalAttr("Owner").StringValue()
		for _, path := range eventLogs(ad) {
			rs := runs[path]
			if len(rs) == 0 {
				paths = append(paths, path)
			}
			if len(rs) == 0 || rs[len(rs)-1].owner != owner {
				rs = append(rs, &run{owner: owner, ad: ad})
				runs[path] = rs
			}
			r := rs[len(rs)-1]
			r.evs = append(r.evs, ev)
		}
	}
	for _, path := range paths {
		for _, r := range runs[path] {
			s.writeLogEvents(r.ad, path, r.evs)
		}
	}
}

// writeLogEvents appends evs to the event log at path, in one write,
// with the job's owner's rights.
func (s *Schedd) writeLogEvents(ad *classad.Ad, path string, evs []joblog.Event) {
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
		err = s.asUser.Do(acct, func() error { return w.Write(evs...) })
	}
	if err != nil {
		s.log.Warn("writing job event log", "path", path, "events", len(evs), "err", err)
	}
}
