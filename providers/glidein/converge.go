package glidein

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	site "github.com/pond-htc/pond/overlay/glidein"
)

// pollInterval is how often the site is listed while apply or destroy
// waits for it.
const pollInterval = 500 * time.Millisecond

// submitParallelism is how many submissions are sent at once.
const submitParallelism = 4

// reconciled is the journal of one resource set against what its site
// lists.
type reconciled struct {
	// live are the records of glideins queued or running on the site,
	// adopted ones included.
	live []*record
	// retry are intents the site never got, older than the grace period.
	retry []*record
	// cancel are records marked cancelling whose glidein still runs.
	cancel []*record
	// wait is how long until the youngest intent the site does not show
	// is older than the grace period (0: none).
	wait time.Duration
}

// reconcile sets the journal's records of prefix against gs, what the
// site lists under prefix, updating the journal: glideins the site has
// but the journal lacks are adopted, records of glideins that ended or
// that the site forgot are removed.
func (p *Provider) reconcile(ctx context.Context, prefix string, recs []*record, gs []site.Glidein, progress func(string)) (reconciled, error) {
	var out reconciled
	byID := make(map[string]site.Glidein, len(gs))
	for _, g := range gs {
		byID[g.ID] = g
	}
	inJournal := make(map[string]bool, len(recs))
	now := time.Now()
	var errs []error
	for _, r := range recs {
		inJournal[r.ID] = true
		g, onSite := byID[r.ID]
		switch {
		case onSite && !g.State.Ended():
			if r.State == recCancelling {
				out.cancel = append(out.cancel, r)
				continue
			}
			if r.State != recSubmitted || r.SiteID != g.SiteID || r.Host != g.Host {
				if r.State == recIntent {
					progress(fmt.Sprintf("%s found on the site (%s), sent by an interrupted run", r.ID, siteName(g)))
				}
				r.State, r.SiteID, r.Host = recSubmitted, g.SiteID, g.Host
				errs = append(errs, p.journal.write(r))
			}
			out.live = append(out.live, r)
		case onSite:
			if r.State != recCancelling {
				progress(fmt.Sprintf("%s %s%s", r.ID, g.State, reasonOf(g)))
			}
			errs = append(errs, p.forget(ctx, r.ID))
		case r.State == recIntent:
			if age := now.Sub(r.Updated); age < p.submitGrace {
				out.wait = max(out.wait, p.submitGrace-age)
				continue
			}
			out.retry = append(out.retry, r)
		default:
			// Submitted or cancelling, and the site no longer knows it.
			errs = append(errs, p.forget(ctx, r.ID))
		}
	}
	for _, g := range gs {
		if inJournal[g.ID] || g.State.Ended() {
			continue
		}
		r := &record{ID: g.ID, Prefix: prefix, Index: indexOf(prefix, g.ID), State: recSubmitted,
			SiteID: g.SiteID, Host: g.Host, Adopted: true, Created: now.UTC()}
		progress(fmt.Sprintf("%s adopted: the site has it (%s) and the journal did not", g.ID, siteName(g)))
		errs = append(errs, p.journal.write(r))
		out.live = append(out.live, r)
	}
	return out, errors.Join(errs...)
}

// forget removes glidein id's record from the journal once it has no
// glidein on the site (it ended, the site forgot it, or it never reached
// the site), first letting a site that keeps something of its own for
// each glidein (site.Forgetter) delete it.
func (p *Provider) forget(ctx context.Context, id string) error {
	if f, ok := p.site.(site.Forgetter); ok {
		if err := f.Forget(context.WithoutCancel(ctx), id); err != nil {
			return fmt.Errorf("forgetting %s: %w", id, err)
		}
	}
	return p.journal.remove(id)
}

func siteName(g site.Glidein) string {
	if g.SiteID == "" {
		return string(g.State)
	}
	return g.SiteID + ", " + string(g.State)
}

func reasonOf(g site.Glidein) string {
	if g.Reason == "" {
		return ""
	}
	return ": " + g.Reason
}

