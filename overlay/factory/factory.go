// Package factory is the pilot factory of a pool: running in the pool's
// central-manager agent, with no pondctl running, it keeps glideins
// (overlay/glidein) queued and running at its entries for the pool's idle
// jobs.
//
// An entry is a site (glidein.Site: a Slurm cluster, SSH hosts) and a
// template of the glideins it starts there, with limits. Every cycle the
// factory
//
//   - lists each entry's site by the entry's ID prefix and reads which
//     glideins the collector holds (their heartbeat), and so counts each
//     glidein queued, running, joined, claimed, or ended: done (it left by
//     itself), failed (validation, exit code 3, or never joined) or lost
//     (killed behind its back, or its agent vanished);
//   - reads the pool's idle jobs as the negotiator does (the submitter ads,
//     then each schedd's idle jobs) and runs the negotiator's own
//     matchmaking (negotiator.Matchmake) against the slot ads glideins of
//     each entry would advertise, after the glideins already queued or
//     idle: the glideins the matches use are what each entry needs;
//   - submits what is missing, within the entry's and the factory's
//     limits, at most the ramp (1, 2, 4, ... up to max_submit_per_cycle,
//     or as the entry's limits.ramp says),
//     and never while the entry's circuit breaker is open.
//
// Jobs are bound late: a glidein joins the pool and the negotiator gives
// it jobs; the factory only keeps depth.
//
// Exactly once: each glidein's ID (api.GlideinIDPrefix, pool, entry,
// sequence, random) is in the journal, fsync'd, before Site.Submit. After a
// crash the factory adopts what the sites list under its prefixes, and
// submits again, with the same ID, only an intent the site has not shown
// for SubmitGrace (the site refuses a duplicate ID).
package factory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
)

// Defaults of Options.
const (
	DefaultInterval       = 5 * time.Second
	DefaultSubmitGrace    = 30 * time.Second
	DefaultHeartbeatGrace = 90 * time.Second
	DefaultJoinTimeout    = 10 * time.Minute
	DefaultRefreshBefore  = 10 * time.Minute
)

// maxEvents bounds the events an entry keeps.
const maxEvents = 20

