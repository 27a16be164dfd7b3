package schedd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/condor/wire"
)

// Act runs condor_rm, condor_hold or condor_release, on the caller's own
// jobs unless the caller is an administrator (see restrict).
func (s *Schedd) Act(ctx context.Context, req *wire.ActRequest) (*wire.ActResponse, error) {
	if len(req.Args) == 0 && strings.TrimSpace(req.Constraint) == "" && !req.All {
		return nil, fmt.Errorf("%w: no jobs selected (give job ids, owners, a constraint or all)", wire.ErrBadRequest)
	}
	sels, err := selectors(req.Args, req.Constraint)
	if err != nil {
		return nil, err
	}
	// A cluster's factory goes (or pauses) before its jobs, so that it
	// makes none after them.
	if _, err := s.factoryAct(ctx, req, sels); err != nil {
		return nil, fmt.Errorf("%s: %w", req.Action, err)
	}
	// A constraint of the queue's indexed columns alone (condor_release
	// -constraint 'ClusterId == 1') is answered by the indexes: no ad
	// is read to evaluate it.
	exactSelectors(sels, req.Constraint)
	if sels, err = s.restrict(ctx, sels); err != nil {
		return nil, err
	}
	// As HTCondor's schedd: the reason, and who asked (the job's
	// RemoveReason, HoldReason or ReleaseReason and its event alike).
	reason := actedBy(ctx, firstNonEmpty(req.Reason, "via condor_"+map[string]string{wire.ActRemove: "rm", wire.ActHold: "hold", wire.ActRelease: "release"}[req.Action]))
	var ev joblog.Event
	var run func(context.Context, jobqueue.Selector, func([]jobqueue.Changed) error) error
	switch req.Action {
	case wire.ActRemove:
		ev = joblog.Event{Type: joblog.Aborted, Message: reason}
		run = func(ctx context.Context, sel jobqueue.Selector, done func([]jobqueue.Changed) error) error {
			return s.q.RemoveEach(ctx, sel, reason, done)
		}
	case wire.ActHold:
		ev = joblog.Event{Type: joblog.Held, Message: reason, HoldCode: 1}
		run = func(ctx context.Context, sel jobqueue.Selector, done func([]jobqueue.Changed) error) error {
			return s.q.HoldEach(ctx, sel, reason, 1, 0, done)
		}
	case wire.ActRelease:
		ev = joblog.Event{Type: joblog.Released, Message: reason}
		run = func(ctx context.Context, sel jobqueue.Selector, done func([]jobqueue.Changed) error) error {
			return s.q.ReleaseEach(ctx, sel, reason, done)
		}
	default:
		return nil, fmt.Errorf("%w: unknown action %q", wire.ErrBadRequest, req.Action)
	}
	out := &wire.ActResponse{Changed: []string{}}
	for _, sel := range sels {
		// A batch of jobs at a time (jobqueue.ActBatch): each batch
		// commits with its jobs' events, which are then written, and
		// its jobs are vacated or queued, before the next is read.
		err := s.actBatches(ctx, ev, req.Action == wire.ActRelease, func(ctx context.Context, done func([]jobqueue.Changed) error) error {
			return run(ctx, sel, done)
		}, func(batch []jobqueue.Changed, read map[jobqueue.JobID]readJob) {
			var others []jobqueue.JobID
			for _, c := range batch {
				out.Count++
				if sel.HasProc {
					out.Changed = append(out.Changed, c.ID.String())
				}
				if c.OtherRemove {
					others = append(others, c.ID)
				}
			}
			s.afterActBatch(ctx, req, batch, read)
			s.removeOthers(ctx, others, 0)
			s.markDirty()
		})
		if errors.Is(err, jobqueue.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.Action, err)
		}
	}
	return out, nil
}