// settle lists the site and reconciles the journal with it, waiting, as
// long as some intent is younger than the grace period, for what a
// killed pondctl may still have had on its way to the site.
func (p *Provider) settle(ctx context.Context, prefix string, progress func(string)) (reconciled, error) {
	said := false
	for {
		gs, err := p.list(ctx, prefix)
		if err != nil {
			return reconciled{}, fmt.Errorf("listing the %s site: %w", p.kind, err)
		}
		recs, err := p.journal.list(prefix)
		if err != nil {
			return reconciled{}, err
		}
		rc, err := p.reconcile(ctx, prefix, recs, gs, progress)
		if err != nil || rc.wait == 0 {
			return rc, err
		}
		if !said {
			progress(fmt.Sprintf("waiting %s for submissions of an interrupted run to appear on the site", rc.wait.Round(time.Second)))
			said = true
		}
		select {
		case <-ctx.Done():
			return rc, ctx.Err()
		case <-time.After(rc.wait):
		}
	}
}

// converge makes the site run sp.Nodes glideins of spec sp under prefix:
// it keeps live glideins of the same spec, cancels surplus ones and those
// of another spec, sends again the submissions that never reached the
// site (same ID) and submits new glideins for the missing indexes. It
// returns what the site lists at the end.
func (p *Provider) converge(ctx context.Context, address, prefix string, sp spec, progress func(string)) ([]site.Glidein, error) {
	for round := 1; ; round++ {
		gs, again, err := p.convergeOnce(ctx, address, prefix, sp, progress)
		if err != nil || !again || round == maxRounds {
			return gs, err
		}
	}
}

// maxRounds bounds how many times one apply replaces glideins that ended
// while it waited for the others.
const maxRounds = 3

// convergeOnce is one round of converge. It reports whether a glidein it
// kept (not one it submitted) ended while it waited, which another round
// replaces.
func (p *Provider) convergeOnce(ctx context.Context, address, prefix string, sp spec, progress func(string)) ([]site.Glidein, bool, error) {
	hash := sp.hash()
	rc, err := p.settle(ctx, prefix, progress)
	if err != nil {
		return p.listOrNil(ctx, prefix), false, err
	}
	// One live glidein per index below Nodes, of this spec or adopted;
	// the rest are cancelled.
	slices.SortStableFunc(rc.live, func(a, b *record) int {
		if a.Index != b.Index {
			return a.Index - b.Index
		}
		return a.Created.Compare(b.Created)
	})
	taken := map[int]*record{}
	var surplus, unplaced []*record
	for _, r := range rc.live {
		switch {
		case r.Spec != "" && r.Spec != hash:
			surplus = append(surplus, r)
		case r.Index < 0 || r.Index >= sp.Nodes || taken[r.Index] != nil:
			unplaced = append(unplaced, r)
		default:
			taken[r.Index] = r
		}
	}
	// An adopted glidein without an index of its own takes a free one.
	for _, r := range unplaced {
		i := freeIndex(taken, sp.Nodes)
		if i < 0 || !r.Adopted {
			surplus = append(surplus, r)
			continue
		}
		r.Index = i
		taken[i] = r
		if err := p.journal.write(r); err != nil {
			return p.listOrNil(ctx, prefix), false, err
		}
	}
	surplus = append(surplus, rc.cancel...)
	if len(surplus) > 0 {
		if err := p.cancelAll(ctx, prefix, surplus, progress); err != nil {
			return p.listOrNil(ctx, prefix), false, err
		}
	}
	// Submissions: the intents the site never got, with their IDs, then
	// new glideins for the indexes still free.
	var todo []*record
	for _, r := range rc.retry {
		if r.Index >= 0 && r.Index < sp.Nodes && taken[r.Index] == nil {
			progress(fmt.Sprintf("%s never reached the site: sending it again", r.ID))
			taken[r.Index] = r
			todo = append(todo, r)
			continue
		}
		if err := p.forget(ctx, r.ID); err != nil {
			return p.listOrNil(ctx, prefix), false, err
		}
	}
	for i := range sp.Nodes {
		if taken[i] != nil {
			continue
		}
		r := &record{ID: newID(prefix, i), Address: address, Prefix: prefix, Index: i, Created: time.Now().UTC()}
		taken[i] = r
		todo = append(todo, r)
	}
	var submitted []string
	if len(todo) > 0 {
		var err error
		submitted, err = p.submitAll(ctx, todo, sp, hash, progress)
		if err != nil {
			return p.listOrNil(ctx, prefix), false, err
		}
	}
	var kept []string
	for _, r := range taken {
		if !slices.Contains(submitted, r.ID) {
			kept = append(kept, r.ID)
		}
	}
	return p.waitStarted(ctx, prefix, submitted, kept, progress)
}

