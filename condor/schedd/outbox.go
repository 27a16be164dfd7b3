package schedd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strconv"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// A state change and the job log event that tells of it (terminated,
// evicted, held, released, aborted, reconnect failed) are one: the event
// is stored in the job queue's outbox in the change's transaction, written
// to the job's logs after the commit, and then dropped from the outbox. A
// schedd killed between the commit and the write finds the event in the
// outbox when it starts again and writes it then (replayOutbox), unless
// the log already has it: the event is in the log exactly once, and
// condor wait, DAGMan and whoever reads the log see every job end.

// logged makes a queue state change (change, given a context to make it
// with) and writes ev for each job it changed, as one: see above. ad is
// the job's ad when the change is of one job whose ad the caller holds,
// nil otherwise. It returns change's error.
func (s *Schedd) logged(ctx context.Context, ad *classad.Ad, ev joblog.Event, change func(context.Context) error) error {
	entries, err := s.recordEvents(ctx, ev, change)
	for _, e := range entries {
		s.deliverEvent(ctx, e, ad, false)
	}
	return err
}

// recordEvents makes change with ev stored in the outbox for each job it
// changed, and returns the entries stored: the first half of logged.
func (s *Schedd) recordEvents(ctx context.Context, ev joblog.Event, change func(context.Context) error) ([]jobqueue.OutboxEntry, error) {
	if ev.Time.IsZero() {
		// The time is the change's, and a replayed event's the same.
		ev.Time = s.now()
	}
	ob := s.eventOutbox(ev)
	err := change(jobqueue.WithOutbox(ctx, ob))
	return ob.Entries, err
}

// eventOutbox is the outbox that records ev for each job a change
// changes: at the time of the job's change when ev has none.
func (s *Schedd) eventOutbox(ev joblog.Event) *jobqueue.Outbox {
	return s.eventOutboxKeeping(ev, nil)
}

// eventOutboxKeeping is eventOutbox, which also keeps in recorded, when
// not nil, each job's event as it records it, so that the event need not
// be read back from its record.
func (s *Schedd) eventOutboxKeeping(ev joblog.Event, recorded map[jobqueue.JobID]joblog.Event) *jobqueue.Outbox {
	return &jobqueue.Outbox{Record: func(id jobqueue.JobID, from, _ jobqueue.Status) []byte {
		if ev.Type == joblog.Aborted && from == jobqueue.Completed {
			// A completed job left in the queue (leave_in_queue),
			// removed: its log already has its end.
			return nil
		}
		e := ev
		e.Cluster, e.Proc = id.Cluster, id.Proc
		if e.Time.IsZero() {
			e.Time = s.now()
		}
		b, err := json.Marshal(e)
		if err != nil {
			s.log.Warn("recording a job event", "job", id, "err", err)
			return nil
		}
		if recorded != nil {
			recorded[id] = e
		}
		return b
	}}
}

// deliverEvent writes an outbox entry's event to its job's logs with
// writeEvent, as any event, and drops the entry. Replayed, an event the
// schedd had begun writing when it stopped (a log has it) is written only
// to the logs that miss it, not through writeEvent again: what writeEvent
// does besides (a notification) was done then.
func (s *Schedd) deliverEvent(ctx context.Context, e jobqueue.OutboxEntry, ad *classad.Ad, replay bool) {
	s.writeEntry(ctx, e, ad, replay)
	if err := s.q.Delivered(ctx, e.Seq); err != nil {
		s.log.Warn("dropping a written job event from the outbox", "job", e.ID, "err", err)
	}
}

// writeEntry writes an outbox entry's event, the first half of
// deliverEvent: the entry stays in the outbox.
func (s *Schedd) writeEntry(ctx context.Context, e jobqueue.OutboxEntry, ad *classad.Ad, replay bool) {
	var ev joblog.Event
	switch err := json.Unmarshal(e.Record, &ev); {
	case err != nil:
		s.log.Warn("an unreadable job event in the outbox; dropped", "job", e.ID, "err", err)
	case replay:
		s.replayEvent(ctx, e.ID, ev)
	default:
		s.writeEvent(ctx, e.ID, ad, ev)
	}
}

// replayEvent writes an event of the outbox found when the schedd starts:
// through writeEvent when none of the job's logs has it, else only to
// those that miss it.
func (s *Schedd) replayEvent(ctx context.Context, id jobqueue.JobID, ev joblog.Event) {
	ad, err := s.eventAd(ctx, id)
	if err != nil {
		s.log.Warn("replaying a job event: the job is gone", "job", id, "err", err)
		return
	}
	ev.Cluster, ev.Proc = id.Cluster, id.Proc
	var missing []string
	paths := eventLogs(ad)
	for _, path := range paths {
		if !s.logHas(ad, path, ev) {
			missing = append(missing, path)
		}
	}
	if len(missing) == len(paths) {
		s.writeEvent(ctx, id, ad, ev)
		return
	}
	for _, path := range missing {
		s.writeLog(ad, path, ev)
	}
}

// replayOutbox writes the events a schedd stopped before writing (see
// above), in the order of their changes.
func (s *Schedd) replayOutbox(ctx context.Context) error {
	entries, err := s.q.PendingOutbox(ctx)
	if err != nil {
		return err
	}
	for _, e := range entries {
		var ev joblog.Event
		if json.Unmarshal(e.Record, &ev) == nil && ev.Type == joblog.Execute {
			s.replayExecute(ctx, e, ev)
			continue
		}
		s.log.Info("writing a job event the schedd stopped before writing", "job", e.ID)
		s.deliverEvent(ctx, e, nil, true)
	}
	return nil
}

// replayExecute writes, as the schedd starts, the Execute event of a job
// started before it stopped (its record is stored with the job's start,
// see run), unless that run is over or the job's logs have the event. The
// record of an event written is dropped lazily (forgetRecord), so most
// found here were written: a job no longer running, or running since a
// later start, needs nothing.
func (s *Schedd) replayExecute(ctx context.Context, e jobqueue.OutboxEntry, ev joblog.Event) {
	defer func() {
		if err := s.q.Delivered(ctx, e.Seq); err != nil {
			s.log.Warn("dropping a job's Execute event from the outbox", "job", e.ID, "err", err)
		}
	}()
	j, err := s.q.Get(ctx, e.ID)
	if err != nil || j.Status != jobqueue.Running {
		return
	}
	start, _ := strconv.ParseInt(j.Ad["JobCurrentStartDate"], 10, 64)
	startd, _ := classad.UnquoteString(j.Ad["PondStartd"])
	slot, _ := classad.UnquoteString(j.Ad["RemoteHost"])
	if start > ev.Time.Unix() || ev.Host != "<"+startd+">" || ev.SlotName != slot {
		return
	}
	s.log.Debug("writing a running job's Execute event unless its log has it", "job", e.ID)
	s.writeEntry(ctx, e, nil, true)
}

// replayWindow is how much of a log's end is searched for a replayed
// event: it was being written when the schedd stopped, so it is among the
// last events, if there.
const replayWindow = 1 << 20

// logHas reports whether the event log at path already ends with ev among
// its last events, read with the job's owner's rights.
func (s *Schedd) logHas(ad *classad.Ad, path string, ev joblog.Event) bool {
	text, err := joblog.Format(ev, nil)
	if err != nil {
		return false
	}
	acct, err := s.jobAccount(ad)
	if err != nil {
		return false
	}
	found := false
	_ = s.asUser.Do(acct, func() error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		off := max(st.Size()-replayWindow, 0)
		tail, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
		if err != nil {
			return err
		}
		found = bytes.Contains(tail, text)
		return nil
	})
	return found
}