// actBatches runs a queue action a batch at a time: run calls done after
// each batch committed, with its changes; the events of the batch, stored
// with it in the outbox (outbox.go), are then written to the jobs' logs,
// the outbox entries dropped at once, and each called with the batch.
// Memory and the outbox grow with a batch, not with the jobs acted on.
// With whole, each is given the batch's changed jobs with their whole
// ads, read for their events (a released job's, which is queued again);
// without, the events are written from the few attributes they need.
func (s *Schedd) actBatches(ctx context.Context, ev joblog.Event, whole bool, run func(context.Context, func([]jobqueue.Changed) error) error, each func([]jobqueue.Changed, map[jobqueue.JobID]readJob)) error {
	// The batch's events as recorded, written without being decoded
	// from their records again.
	recorded := map[jobqueue.JobID]joblog.Event{}
	ob := s.eventOutboxKeeping(ev, recorded)
	// A removed job's change gives the attributes of its events, not its
	// whole ad, which the history writes without it being read.
	ob.Attrs = eventAttrs
	parse := adParser{}
	closed := map[string]bool{}
	deliver := func(batch []jobqueue.Changed) map[jobqueue.JobID]readJob {
		defer clear(recorded)
		entries := ob.Entries
		ob.Entries = nil
		if len(entries) == 0 {
			return nil
		}
		// The batch's ads: the attributes of their events of the jobs
		// it moved to the history as the change gave them, the others'
		// in a few queries (only those attributes, unless whole); each
		// attribute text its jobs share parsed once.
		gone := make(map[jobqueue.JobID]jobqueue.Ad, len(entries))
		for _, c := range batch {
			if c.Ad != nil {
				gone[c.ID] = c.Ad
			}
		}
		var ids []jobqueue.JobID
		for _, e := range entries {
			if _, ok := gone[e.ID]; !ok {
				ids = append(ids, e.ID)
			}
		}
		ads := make(map[jobqueue.JobID]*classad.Ad, len(entries))
		var read map[jobqueue.JobID]readJob
		var wholeIDs []jobqueue.JobID
		if whole {
			read = s.readReleased(ctx, parse, ids)
			for id, r := range read {
				ads[id] = r.ad
			}
		} else {
			small := make(map[jobqueue.JobID]jobqueue.Job, len(ids))
			if len(ids) > 0 {
				var err error
				if small, err = s.q.AttrsOf(ctx, ids, eventAttrs); err != nil {
					s.log.Warn("reading the ads of a batch of jobs for their events", "jobs", len(ids), "err", err)
				}
			}
			for _, e := range entries {
				if _, done := ads[e.ID]; done {
					continue
				}
				a, ok := gone[e.ID]
				if ok {
					a = eventAttrsOf(a)
				} else if j, queued := small[e.ID]; queued {
					a = j.Ad
				}
				if ad, ok := s.eventAdOf(parse, closed, a); ok {
					ads[e.ID] = ad
				} else {
					// An attribute of the events refers to others, or
					// the job may be mailed about: its whole ad.
					wholeIDs = append(wholeIDs, e.ID)
				}
			}
		}
		// A removed job's whole ad from the history, whose change gave
		// only its eventAttrs.
		jobs := map[jobqueue.JobID]jobqueue.Job{}
		if len(wholeIDs) > 0 {
			var err error
			if jobs, err = s.q.JobsOf(ctx, wholeIDs); err != nil {
				s.log.Warn("reading the ads of a batch of jobs for their events", "jobs", len(wholeIDs), "err", err)
			}
		}
		for id, j := range jobs {
			if ad, err := parse.ad(j.Ad); err == nil {
				ads[id] = ad
			}
		}
		s.writeEntries(ctx, entries, ads, recorded)
		seqs := make([]int64, 0, len(entries))
		for _, e := range entries {
			seqs = append(seqs, e.Seq)
		}
		if err := s.q.DeliveredAll(ctx, seqs); err != nil {
			s.log.Warn("dropping written job events from the outbox", "events", len(seqs), "err", err)
		}
		return read
	}
	err := run(jobqueue.WithOutbox(ctx, ob), func(batch []jobqueue.Changed) error {
		each(batch, deliver(batch))
		return nil
	})
	deliver(nil)
	return err
}

// actedBy is the reason of a condor_rm, condor_hold or condor_release as
// HTCondor's schedd records it: the reason followed by the user who
// asked, when the request was authenticated.
func actedBy(ctx context.Context, reason string) string {
	if who, _, _ := strings.Cut(callerOf(ctx).name, "@"); who != "" {
		reason += " (by user " + who + ")"
	}
	return reason
}

// readJob is a job read after its change, and its parsed ad. A job
// whose ad shares the parsed ad of another (readReleased) has share set,
// and ad is that other job's.
type readJob struct {
	j     jobqueue.Job
	ad    *classad.Ad
	share *sharedIdle
}

// sharedIdle is what released jobs of a cluster share whose ads are equal
// in every attribute their filing and their events read (sharedNames):
// the first one's parsed ad, and its idle entry once filed.
type sharedIdle struct {
	ja     *ownAd
	sigLen int      // the autoclusters' significant attributes when the names were found
	entry  *idleJob // the first job's, once filed; s.mu
}