func freeIndex(taken map[int]*record, n int) int {
	for i := range n {
		if taken[i] == nil {
			return i
		}
	}
	return -1
}

func (p *Provider) listOrNil(ctx context.Context, prefix string) []site.Glidein {
	gs, err := p.list(context.WithoutCancel(ctx), prefix)
	if err != nil {
		return nil
	}
	return gs
}

// submitAll submits the records' glideins, a few at a time, and returns
// the IDs the site took.
func (p *Provider) submitAll(ctx context.Context, todo []*record, sp spec, hash string, progress func(string)) ([]string, error) {
	pool, err := p.lookupPool(ctx, sp.Pool)
	if err != nil {
		// Nothing was sent: the retried intents stay for the next run.
		return nil, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		ok   []string
	)
	sem := make(chan struct{}, submitParallelism)
	for _, r := range todo {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := p.submit(ctx, r, sp, hash, pool, progress)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.ID, err))
				return
			}
			ok = append(ok, r.ID)
		})
	}
	wg.Wait()
	sort.Strings(ok)
	return ok, errors.Join(errs...)
}

// submit sends one glidein: its ID is in the journal, synced, before the
// site sees it. A failed Submit leaves the intent: the next run finds the
// glidein on the site if it got there, and sends it again with the same
// ID once the grace period has passed if it did not.
func (p *Provider) submit(ctx context.Context, r *record, sp spec, hash string, pool poolInfo, progress func(string)) error {
	req, err := p.request(r.ID, sp, pool)
	if err != nil {
		return err
	}
	req.Lineage, req.Address = p.lineageOf(r.Prefix), r.Address
	// A record without a state is a new ID, never written before: no run
	// can have sent it.
	req.New = r.State == ""
	r.State, r.Spec = recIntent, hash
	if err := p.journal.write(r); err != nil {
		return err
	}
	g, err := p.site.Submit(ctx, req)
	if errors.Is(err, site.ErrDuplicate) {
		// Sent before by a run that did not record it: take it.
		gs, lerr := p.site.List(ctx, r.ID)
		if lerr != nil {
			return errors.Join(err, lerr)
		}
		found := false
		for _, x := range gs {
			if x.ID == r.ID {
				g, found = x, true
			}
		}
		if !found {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("submitting to the %s site: %w", p.kind, err)
	}
	r.State, r.SiteID, r.Host = recSubmitted, g.SiteID, g.Host
	if err := p.journal.write(r); err != nil {
		return err
	}
	progress(fmt.Sprintf("%s submitted (%s)", r.ID, siteName(g)))
	return nil
}

// waitStarted waits, up to the start timeout, until the glideins just
// submitted and those kept run, telling each change of state of the
// submitted ones. One just submitted that ends meanwhile is an error: the
// glidein failed to start (the next apply replaces it). A kept one that
// ends (one an interrupted run left queued) is reported as again, for
// converge to replace. It returns what the site lists at the end.
func (p *Provider) waitStarted(ctx context.Context, prefix string, submitted, kept []string, progress func(string)) (gs []site.Glidein, again bool, err error) {
	seen := map[string]site.State{}
	deadline := time.Now().Add(p.startTimeout)
	for {
		gs, err = p.list(ctx, prefix)
		if err != nil {
			return nil, false, fmt.Errorf("listing the %s site: %w", p.kind, err)
		}
		byID := map[string]site.Glidein{}
		for _, g := range gs {
			byID[g.ID] = g
		}
		waiting := false
		for _, id := range kept {
			switch g, ok := byID[id]; {
			case !ok || g.State.Ended():
				again = true
			case g.State == site.Queued:
				waiting = true
			}
		}
		var failed []error
		for _, id := range submitted {
			g, ok := byID[id]
			if !ok {
				continue
			}
			if seen[id] != g.State {
				seen[id] = g.State
				switch g.State {
				case site.Running:
					where := ""
					if g.Host != "" {
						where = " on " + g.Host
					}
					progress(fmt.Sprintf("%s running%s", id, where))
				case site.Queued:
					progress(fmt.Sprintf("%s queued", id))
				default:
					progress(fmt.Sprintf("%s %s%s", id, g.State, reasonOf(g)))
				}
			}
			if g.State.Ended() {
				failed = append(failed, fmt.Errorf("glidein %s %s%s", id, g.State, reasonOf(g)))
			}
			if g.State == site.Queued {
				waiting = true
			}
		}
		if len(failed) > 0 {
			return gs, false, errors.Join(failed...)
		}
		if again || !waiting || !time.Now().Before(deadline) {
			return gs, again, nil
		}
		select {
		case <-ctx.Done():
			return gs, false, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// cancelAll cancels the records' glideins, each marked cancelling in the
// journal first, and waits until the site shows them ended.
func (p *Provider) cancelAll(ctx context.Context, prefix string, rs []*record, progress func(string)) error {
	var errs []error
	ids := map[string]bool{}
	for _, r := range rs {
		ids[r.ID] = true
		if r.State != recCancelling {
			r.State = recCancelling
			if err := p.journal.write(r); err != nil {
				return err
			}
		}
		progress(fmt.Sprintf("cancelling %s", r.ID))
		if err := p.site.Cancel(ctx, r.ID); err != nil {
			errs = append(errs, fmt.Errorf("cancelling %s: %w", r.ID, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := p.waitEnded(ctx, prefix, ids); err != nil {
		return err
	}
	for _, r := range rs {
		if err := p.journal.remove(r.ID); err != nil {
			return err
		}
	}
	return nil
}

// waitEnded waits until none of ids (every glidein under prefix when ids
// is nil) is queued or running on the site, cancelling stragglers again
// now and then.
func (p *Provider) waitEnded(ctx context.Context, prefix string, ids map[string]bool) error {
	deadline := time.Now().Add(cancelTimeout)
	last := time.Now()
	for {
		gs, err := p.list(ctx, prefix)
		if err != nil {
			return fmt.Errorf("listing the %s site: %w", p.kind, err)
		}
		var left []string
		for _, g := range gs {
			if !g.State.Ended() && (ids == nil || ids[g.ID]) {
				left = append(left, g.ID)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s site still shows %d glideins running or queued %s after they were cancelled: %v", p.kind, len(left), cancelTimeout, left)
		}
		if time.Since(last) > 5*time.Second {
			for _, id := range left {
				_ = p.site.Cancel(ctx, id)
			}
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval / 2):
		}
	}
}

// destroy cancels every glidein of the resource, those the journal records
// and those the site lists under prefix, and waits until the site shows
// none queued or running; then it forgets them.
func (p *Provider) destroy(ctx context.Context, prefix string, progress func(string)) error {
	rc, err := p.settle(ctx, prefix, progress)
	if err != nil {
		return err
	}
	all := append(append(rc.live, rc.cancel...), rc.retry...)
	if len(all) > 0 {
		progress(fmt.Sprintf("cancelling %d glideins", len(all)))
	}
	var errs []error
	for _, r := range all {
		if r.State != recCancelling {
			r.State = recCancelling
			if err := p.journal.write(r); err != nil {
				return err
			}
		}
		if err := p.site.Cancel(ctx, r.ID); err != nil {
			errs = append(errs, fmt.Errorf("cancelling %s: %w", r.ID, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := p.waitEnded(ctx, prefix, nil); err != nil {
		return err
	}
	recs, err := p.journal.list(prefix)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := p.forget(ctx, r.ID); err != nil {
			return err
		}
	}
	if len(all) > 0 {
		progress(fmt.Sprintf("%d glideins ended", len(all)))
	}
	return nil
}
