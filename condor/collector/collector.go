// Package collector is pond's collector daemon: it keeps the ClassAds the
// daemons of a pool advertise (slots, schedds, submitters, negotiators,
// masters), expires them after their lifetime, drops them when their daemon
// shuts down, and answers queries with a constraint and a projection.
package collector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
)

// Options configure a Collector.
type Options struct {
	Lifetime time.Duration    // CLASSAD_LIFETIME (default 900s)
	Now      func() time.Time // clock (default time.Now)
	Logger   *slog.Logger
	// AcceptSubmitters, when set, says whether the schedd of node may
	// advertise its submitters here: nil, or why not. A pool that takes
	// flocked jobs only from some pools refuses the others' schedds.
	AcceptSubmitters func(node string) error
	// History, when set, records the slots' state changes (history.go);
	// its owner closes it.
	History *history.Store
}

type entry struct {
	typ     string
	source  string
	name    string // the ad's Name, what queries sort by
	wire    wire.Ad
	ad      *classad.Ad
	private wire.Ad
	expires time.Time
	// cedar is the ad printed in CEDAR's wire form, made at the first
	// CEDAR query that sends it.
	cedar atomic.Pointer[cedar.WireAd]
}

// Collector holds the pool's ads. It is safe for concurrent use.
type Collector struct {
	opts Options
	mu   sync.RWMutex
	ads  map[string]map[string][]*entry // type -> source -> ads
	// admit bounds the updates taken over the API being parsed and
	// stored at once (Update).
	admit chan struct{}
	// updates counts the updates taken (metrics.go).
	updates updateCounts
}

// New returns an empty collector.
func New(opts Options) *Collector {
	if opts.Lifetime <= 0 {
		opts.Lifetime = 900 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Collector{opts: opts, ads: map[string]map[string][]*entry{}, admit: make(chan struct{}, 2*runtime.GOMAXPROCS(0))}
}

// SetLifetime changes the default ad lifetime (on reconfig).
func (c *Collector) SetLifetime(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.opts.Lifetime = d
	c.mu.Unlock()
}

// Update stores the ads of an update, replacing the source's previous ads of
// that type (for a partial update, only those of the same Name). A node's
// token advertises only its node's ads (boundNode, sourceOf, adOf); each ad
// records the advertiser's subject as AuthenticatedIdentity.
//
// At most a few updates are parsed and stored at once (admit); the others
// wait for their turn, and one whose sender gave up (its context ended: a
// startd's update times out after 10 s, and its next one carries every ad
// again) is dropped, not applied late over a newer one. Else, in a pool of
// thousands of slots on a loaded machine, the updates of every node piled
// up behind the collector's lock, each with its ads parsed, and took
// gigabytes. An update over the API waits holding only its body's bytes
// (Handler): it is decoded once its turn comes.
func (c *Collector) Update(ctx context.Context, req *wire.UpdateRequest) (wire.UpdateResponse, error) {
	if err := c.waitTurn(ctx, req.Source); err != nil {
		return wire.UpdateResponse{}, err
	}
	defer func() { <-c.admit }()
	return c.admittedUpdate(ctx, req)
}

// waitTurn waits for an update's turn (admit), until ctx ends.
func (c *Collector) waitTurn(ctx context.Context, source string) error {
	select {
	case c.admit <- struct{}{}:
		return nil
	case <-ctx.Done():
		if source == "" {
			return fmt.Errorf("an update waited for its turn until its sender gave up: %w", ctx.Err())
		}
		return fmt.Errorf("the update of %s waited for its turn until its sender gave up: %w", source, ctx.Err())
	}
}

// admittedUpdate is Update once the update's turn came.
func (c *Collector) admittedUpdate(ctx context.Context, req *wire.UpdateRequest) (wire.UpdateResponse, error) {
	if err := ctx.Err(); err != nil {
		return wire.UpdateResponse{}, fmt.Errorf("the update of %s: its sender gave up: %w", req.Source, err)
	}
	cl, _ := auth.FromContext(ctx)
	if err := c.update(cl, req); err != nil {
		return wire.UpdateResponse{}, err
	}
	return wire.UpdateResponse{Partial: req.Partial}, nil
}

// admitting serves the updates over the API: it reads an update's body,
// waits for the update's turn (admit) holding only those bytes, and then
// has h decode and apply it. A sender that gives up meanwhile is told so,
// and its update dropped.
func (c *Collector) admitting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r) // answered by h
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, wire.MaxBody))
		if err != nil {
			wire.WriteError(w, wire.BodyErrorStatus(err), fmt.Errorf("reading %s request: %w", r.URL.Path, err))
			return
		}
		if err := c.waitTurn(r.Context(), ""); err != nil {
			wire.WriteError(w, http.StatusServiceUnavailable, err)
			return
		}
		defer func() { <-c.admit }()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// authorize is wire.Authorize for claims the caller already holds: a