// Options configure a Factory.
type Options struct {
	// Pool names the pool; it is part of every glidein ID.
	Pool string
	// DataDir keeps the entries and the journal (DataDir/entries,
	// DataDir/journal); required.
	DataDir string
	// Pool reads the pool's idle jobs and glideins.
	Source Pool
	// Sites builds the site of an entry; called when an entry is set.
	Sites func(api.FactoryEntrySpec) (glidein.Site, error)
	// Launch makes the request that starts glidein id of entry e
	// (binary, arguments, files: its credentials). The factory sets the
	// ID, Lifetime, CPUs and MemoryMB.
	Launch func(ctx context.Context, e api.FactoryEntrySpec, id string) (glidein.Request, error)
	// Refresh, when set, gives new credential files for a running
	// glidein and when they expire; the factory writes them into the
	// glidein's directory on sites that are glidein.FileWriters,
	// RefreshBefore their expiry.
	Refresh       func(ctx context.Context, e api.FactoryEntrySpec, id string) (files map[string][]byte, expires time.Time, err error)
	RefreshBefore time.Duration
	// Totals bound all entries together (zero: no bound of its own).
	Totals api.FactoryLimits
	// Interval is the time between cycles.
	Interval time.Duration
	// SubmitGrace is how long an intent may stay unseen at its site
	// before it is submitted again.
	SubmitGrace time.Duration
	// HeartbeatGrace is how long a running glidein that had joined may be
	// missing from the collector before it counts as lost.
	HeartbeatGrace time.Duration
	// JoinTimeout is how long a running glidein may take to join before
	// it counts as failed and is cancelled.
	JoinTimeout time.Duration
	// Logger receives the factory's log; nil discards it.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Factory keeps glideins at its entries for its pool's idle jobs.
type Factory struct {
	opts    Options
	log     *slog.Logger
	journal *journal
	entDir  string

	cycleMu sync.Mutex // one cycle at a time

	mu      sync.Mutex
	entries map[string]*entryState
	records map[string]*Record
	status  api.FactoryStatus
	kick    chan struct{}
	cleaned map[string]bool // ended glideins whose site entry was cancelled
}

type entryState struct {
	e    api.FactoryEntrySpec
	site glidein.Site

	seq      int64
	ramp     int
	failures []time.Time
	open     time.Time // the breaker is open until then
	reason   string
	funnel   api.Funnel
	matched  int
	wanted   int
	err      string
	events   []api.FactoryEvent
	// offers are the site's offers, cheapest first (none: the site has
	// one kind); sitePrice is its first price, that of a site with none.
	offers     []offer
	sitePrice  float64
	sitePriced bool
	// capped says why the last cycle submitted fewer glideins than its
	// jobs wanted (a cap of its budget); wants counts what it wanted, by
	// offer.
	capped string
	wants  map[string]int
}

// New opens the factory's journal and entries in opts.DataDir. Run starts
// its cycles.
func New(opts Options) (*Factory, error) {
	if opts.DataDir == "" || opts.Source == nil || opts.Sites == nil || opts.Launch == nil {
		return nil, errors.New("factory: DataDir, Source, Sites and Launch are required")
	}
	if opts.Pool == "" {
		return nil, errors.New("factory: the pool's name is required")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.SubmitGrace <= 0 {
		opts.SubmitGrace = DefaultSubmitGrace
	}
	if opts.HeartbeatGrace <= 0 {
		opts.HeartbeatGrace = DefaultHeartbeatGrace
	}
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = DefaultJoinTimeout
	}
	if opts.RefreshBefore <= 0 {
		opts.RefreshBefore = DefaultRefreshBefore
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j, err := openJournal(filepath.Join(opts.DataDir, "journal"))
	if err != nil {
		return nil, err
	}
	f := &Factory{opts: opts, log: log.With("component", "factory"), journal: j,
		entDir: filepath.Join(opts.DataDir, "entries"), entries: map[string]*entryState{},
		records: map[string]*Record{}, kick: make(chan struct{}, 1), cleaned: map[string]bool{}}
	if err := os.MkdirAll(f.entDir, 0o700); err != nil {
		return nil, fmt.Errorf("factory: %w", err)
	}
	recs, err := j.load()
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		f.records[r.ID] = r
	}
	if err := f.loadEntries(); err != nil {
		return nil, err
	}
	f.status.Pool = opts.Pool
	return f, nil
}

// loadEntries reads the entries set before a restart.
func (f *Factory) loadEntries() error {
	ents, err := os.ReadDir(f.entDir)
	if err != nil {
		return fmt.Errorf("factory: %w", err)
	}
	for _, de := range ents {
		if !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		path := filepath.Join(f.entDir, de.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("factory: %w", err)
		}
		e, err := api.ParseFactoryEntry(data)
		if err != nil {
			return fmt.Errorf("factory: %s: %w", path, err)
		}
		if err := f.addEntry(e); err != nil {
			return fmt.Errorf("factory: %s: %w", path, err)
		}
	}
	return nil
}

func (f *Factory) addEntry(e api.FactoryEntrySpec) error {
	site, err := f.opts.Sites(e)
	if err != nil {
		return fmt.Errorf("entry %q: site: %w", e.Name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.entries[e.Name]
	if st == nil {
		st = &entryState{}
		f.entries[e.Name] = st
		// Sequence numbers go on after the journal's.
		for _, r := range f.records {
			if r.Entry == e.Name && r.Seq > st.seq {
				st.seq = r.Seq
			}
		}
		st.funnel = f.countPast(e.Name)
	}
	if c, ok := st.site.(interface{ Close() error }); ok && st.site != site {
		c.Close()
	}
	st.e, st.site = e, site
	return nil
}

// countPast counts the journal's records of an entry into a funnel.
func (f *Factory) countPast(entry string) api.Funnel {
	var fn api.Funnel
	for _, r := range f.records {
		if r.Entry != entry {
			continue
		}
		fn.Requested++
		if !r.Joined.IsZero() {
			fn.Validated++
		}
		switch r.Outcome {
		case "failed":
			fn.Failed++
		case "lost":
			fn.Lost++
		case "done":
			fn.Done++
		}
	}
	return fn
}

// SetEntry adds or replaces an entry, durably, and wakes the factory.
func (f *Factory) SetEntry(e api.FactoryEntrySpec) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if err := f.addEntry(e); err != nil {
		return err
	}
	path := filepath.Join(f.entDir, e.Name+".json")
	if err := jsonfile.Write(path, e); err != nil {
		return fmt.Errorf("factory: %w", err)
	}
	if err := syncDir(f.entDir); err != nil {
		return err
	}
	f.Kick()
	return nil
}

// RemoveEntry removes an entry: it submits no more glideins; those it has
// run themselves down (idle timeout, lifetime) and stay in the journal
// until their site forgets them. It waits for a cycle under way, so that
// once it returns no submission of the entry is in flight: whoever lists
// the entry's site by its prefix then sees every glidein it will ever
// have. Removing an unknown entry is not an error.
func (f *Factory) RemoveEntry(name string) error {
	f.cycleMu.Lock()
	defer f.cycleMu.Unlock()
	if err := os.Remove(filepath.Join(f.entDir, name+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("factory: %w", err)
	}
	f.mu.Lock()
	st := f.entries[name]
	delete(f.entries, name)
	f.mu.Unlock()
	if st != nil {
		if c, ok := st.site.(interface{ Close() error }); ok {
			c.Close()
		}
	}
	return syncDir(f.entDir)
}

// Kick asks for a cycle now.
func (f *Factory) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Run cycles until ctx ends.
func (f *Factory) Run(ctx context.Context) {
	t := time.NewTicker(f.opts.Interval)
	defer t.Stop()
	for {
		if err := f.Cycle(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("factory cycle", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.kick:
		}
	}
}

// prefix is the ID prefix of an entry's glideins.
func (f *Factory) prefix(entry string) string {
	return api.FactoryPrefix(f.opts.Pool) + entry + "-"
}

// newID makes the ID of the entry's glidein number seq.
func (f *Factory) newID(entry string, seq int64) string {
	var b [4]byte
	rand.Read(b[:])
	return f.prefix(entry) + strconv.FormatInt(seq, 10) + "-" + hex.EncodeToString(b[:])
}

// entryList returns the entries in name order.
func (f *Factory) entryList() []*entryState {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*entryState, 0, len(f.entries))
	for _, st := range f.entries {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].e.Name < out[j].e.Name })
	return out
}

// view is one entry's glideins as one cycle sees them.
type view struct {
	st      *entryState
	listed  map[string]glidein.Glidein
	ok      bool // the site answered
	queued  int
	running int
	joined  int
	claimed int
	idle    int // queued, or running without a claimed slot
	stale   []*Record
	matched int
	want    int
	submit  int
	// idleOffers are the offers of the idle glideins (nil each for a
	// site without offers); wants the offer of each glidein wanted, for
	// an entry with offers; plans the offers each submission starts on.
	idleOffers [][]string
	wants      []string
	plans      [][]string
}

// Cycle looks at the pool and the sites once and submits what is missing.
func (f *Factory) Cycle(ctx context.Context) error {
	f.cycleMu.Lock()
	defer f.cycleMu.Unlock()
	now := f.opts.Now()
	entries := f.entryList()
	f.mu.Lock()
	none := len(entries) == 0 && len(f.records) == 0
	f.mu.Unlock()
	if none {
		return nil // nothing to keep: the pool is not even asked
	}
	views := make([]*view, len(entries))
	var wg sync.WaitGroup
	for i, st := range entries {
		v := &view{st: st}
		views[i] = v
		wg.Add(1)
		go func() {
			defer wg.Done()
			gs, err := st.site.List(ctx, f.prefix(st.e.Name))
			f.mu.Lock()
			defer f.mu.Unlock()
			if err != nil {
				st.err = err.Error()
				return
			}
			st.err = ""
			v.ok = true
			v.listed = make(map[string]glidein.Glidein, len(gs))
			for _, g := range gs {
				v.listed[g.ID] = g
			}
		}()
	}
	wg.Wait()
	for _, st := range entries {
		f.loadOffers(ctx, st)
	}
	present, others, perr := f.opts.Source.Glideins(ctx)
	subs, ierr := f.opts.Source.Idle(ctx)
	if err := errors.Join(perr, ierr); err != nil {
		f.mu.Lock()
		f.status.LastCycle, f.status.Error = now, err.Error()
		f.mu.Unlock()
		// Without the collector, no glidein is judged lost and none is
		// submitted.
		return err
	}
	for _, v := range views {
		if v.ok {
			f.reconcile(ctx, v, present, now)
		}
	}
	f.demand(views, subs, others)
	f.plan(views, now)
	for _, v := range views {
		f.submit(ctx, v, now)
	}
	f.refresh(ctx, views, now)
	f.mu.Lock()
	idle := 0
	for _, s := range subs {
		idle += len(s.Jobs)
	}
	f.status.LastCycle, f.status.Error, f.status.IdleJobs = now, "", idle
	f.mu.Unlock()
	return nil
}

// event records what happened to a glidein of st; f.mu is held.
func (st *entryState) event(now time.Time, id, what, reason string) {
	st.events = append(st.events, api.FactoryEvent{Time: now, Glidein: id, What: what, Reason: reason})
	if len(st.events) > maxEvents {
		st.events = st.events[len(st.events)-maxEvents:]
	}
}

// validationFailed reports whether a site's reason for a failed glidein
// says it exited with glidein.ExitValidation.
func validationFailed(g glidein.Glidein) bool {
	code := strconv.Itoa(glidein.ExitValidation)
	return g.State == glidein.Failed && (strings.Contains(g.Reason, "status "+code) || strings.Contains(g.Reason, "exit code "+code))
}

// reconcile brings the journal of one entry in line with its site and
// the collector.
func (f *Factory) reconcile(ctx context.Context, v *view, present map[string]Presence, now time.Time) {
	st := v.st
	name := st.e.Name
	f.mu.Lock()
	f.adoptListed(v, now)
	var cancel []string
	for _, r := range f.records {
		if r.Entry != name {
			continue
		}
		if f.reconcileRecord(v, r, present, now) {
			cancel = append(cancel, r.ID)
		}
	}
	st.funnel.Queued, st.funnel.Running, st.funnel.Joined, st.funnel.Claimed = v.queued, v.running, v.joined, v.claimed
	f.mu.Unlock()
	f.cancelAtSite(ctx, st, cancel)
}

// adoptListed journals what the site of v lists and the journal does not:
// a record lost with a crash of an older journal, adopted. f.mu is held.
func (f *Factory) adoptListed(v *view, now time.Time) {
	st := v.st
	name := st.e.Name
	for id, g := range v.listed {
		if _, ok := f.records[id]; ok {
			continue
		}
		seq, _ := strconv.ParseInt(strings.SplitN(strings.TrimPrefix(id, f.prefix(name)), "-", 2)[0], 10, 64)
		r := &Record{ID: id, Entry: name, Seq: seq, Phase: Submitted, Intended: now, Submitted: now}
		if g.State.Ended() {
			r.Phase, r.Ended, r.Outcome, r.Reason = Ended, now, "unknown", g.Reason
		}
		f.records[id] = r
		if seq > st.seq {
			st.seq = seq
		}
		st.funnel.Requested++
		st.event(now, id, "adopted", "listed by the site, not in the journal")
		f.putLocked(r)
	}
}

// reconcileRecord brings r, a record of the entry of v, in line with the
// site's listing and the collector's presence, and counts it in v: an
// ended record the site forgot is forgotten, an unlisted one is stale,
// being submitted or lost, and a listed one is judged by its glidein's
// state. It reports whether the site is to cancel (clean up) the glidein.
// f.mu is held.
func (f *Factory) reconcileRecord(v *view, r *Record, present map[string]Presence, now time.Time) (cancel bool) {
	st := v.st
	g, listed := v.listed[r.ID]
	if r.Phase == Ended {
		if !listed {
			f.journal.remove(r.ID)
			delete(f.records, r.ID)
			delete(f.cleaned, r.ID)
			return false
		}
		// Ended before a restart, or its clean-up failed.
		return g.State.Final() && !f.cleaned[r.ID]
	}
	if !listed {
		switch {
		case r.Phase == Intent && now.Sub(r.Intended) >= f.opts.SubmitGrace:
			v.stale = append(v.stale, r)
		case r.Phase == Intent:
			v.idle++ // being submitted
			v.idleOffers = append(v.idleOffers, r.Offers)
			v.queued++
		default:
			f.end(st, r, now, "lost", "its site no longer lists it")
		}
		return false
	}
	if r.Phase == Intent {
		r.Phase, r.Submitted = Submitted, now
		st.event(now, r.ID, "adopted", "recorded before a restart, found at the site")
		f.putLocked(r)
	}
	p, here := present[r.ID]
	if here {
		r.LastSeen = now
		if r.Joined.IsZero() {
			r.Joined = now
			st.funnel.Validated++
			st.event(now, r.ID, "joined", "")
			f.putLocked(r)
		}
		if p.Claimed > 0 && r.Claimed.IsZero() {
			r.Claimed = now
			f.putLocked(r)
		}
	}
	if g.State == glidein.Finishing {
		// How it ended is not known yet: the next cycle tells done
		// from lost. It runs nothing meanwhile.
		return false
	}
	return f.judgeListed(v, r, g, p, here, now)
}

// judgeListed ends r by what its site says of its glidein g (done, failed
// validation, failed before joining, lost), by its agent gone from the
// pool too long, or by its not joining in time; or else counts it in v as
// queued, running, joined, claimed or idle. here says whether the
// collector knows it, p what it knows. It reports whether the site is to
// cancel (clean up) the glidein. f.mu is held.
func (f *Factory) judgeListed(v *view, r *Record, g glidein.Glidein, p Presence, here bool, now time.Time) (cancel bool) {
	st := v.st
	cancel = g.State.Ended()
	switch {
	case g.State == glidein.Done:
		f.end(st, r, now, "done", g.Reason)
	case validationFailed(g):
		reason := g.Reason
		if !strings.Contains(reason, "validation failed") {
			reason = "validation failed: " + reason
		}
		f.end(st, r, now, "failed", reason)
	case g.State == glidein.Failed && r.Joined.IsZero():
		f.end(st, r, now, "failed", g.Reason)
	case g.State.Ended():
		f.end(st, r, now, "lost", g.Reason)
	case g.State == glidein.Queued:
		v.queued++
		v.idle++
		v.idleOffers = append(v.idleOffers, r.Offers)
	case !r.Joined.IsZero() && !here && now.Sub(r.LastSeen) >= f.opts.HeartbeatGrace:
		f.end(st, r, now, "lost", fmt.Sprintf("its agent left the pool %s ago while its site shows it running", now.Sub(r.LastSeen).Round(time.Second)))
		cancel = true
	case r.Joined.IsZero() && !g.Started.IsZero() && now.Sub(g.Started) >= f.opts.JoinTimeout:
		f.end(st, r, now, "failed", fmt.Sprintf("running for %s without joining the pool", now.Sub(g.Started).Round(time.Second)))
		cancel = true
	default:
		v.running++
		if here {
			v.joined++
		}
		if here && p.Claimed > 0 {
			v.claimed++
		} else {
			v.idle++
			v.idleOffers = append(v.idleOffers, r.Offers)
		}
	}
	return cancel
}

// cancelAtSite asks the site of st to cancel the glideins ids, and
// records which it cleaned up. f.mu is not held.
func (f *Factory) cancelAtSite(ctx context.Context, st *entryState, ids []string) {
	for _, id := range ids {
		// Also what an ended glidein left on the site (its directory on
		// an SSH host): the site then forgets it, and so does the journal.
		// A site that remembers ended glideins (sacct) is asked once.
		err := st.site.Cancel(ctx, id)
		if err != nil {
			f.log.Warn("cancelling a glidein", "entry", st.e.Name, "glidein", id, "err", err)
		}
		f.mu.Lock()
		f.cleaned[id] = err == nil
		f.mu.Unlock()
	}
}

// end records that r ended; f.mu is held.
func (f *Factory) end(st *entryState, r *Record, now time.Time, outcome, reason string) {
	r.Phase, r.Ended, r.Outcome, r.Reason = Ended, now, outcome, reason
	switch outcome {
	case "failed":
		st.funnel.Failed++
		st.failures = append(st.failures, now)
		f.trip(st, now, reason)
	case "lost":
		st.funnel.Lost++
	case "done":
		st.funnel.Done++
	}
	st.event(now, r.ID, outcome, reason)
	f.log.Info("glidein ended", "entry", st.e.Name, "glidein", r.ID, "outcome", outcome, "reason", reason)
	f.putLocked(r)
}

// trip opens st's breaker when its failures within the window reach the
// limit; f.mu is held.
func (f *Factory) trip(st *entryState, now time.Time, last string) {
	b := entryBreaker(&st.e)
	keep := st.failures[:0]
	for _, t := range st.failures {
		if now.Sub(t) < time.Duration(b.Window) {
			keep = append(keep, t)
		}
	}
	st.failures = keep
	if len(keep) >= b.Failures && !now.Before(st.open) {
		st.open = now.Add(time.Duration(b.Backoff))
		st.reason = fmt.Sprintf("%d glideins failed within %s, the last: %s", len(keep), time.Duration(b.Window), last)
		st.failures = nil
		st.ramp = 0
		st.event(now, "", "breaker", st.reason)
		f.log.Warn("factory entry stops submitting", "entry", st.e.Name, "until", st.open, "reason", st.reason)
	}
}

// putLocked writes r to the journal, logging a failure (the record is
// still in memory and written again at its next change).
func (f *Factory) putLocked(r *Record) {
	if err := f.journal.put(r); err != nil {
		f.log.Error("factory journal", "glidein", r.ID, "err", err)
	}
}

// demand runs the negotiator's matchmaking of the idle jobs against the
// glideins the entries have that run nothing yet, then against as many
// glideins more as each entry may still have, and sets what each entry
// wants: the glideins the matches use, less those it has. An entry with
// offers has its new glideins matched after the others, offer by offer,
// cheapest first, against the jobs still unmatched (offers.go).
func (f *Factory) demand(views []*view, subs []negotiator.Submitter, others []*classad.Ad) {
	// The pool's own unclaimed slots first: what they run needs no
	// glidein.
	var slots []*negotiator.Slot
	for _, ad := range others {
		slots = append(slots, negotiator.NewSlot(ad, "", ""))
	}
	owner := map[*negotiator.Slot]*view{}
	glideinOf := map[*negotiator.Slot]int{}
	add := func(to *[]*negotiator.Slot, v *view, t api.FactoryTemplate, k int) {
		ads, err := t.MachineAds(fmt.Sprintf("%s-%d", v.st.e.Name, k))
		if err != nil {
			return // Validate checked the attributes
		}
		for _, ad := range ads {
			s := negotiator.NewSlot(ad, "", "")
			*to = append(*to, s)
			owner[s], glideinOf[s] = v, k
		}
	}
	f.mu.Lock()
	rooms := map[*view]int{}
	for _, v := range views {
		if !v.ok {
			continue
		}
		room := max(v.st.e.Limits.MaxRunning-v.queued-v.running-len(v.stale), 0) + len(v.stale)
		rooms[v] = room
		if len(v.st.offers) == 0 {
			for k := 0; k < v.idle+room; k++ {
				add(&slots, v, v.st.e.Template, k)
			}
			continue
		}
		// Its idle glideins as what they were started on (the first of
		// their offers: the others have more).
		for k, offers := range v.idleOffers {
			name := ""
			if len(offers) > 0 {
				name = offers[0]
			} else if len(v.st.offers) > 0 {
				name = v.st.offers[0].Name
			}
			add(&slots, v, v.st.offerTemplate(name), k)
		}
	}
	f.mu.Unlock()
	used := map[*view]map[int]bool{}
	matched := map[*view]int{}
	rest := subs
	if len(slots) > 0 {
		ms := negotiator.Matchmake(slots, subs)
		for _, m := range ms {
			v := owner[m.Slot]
			if v == nil {
				continue // one of the pool's own slots
			}
			if used[v] == nil {
				used[v] = map[int]bool{}
			}
			used[v][glideinOf[m.Slot]] = true
			matched[v]++
		}
		rest = unmatched(subs, ms)
	}
	for _, v := range views {
		if !v.ok || len(v.st.offers) == 0 {
			continue
		}
		v.wants = nil
		room := rooms[v]
		for _, o := range v.st.offers {
			if room <= 0 || len(rest) == 0 {
				break
			}
			var oslots []*negotiator.Slot
			t := v.st.offerTemplate(o.Name)
			for k := 0; k < room; k++ {
				add(&oslots, v, t, k)
			}
			ms := negotiator.Matchmake(oslots, rest)
			u := map[int]bool{}
			for _, m := range ms {
				u[glideinOf[m.Slot]] = true
			}
			for range u {
				v.wants = append(v.wants, o.Name)
			}
			matched[v] += len(ms)
			room -= len(u)
			rest = unmatched(rest, ms)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range views {
		v.matched = matched[v]
		if len(v.st.offers) > 0 {
			v.want = len(v.wants)
			v.st.wants = map[string]int{}
			for _, w := range v.wants {
				v.st.wants[w]++
			}
		} else {
			v.want = max(len(used[v])-v.idle, 0)
			v.st.wants = nil
		}
		v.st.matched, v.st.wanted = v.matched, len(used[v])+len(v.wants)
	}
}

// plan decides how many glideins each entry submits this cycle.
func (f *Factory) plan(views []*view, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tq, tr := 0, 0
	for _, v := range views {
		tq += v.queued
		tr += v.queued + v.running
	}
	for _, v := range views {
		st := v.st
		if !v.ok || now.Before(st.open) {
			v.submit = 0
			continue
		}
		if st.reason != "" {
			st.event(now, "", "breaker", "closed after its back-off")
			st.reason = ""
		}
		if v.want == 0 {
			st.ramp = 0
			st.capped = ""
			continue
		}
		l := st.e.Limits
		st.ramp = nextRamp(l, st.ramp, max(perCycle(l), 1))
		n := min(v.want, st.ramp, perCycle(l), l.MaxQueued-v.queued, l.MaxRunning-v.queued-v.running)
		if f.opts.Totals.MaxQueued > 0 {
			n = min(n, f.opts.Totals.MaxQueued-tq)
		}
		if f.opts.Totals.MaxRunning > 0 {
			n = min(n, f.opts.Totals.MaxRunning-tr)
		}
		n = max(n, 0)
		// The budget, each glidein at its price.
		wanted := n
		n, v.plans, st.capped = f.budget(v, n)
		if n >= wanted {
			st.capped = ""
		} else if st.capped != "" && (len(st.events) == 0 || st.events[len(st.events)-1].Reason != st.capped) {
			st.event(now, "", "capped", st.capped)
			f.log.Info("factory entry capped by its budget", "entry", st.e.Name, "reason", st.capped)
		}
		v.submit = n
		tq += n
		tr += n
	}
}

// submit submits v.submit glideins: first the stale intents again, with
// their IDs, then new ones; each recorded before its Submit. Stale intents
// not needed are dropped: their site does not have them.
func (f *Factory) submit(ctx context.Context, v *view, now time.Time) {
	st := v.st
	var todo []*Record
	f.mu.Lock()
	for i, r := range v.stale {
		if i < v.submit {
			if i < len(v.plans) && v.plans[i] != nil {
				r.Offers = v.plans[i]
			}
			todo = append(todo, r)
			continue
		}
		f.journal.remove(r.ID)
		delete(f.records, r.ID)
	}
	for len(todo) < v.submit {
		st.seq++
		r := &Record{ID: f.newID(st.e.Name, st.seq), Entry: st.e.Name, Seq: st.seq, Phase: Intent, Intended: now}
		if i := len(todo); i < len(v.plans) {
			r.Offers = v.plans[i]
		}
		if err := f.journal.put(r); err != nil {
			st.err = err.Error()
			f.log.Error("factory journal: submitting nothing", "entry", st.e.Name, "err", err)
			break
		}
		f.records[r.ID] = r
		todo = append(todo, r)
	}
	e := st.e
	templates := map[*Record]api.FactoryTemplate{}
	for _, r := range todo {
		if len(r.Offers) > 0 {
			templates[r] = st.offerTemplate(r.Offers[0])
		}
	}
	f.mu.Unlock()
	// At most submitParallel at once: a site's Submit is slow (sbatch,
	// an SSH session), and its methods may be called concurrently.
	sem := make(chan struct{}, submitParallel)
	var wg sync.WaitGroup
	for _, r := range todo {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e := e
			if t, ok := templates[r]; ok {
				e.Template = t
			}
			issued, expires, err := f.submitOne(ctx, e, st.site, r.ID, r.Offers)
			f.mu.Lock()
			defer f.mu.Unlock()
			switch {
			case err == nil || errors.Is(err, glidein.ErrDuplicate):
				r.Phase, r.Submitted = Submitted, f.opts.Now()
				r.Intended = r.Submitted
				r.TokenIssued, r.TokenExpires = issued, expires
				st.funnel.Requested++
				st.funnel.Queued++
				st.event(r.Submitted, r.ID, "requested", "")
				f.putLocked(r)
			default:
				// The site may have it all the same: the intent stays,
				// and List shows within SubmitGrace whether it does.
				st.event(now, r.ID, "submit-error", err.Error())
				st.failures = append(st.failures, now)
				f.trip(st, now, "submit: "+err.Error())
				f.log.Warn("submitting a glidein", "entry", e.Name, "glidein", r.ID, "err", err)
			}
		})
	}
	wg.Wait()
}

// submitParallel bounds the submissions of one entry in flight.
const submitParallel = 8

// submitOne submits glidein id of entry e, and returns when the
// credentials in its files were issued and when they expire (zero
// without any).
func (f *Factory) submitOne(ctx context.Context, e api.FactoryEntrySpec, site glidein.Site, id string, offers []string) (issued, expires time.Time, err error) {
	req, err := f.opts.Launch(ctx, e, id)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("preparing glidein %s: %w", id, err)
	}
	req.ID = id
	req.Lifetime = time.Duration(e.Template.Lifetime)
	req.CPUs, req.MemoryMB = e.Template.CPUs, e.Template.MemoryMB
	req.Offers = offers
	req.Lineage, req.Address = e.Lineage, e.Address
	issued, expires = CredentialsExpiry(req.Files)
	_, err = site.Submit(ctx, req)
	return issued, expires, err
}