// idleRoots are the attributes of a job's ad that filing it as idle
// evaluates (idleEntry, deferStart, isLocal, stampSubmitPool, jobPrio),
// besides those of its autocluster's key.
var idleRoots = []string{"owner", "accountinggroup", "jobprio", "jobuniverse", "deferraltime", "deferralwindow", "deferralpreptime", strings.ToLower(AttrSubmitPool)}

// sharedNames returns the names (lower-case) of the attributes of ad that
// filing it as an idle job, and writing its events, may read: its
// autocluster key's (with the significant attributes sig), those filing
// it evaluates (idleRoots), its events' (eventAttrs), and every attribute
// any of those refers to, on and on. Jobs whose ads are equal in these
// attributes are filed alike and have the same logs, owner and
// notification. ok is false when no such set can be told: an attribute
// reads others it does not name (eval()), or the job has a deferral time
// (deferStart may hold it with its whole ad).
func sharedNames(ad *classad.Ad, sig map[string]bool) (names map[string]bool, ok bool) {
	if _, deferred := ad.Lookup("DeferralTime"); deferred {
		return nil, false
	}
	names = map[string]bool{}
	var work []string
	add := func(n string) {
		n = strings.ToLower(n)
		if !names[n] {
			names[n] = true
			work = append(work, n)
		}
	}
	for _, n := range negotiator.AutoclusterAttrs(ad, sig) {
		add(n)
	}
	for _, n := range idleRoots {
		add(n)
	}
	for _, n := range eventAttrs {
		add(n)
	}
	for len(work) > 0 {
		n := work[len(work)-1]
		work = work[:len(work)-1]
		e, found := ad.Lookup(n)
		if !found {
			continue
		}
		refs, opaque := classad.AttrNames(e)
		if opaque {
			return nil, false
		}
		for _, r := range refs {
			add(r)
		}
	}
	return names, true
}

// readReleased reads the released jobs ids for their events and to file
// them as idle again. Each cluster's attributes are read once, and the
// jobs of a cluster whose own attributes are equal in all that filing
// them and writing their events read (sharedNames of the first such job)
// share its merged and parsed ad, and its autocluster: the others' whole
// ads are neither built nor parsed. A job that may be mailed about (the
// mail may tell of any attribute) has its own.
func (s *Schedd) readReleased(ctx context.Context, parse adParser, ids []jobqueue.JobID) map[jobqueue.JobID]readJob {
	clusters, own, err := s.q.OwnAttrsOf(ctx, ids)
	if err != nil {
		s.log.Warn("reading the ads of a batch of released jobs", "jobs", len(ids), "err", err)
		return nil
	}
	s.mu.Lock()
	sig := maps.Clone(s.idle.sig)
	s.mu.Unlock()
	type clusterShare struct {
		names  []string // sorted; nil: the cluster's jobs share nothing
		groups map[string]*sharedIdle
		alone  map[string]bool // the groups whose jobs are read one by one
	}
	shares := map[int]*clusterShare{}
	read := make(map[jobqueue.JobID]readJob, len(ids))
	var key strings.Builder
	for _, id := range ids {
		j, ok := own[id]
		if !ok {
			continue
		}
		cs := shares[id.Cluster]
		var g string
		if cs != nil && cs.names != nil {
			lowered := make(map[string]string, len(j.Ad))
			for k, v := range j.Ad {
				lowered[strings.ToLower(k)] = v
			}
			key.Reset()
			fmt.Fprintf(&key, "%q %d", j.Owner, j.Status)
			for _, n := range cs.names {
				if v, ok := lowered[n]; ok {
					fmt.Fprintf(&key, " %s=%q", n, v)
				}
			}
			g = key.String()
			if sh := cs.groups[g]; sh != nil {
				read[id] = readJob{j: jobqueue.Job{ID: id, Owner: j.Owner, Status: j.Status, EnteredStatus: j.EnteredStatus, Ad: sh.ja.w}, ad: sh.ja.ad, share: sh}
				continue
			}
		}
		j.Ad = jobqueue.MergeAds(clusters[id.Cluster], j.Ad)
		ad, err := parse.ad(j.Ad)
		if err != nil {
			continue
		}
		r := readJob{j: j, ad: ad}
		if cs == nil {
			// The cluster's first job: what its jobs must be equal in.
			cs = &clusterShare{groups: map[string]*sharedIdle{}, alone: map[string]bool{}}
			shares[id.Cluster] = cs
			if names, ok := sharedNames(ad, sig); ok {
				for n := range names {
					cs.names = append(cs.names, n)
				}
				slices.Sort(cs.names)
				lowered := make(map[string]string, len(own[id].Ad))
				for k, v := range own[id].Ad {
					lowered[strings.ToLower(k)] = v
				}
				key.Reset()
				fmt.Fprintf(&key, "%q %d", j.Owner, j.Status)
				for _, n := range cs.names {
					if v, ok := lowered[n]; ok {
						fmt.Fprintf(&key, " %s=%q", n, v)
					}
				}
				g = key.String()
			}
		}
		if cs.names != nil && !cs.alone[g] {
			// Another group of the cluster: what its first job's
			// filing reads must be among the names its jobs are
			// equal in.
			names, ok := sharedNames(ad, sig)
			for n := range names {
				ok = ok && slices.Contains(cs.names, n)
			}
			if ok && !s.mayMail(ad) {
				r.share = &sharedIdle{ja: &ownAd{ad: ad, w: j.Ad}, sigLen: len(sig)}
				cs.groups[g] = r.share
			} else {
				cs.alone[g] = true
			}
		}
		read[id] = r
	}
	return read
}