// caller without claims (a node that checks no tokens) may do anything.
func authorize(cl *auth.Claims, need auth.Scope) error {
	if cl == nil || cl.Allows(need) {
		return nil
	}
	return fmt.Errorf("%w: %s's token does not grant %s", wire.ErrForbidden, cl.Subject, need.Name())
}

// update is Update for the caller cl (nil: a caller of a node that checks
// no tokens).
func (c *Collector) update(cl *auth.Claims, req *wire.UpdateRequest) error {
	if req.Type == "" || req.Source == "" {
		return fmt.Errorf("%w: update needs a type and a source", wire.ErrBadRequest)
	}
	if len(req.Removed) > 0 && !req.Partial {
		return fmt.Errorf("%w: update of %s: only a partial update removes ads by name (a full one replaces them all)", wire.ErrBadRequest, req.Source)
	}
	if err := authorize(cl, AdvertiseScope(req.Type)); err != nil {
		return err
	}
	node, bound := boundNode(cl)
	if bound {
		if err := sourceOf(node, req.Source); err != nil {
			return err
		}
		if c.opts.AcceptSubmitters != nil && strings.EqualFold(req.Type, wire.TypeSubmitter) && len(req.Ads) > 0 {
			if err := c.opts.AcceptSubmitters(node); err != nil {
				return fmt.Errorf("%w: the submitters of %s: %w", wire.ErrForbidden, node, err)
			}
		}
	}
	identity := ""
	if cl != nil {
		identity = cl.Subject
	}
	now := c.opts.Now()
	c.mu.RLock()
	life := c.opts.Lifetime
	c.mu.RUnlock()
	if req.Lifetime > 0 {
		life = time.Duration(req.Lifetime) * time.Second
	}
	entries := make([]*entry, 0, len(req.Ads))
	for i, w := range req.Ads {
		internAd(w)
		ad, err := wire.ToClassAd(w)
		if err != nil {
			return fmt.Errorf("%w: ad %d of %s: %w", wire.ErrBadRequest, i, req.Source, err)
		}
		if _, ok := ad.Lookup("MyType"); !ok {
			ad.SetString("MyType", req.Type)
			w["MyType"] = classad.String(req.Type).String()
		}
		if bound {
			if err := adOf(node, req.Type, ad); err != nil {
				return fmt.Errorf("%w: ad %d of %s: %w", wire.ErrForbidden, i, req.Source, err)
			}
		}
		// The identity that advertised the ad, as HTCondor's collector
		// records it: never the advertiser's word.
		ad.Delete("AuthenticatedIdentity")
		for k := range w {
			if strings.EqualFold(k, "AuthenticatedIdentity") {
				delete(w, k)
			}
		}
		if identity != "" {
			ad.SetString("AuthenticatedIdentity", identity)
			w["AuthenticatedIdentity"] = classad.String(identity).String()
		}
		ad.SetInt("LastHeardFrom", now.Unix())
		w["LastHeardFrom"] = fmt.Sprint(now.Unix())
		name, _ := ad.EvalAttr("Name").StringValue()
		if req.Partial && name == "" {
			return fmt.Errorf("%w: ad %d of %s: an ad of a partial update needs a Name, which it replaces", wire.ErrBadRequest, i, req.Source)
		}
		entries = append(entries, &entry{typ: req.Type, source: req.Source, name: name, wire: w, ad: ad,
			private: req.Private[name], expires: now.Add(life)})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.ads[req.Type]
	if m == nil {
		m = map[string][]*entry{}
		c.ads[req.Type] = m
	}
	if !req.Partial {
		c.observe(req.Type, m[req.Source], entries)
		m[req.Source] = entries
		c.updates.count(req.Type)
		return nil
	}
	merged, replaced, err := mergePartial(m[req.Source], entries, req.Removed, now)
	if err != nil {
		return fmt.Errorf("%w: partial update of %s: %w", wire.ErrConflict, req.Source, err)
	}
	// The replaced and removed entries are observed gone unless the
	// update carries their Name again; the kept ones are not observed.
	c.observe(req.Type, replaced, entries)
	if len(merged) == 0 {
		delete(m, req.Source)
	} else {
		m[req.Source] = merged
	}
	c.updates.count(req.Type)
	return nil
}

// mergePartial applies a partial update to a source's entries prev: it
// returns the entries the source has afterwards (prev's whose Name neither
// the update's entries next nor removed name, then next's, a later entry
// of a Name replacing an earlier one) and prev's entries it replaced or
// removed. It fails when prev holds no live entry at now: the collector
// knows too little of the source (it restarted, or the ads expired) to
// keep its other ads, and wants a full update.
func mergePartial(prev, next []*entry, removed []string, now time.Time) (merged, replaced []*entry, err error) {
	live := false
	for _, e := range prev {
		if now.Before(e.expires) {
			live = true
			break
		}
	}
	if !live {
		return nil, nil, fmt.Errorf("the collector holds none of its ads: send them all")
	}
	drop := make(map[string]bool, len(next)+len(removed))
	for _, e := range next {
		drop[e.name] = true
	}
	for _, n := range removed {
		drop[n] = true
	}
	merged = make([]*entry, 0, len(prev)+len(next))
	for _, e := range prev {
		if drop[e.name] {
			replaced = append(replaced, e)
		} else {
			merged = append(merged, e)
		}
	}
	seen := make(map[string]int, len(next))
	for _, e := range next {
		if i, ok := seen[e.name]; ok {
			merged[i] = e
			continue
		}
		seen[e.name] = len(merged)
		merged = append(merged, e)
	}
	return merged, replaced, nil
}

// AdvertiseScope is the scope a caller needs to advertise (or withdraw)
// ads of type typ, as HTCondor's collector asks: ADVERTISE_STARTD for
// machine ads and a startd's own ad, ADVERTISE_SCHEDD for schedd and submitter ads,
// ADVERTISE_MASTER for master ads, and DAEMON for any other type (the
// negotiator's ad) and for every type at once.
func AdvertiseScope(typ string) auth.Scope {
	switch {
	case strings.EqualFold(typ, wire.TypeMachine), strings.EqualFold(typ, typeStartDaemon):
		return auth.AdvertiseStartd
	case strings.EqualFold(typ, wire.TypeSchedd), strings.EqualFold(typ, wire.TypeSubmitter):
		return auth.AdvertiseSchedd
	case strings.EqualFold(typ, wire.TypeMaster):
		return auth.AdvertiseMaster
	}
	return auth.Daemon
}

// Invalidate drops a source's ads of a type; a node's token drops only its
// node's sources, an administrator's any.
func (c *Collector) Invalidate(ctx context.Context, req *wire.InvalidateRequest) (struct{}, error) {
	cl, _ := auth.FromContext(ctx)
	if err := authorize(cl, AdvertiseScope(req.Type)); err != nil {
		return struct{}{}, err
	}
	if node, bound := boundNode(cl); bound {
		if err := sourceOf(node, req.Source); err != nil {
			return struct{}{}, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Type == wire.TypeAny {
		for _, m := range c.ads {
			for _, e := range m[req.Source] {
				c.gone(e)
			}
			delete(m, req.Source)
		}
		return struct{}{}, nil
	}
	for _, e := range c.ads[req.Type][req.Source] {
		c.gone(e)
	}
	delete(c.ads[req.Type], req.Source)
	return struct{}{}, nil
}

// NodeLost drops the ads of every daemon of the node name ("DAEMON@NAME"
// sources), as the sea declared it failed or gone: its slots must not be
// matched until it advertises again. It returns how many sources it
// dropped.
func (c *Collector) NodeLost(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.ads {
		for source := range m {
			if _, host, ok := strings.Cut(source, "@"); ok && strings.EqualFold(host, name) {
				for _, e := range m[source] {
					c.gone(e)
				}
				delete(m, source)
				n++
			}
		}
	}
	return n
}

// nodeSubjectPrefix begins the subject of a node's token: "node/NAME".
const nodeSubjectPrefix = "node/"

// boundNode returns the node a caller's ads must belong to: NAME for a
// token of subject "node/NAME" without ADMINISTRATOR. Another caller
// (an administrator, a token the operator made for another subject, or an
// unauthenticated caller of a node that checks no tokens) is not bound.
func boundNode(cl *auth.Claims) (string, bool) {
	if cl == nil || cl.Allows(auth.Administrator) {
		return "", false
	}
	name, ok := strings.CutPrefix(cl.Subject, nodeSubjectPrefix)
	return name, ok
}

// sourceOf checks that an update's or withdrawal's source is one of
// node's daemons: "DAEMON@NAME", as each daemon names its updates
// ("startd@NAME", "schedd@NAME").
func sourceOf(node, source string) error {
	if _, host, ok := strings.Cut(source, "@"); !ok || !strings.EqualFold(host, node) {
		return fmt.Errorf("%w: node %s may not advertise for source %q (only DAEMON@%s)", wire.ErrForbidden, node, source, node)
	}
	return nil
}

// adOf checks that an ad belongs to node, as HTCondor binds an ad to the
// identity that advertises it: its Name is NAME or ends in "@NAME" (a
// slot's "slot1@NAME", "slot1_2@NAME"), a submitter ad's ScheddName is
// NAME (its Name is the submitter's, "alice@DOMAIN"), and its Machine, if
// any, is NAME.
func adOf(node, typ string, ad *classad.Ad) error {
	attr := "Name"
	if strings.EqualFold(typ, wire.TypeSubmitter) {
		attr = "ScheddName"
	}
	v, _ := ad.EvalAttr(attr).StringValue()
	if !strings.EqualFold(v, node) {
		if _, host, ok := strings.Cut(v, "@"); attr != "Name" || !ok || !strings.EqualFold(host, node) {
			return fmt.Errorf("its %s %q is not node %s's", attr, v, node)
		}
	}
	if _, ok := ad.Lookup("Machine"); ok {
		if m, _ := ad.EvalAttr("Machine").StringValue(); !strings.EqualFold(m, node) {
			return fmt.Errorf("its Machine %q is not node %s", m, node)
		}
	}
	return nil
}

// Query returns the live ads a request selects.
func (c *Collector) Query(ctx context.Context, req *wire.QueryAdsRequest) (*wire.QueryAdsResponse, error) {
	picked, err := c.selected(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &wire.QueryAdsResponse{Ads: make([]wire.Ad, 0, len(picked))}
	for _, e := range picked {
		a := wire.Project(e.wire, req.Projection)
		if req.WithPrivate && len(e.private) > 0 {
			b := make(wire.Ad, len(a)+len(e.private))
			for k, v := range a {
				b[k] = v
			}
			for k, v := range e.private {
				b[k] = v
			}
			a = b
		}
		out.Ads = append(out.Ads, a)
	}
	return out, nil
}

// QueryParsed returns the live ads a request selects as the collector
// holds them, parsed, for a reader in the same process (the negotiator of
// a central manager): no ad is copied, printed or parsed again. The ads
// are shared: the caller must not change them. The request's projection
// is not applied.
func (c *Collector) QueryParsed(ctx context.Context, req *wire.QueryAdsRequest) ([]wire.ParsedAd, error) {
	picked, err := c.selected(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]wire.ParsedAd, len(picked))
	for i, e := range picked {
		out[i].Ad = e.ad
		if req.WithPrivate {
			out[i].Private = e.private
		}
	}
	return out, nil
}

// selected returns the live entries a query selects, once the caller
// may see what it asks for.
func (c *Collector) selected(ctx context.Context, req *wire.QueryAdsRequest) ([]*entry, error) {
	if req.WithPrivate {
		// Private attributes (a slot's ClaimId) are capabilities: only
		// the negotiator sees them, as in HTCondor.
		if err := wire.Authorize(ctx, auth.Negotiator); err != nil {
			return nil, err
		}
	}
	match, err := wire.Constraint(req.Constraint)
	if err != nil {
		return nil, err
	}
	return c.entries(req.Type, match), nil
}

// entries returns the live entries of type typ ("" or TypeAny: of every
// type) whose ads match, sorted by type and Name. Entries are never
// changed once stored, so the caller may read them without the lock, and
// match is evaluated without it: a query's constraint over 10,000 slot
// ads takes long enough on a loaded machine that the updates waiting
// for the lock behind it would pile up, each holding its parsed ads.
func (c *Collector) entries(typ string, match func(*classad.Ad) bool) []*entry {
	now := c.opts.Now()
	var live []*entry
	c.mu.RLock()
	for t, m := range c.ads {
		if typ != "" && typ != wire.TypeAny && !strings.EqualFold(t, typ) {
			continue
		}
		for _, es := range m {
			for _, e := range es {
				if now.Before(e.expires) {
					live = append(live, e)
				}
			}
		}
	}
	c.mu.RUnlock()
	picked := live[:0]
	for _, e := range live {
		if match(e.ad) {
			picked = append(picked, e)
		}
	}
	sort.Slice(picked, func(i, j int) bool {
		if picked[i].typ != picked[j].typ {
			return picked[i].typ < picked[j].typ
		}
		return picked[i].name < picked[j].name
	})
	return picked
}

// Expire drops ads whose lifetime has passed and returns how many.
func (c *Collector) Expire() int {
	now := c.opts.Now()
	n := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.ads {
		for src, es := range m {
			kept := es[:0]
			for _, e := range es {
				if now.Before(e.expires) {
					kept = append(kept, e)
				} else {
					n++
					c.gone(e)
				}
			}
			if len(kept) == 0 {
				delete(m, src)
			} else {
				m[src] = kept
			}
		}
	}
	return n
}

// Run expires ads periodically until ctx ends.
func (c *Collector) Run(ctx context.Context) error {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if n := c.Expire(); n > 0 {
				c.opts.Logger.Debug("expired ads", "count", n)
			}
		}
	}
}

// Handler serves the collector's endpoints relative to its mount point:
// update, invalidate and query.
func (c *Collector) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/update", c.admitting(wire.Handle(c.admittedUpdate)))
	mux.Handle("/invalidate", wire.Handle(c.Invalidate))
	mux.Handle("/query", wire.Handle(c.Query))
	mux.Handle("/history", wire.Handle(c.History))
	mux.Handle("/apply", wire.LimitBody(maxApplyBody, wire.Handle(c.RecordApply)))
	return mux
}

// internAd replaces the names and values of ad by their canonical copies
// (unique.Make): the slots of a pool repeat most of them (every attribute
// name, the policy expressions, the platform), and the collector keeps
// every slot's ad. A map whose existing key is assigned again keeps the
// key assigned.
func internAd(ad wire.Ad) {
	for k, v := range ad {
		ad[unique.Make(k).Value()] = unique.Make(v).Value()
	}
}