// refresh writes new credentials into the glideins whose credentials
// expire within RefreshBefore (or half their life, when that is
// shorter), on sites that write files: running ones, and queued ones (a
// batch job that waits longer than its token lasts starts with a new
// one), so that none outlives its credentials while its site keeps it.
func (f *Factory) refresh(ctx context.Context, views []*view, now time.Time) {
	if f.opts.Refresh == nil {
		return
	}
	for _, v := range views {
		fw, ok := v.st.site.(glidein.FileWriter)
		if !ok {
			continue
		}
		f.mu.Lock()
		var due []*Record
		for _, r := range f.records {
			if r.Entry != v.st.e.Name || r.Phase != Submitted {
				continue
			}
			g, ok := v.listed[r.ID]
			if !ok || (g.State != glidein.Running && g.State != glidein.Queued) {
				continue
			}
			// Due at RefreshBefore its expiry, or at half its life when
			// that is shorter. A record of no expiry (one written before
			// submissions recorded it) is refreshed once its glidein
			// joined, which says when it expires.
			if r.TokenExpires.IsZero() {
				if !r.Joined.IsZero() && g.State == glidein.Running {
					due = append(due, r)
				}
				continue
			}
			if r.TokenExpires.Sub(now) < min(f.opts.RefreshBefore, r.TokenExpires.Sub(r.TokenIssued)/2) {
				due = append(due, r)
			}
		}
		e := v.st.e
		f.mu.Unlock()
		for _, r := range due {
			files, exp, err := f.opts.Refresh(ctx, e, r.ID)
			if err == nil {
				err = fw.WriteFiles(ctx, r.ID, files)
			}
			// The sooner of what Refresh says and what the files say
			// (a certificate may end before the token).
			issued, expires := CredentialsExpiry(files)
			if issued.IsZero() {
				issued = now
			}
			if expires.IsZero() || (!exp.IsZero() && exp.Before(expires)) {
				expires = exp
			}
			f.mu.Lock()
			if err != nil {
				v.st.event(now, r.ID, "refresh-error", err.Error())
			} else {
				r.TokenIssued, r.TokenExpires = issued, expires
				v.st.event(now, r.ID, "refreshed", "until "+expires.UTC().Format(time.RFC3339))
				f.putLocked(r)
			}
			f.mu.Unlock()
		}
	}
}