// mayMail reports whether a job of ad may be mailed about its events.
func (s *Schedd) mayMail(ad *classad.Ad) bool {
	return s.notify != nil && int(ad.EvalNumber("JobNotification", nil, notifyNever)) != notifyNever
}

// afterActBatch is afterAct for each job of a batch an action changed;
// a released job read already (read) is queued without reading it again.
func (s *Schedd) afterActBatch(ctx context.Context, req *wire.ActRequest, batch []jobqueue.Changed, read map[jobqueue.JobID]readJob) {
	for _, c := range batch {
		r, ok := read[c.ID]
		if req.Action != wire.ActRelease || !ok {
			s.afterAct(ctx, req, c)
			continue
		}
		s.mu.Lock()
		s.idle.delete(c.ID)
		s.mu.Unlock()
		if r.share != nil {
			s.addSharedIdle(ctx, r.j, r.share)
			continue
		}
		s.addIdleJob(ctx, r.j, &ownAd{ad: r.ad, w: r.j.Ad})
	}
}

// addSharedIdle is addIdleJob of a released job whose filing it shares
// with others (readReleased): the first files itself, the others go under
// the same autocluster, owner and JobPrio without their ads being read.
// Should the significant attributes have grown since the jobs were read,
// the job is read and filed by itself.
func (s *Schedd) addSharedIdle(ctx context.Context, j jobqueue.Job, sh *sharedIdle) {
	if j.Status != jobqueue.Idle {
		return
	}
	if isLocal(sh.ja.ad) {
		s.startLocal(j.ID)
		return
	}
	s.mu.Lock()
	if len(s.idle.sig) != sh.sigLen {
		s.mu.Unlock()
		s.addIdle(ctx, j.ID)
		return
	}
	if _, busy := s.active[j.ID]; !busy {
		if sh.entry == nil {
			sh.entry = s.idleEntry(j.Owner, s.now(), sh.ja)
		}
		s.idle.put(j.ID, &idleJob{owner: sh.entry.owner, since: s.now(), ac: sh.entry.ac, prio: sh.entry.prio})
	}
	s.mu.Unlock()
	s.markDirty()
	s.reschedule()
}

// afterAct queues a job an action released and vacates a removed or held
// job that was running.
func (s *Schedd) afterAct(ctx context.Context, req *wire.ActRequest, c jobqueue.Changed) {
	s.mu.Lock()
	s.idle.delete(c.ID)
	cl := s.active[c.ID]
	s.mu.Unlock()
	if req.Action == wire.ActRelease {
		s.addIdle(ctx, c.ID)
		return
	}
	if c.From == jobqueue.Running {
		s.vacateJob(cl, c.ID)
	}
}

// vacateJob has the startd of claim cl stop job id, which left the
// running state while on it; a startd that cannot be told loses the
// claim. A nil claim, or one without an address, is left alone. A job
// the schedd runs itself (local.go) is stopped.
func (s *Schedd) vacateJob(cl *claim, id jobqueue.JobID) {
	s.stopLocal(id)
	if cl == nil || cl.addr() == "" {
		return
	}
	s.mu.Lock()
	cl.vacated = id
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		vctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := s.peer(cl.addr()).Startd().Vacate(vctx, &wire.VacateRequest{ClaimID: cl.id, JobID: id.String()})
		if err != nil {
			s.log.Warn("vacating job", "job", id, "err", err)
			s.finishClaim(cl)
		}
	}()
}