// Status reports the entries and their funnels.
func (f *Factory) Status() api.FactoryStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.status
	s.Entries = []api.FactoryEntry{}
	now := f.opts.Now()
	names := make([]string, 0, len(f.entries))
	for n := range f.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := f.entries[n]
		b := entryBreaker(&st.e)
		recent := 0
		for _, t := range st.failures {
			if now.Sub(t) < time.Duration(b.Window) {
				recent++
			}
		}
		fe := api.FactoryEntry{Name: n, Config: st.e, Funnel: st.funnel, Matched: st.matched, Wanted: st.wanted,
			Ramp: st.ramp, Error: st.err, Capped: st.capped, Offers: st.apiOffers(), Wants: st.wants, Events: append([]api.FactoryEvent(nil), st.events...),
			Breaker: api.BreakerStatus{Open: now.Before(st.open), RecentFailures: recent}}
		if fe.Breaker.Open {
			fe.Breaker.Until, fe.Breaker.Reason = st.open, st.reason
		}
		for _, r := range f.records {
			if r.Entry == n && r.Phase == Submitted && !r.TokenExpires.IsZero() &&
				(fe.CredentialsExpire.IsZero() || r.TokenExpires.Before(fe.CredentialsExpire)) {
				fe.CredentialsExpire = r.TokenExpires
			}
		}
		s.Entries = append(s.Entries, fe)
	}
	return s
}

// Records returns a copy of the journal's records, in ID order.
func (f *Factory) Records() []Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Record, 0, len(f.records))
	for _, r := range f.records {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Close closes the entries' sites that hold connections.
func (f *Factory) Close() error {
	for _, st := range f.entryList() {
		if c, ok := st.site.(interface{ Close() error }); ok {
			c.Close()
		}
	}
	return nil
}
