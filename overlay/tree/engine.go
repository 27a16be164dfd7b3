package tree

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/bits"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

// ErrTimeout is reported for a peer that did not answer by its deadline.
var ErrTimeout = errors.New("tree: peer did not answer in time")

// ErrPeerFailed is reported for a peer that the membership's failure
// detector declared failed while a request to it was outstanding (see
// Engine.PeerFailed).
var ErrPeerFailed = errors.New("tree: peer reported failed")

// Config assembles an Engine.
type Config struct {
	// Router is this node's membership view and routing table (required).
	Router Router
	// Transport carries requests to peers (required).
	Transport Transport
	// Evaluator matches queries against this node's ad (required).
	Evaluator Evaluator
	// Clock defaults to RealClock.
	Clock Clock
	// Context is passed to the Evaluator; it defaults to
	// context.Background().
	Context context.Context
	// Logger defaults to discarding.
	Logger *slog.Logger
	// MaxRetries bounds how many times in a row a failed child's region
	// is handed on to the members inside it (default 3; negative
	// disables).
	MaxRetries int
	// HopTimeout, if positive, bounds the one-way latency of a message
	// including the receiver's work; children are then given up on after
	// two hops per level of their subtree plus two levels to spare,
	// rather than after their share of the query's deadline. Set it to
	// the worst latency the network is expected to show; too small a
	// value cuts off slow but live subtrees (honestly reported as
	// missing coverage). Zero relies on deadlines alone.
	HopTimeout time.Duration
	// Table must match the routing-table configuration of the sea; the
	// engine uses it to work out whom a failed child would have asked.
	Table ring.TableConfig
	// MinBudget is the least time a retried child must be given before
	// this node's own deadline for the retry to be worth sending
	// (default 2ms).
	MinBudget time.Duration
	// RepairRounds, if positive, lets a query rooted here re-ask the
	// parts of the ring its trees did not cover, up to that many times,
	// while at least RepairMinTime of its deadline is left: the members
	// of each missing interval in the root's current view are queried
	// afresh (one clockwise tree per interval), so a region lost with a
	// failed inner node deep in the tree, where its parent had no time
	// left to hand it on, is recovered from the root's larger budget, and
	// on a view from which the failure detector has meanwhile removed
	// more of the failed members. Zero (the default) answers after one
	// pass.
	RepairRounds int
	// AckTimeout, if positive, makes this node ask its children to
	// acknowledge each request at once (one more message per tree edge)
	// and give up on a child that has not done so within AckTimeout,
	// handing its region on, rather than only after the whole subtree's
	// deadline. A child that acknowledged is then waited for until that
	// deadline. Set it to the worst round trip (two HopTimeouts): a
	// failed child is then found out in one round trip at every level,
	// while the failure detector may take far longer. Zero (the default)
	// sends no acknowledgements.
	AckTimeout time.Duration
	// RepairMinTime is the least time left before the deadline for a
	// repair round to start (default four HopTimeouts, or a tenth of the
	// query's time budget without a hop bound).
	RepairMinTime time.Duration
}

// Engine answers tree queries for one node. Register it as the Handler of
// the node's transport and start queries with Query or Start. It is safe
// for concurrent use.
type Engine struct {
	cfg Config

	mu     sync.Mutex
	active map[string][]*call
	cache  [4]evalEntry
	next   int
}

type evalEntry struct {
	qid string
	res Result
	ok  bool
}

// NewEngine returns an engine for cfg.
func NewEngine(cfg Config) (*Engine, error) {
	switch {
	case cfg.Router == nil:
		return nil, errors.New("tree engine: Config.Router is required")
	case cfg.Transport == nil:
		return nil, errors.New("tree engine: Config.Transport is required")
	case cfg.Evaluator == nil:
		return nil, errors.New("tree engine: Config.Evaluator is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.MinBudget <= 0 {
		cfg.MinBudget = 2 * time.Millisecond
	}
	return &Engine{cfg: cfg}, nil
}

// Query runs q with this node as root and waits for its answer. If
// q.Deadline is zero the deadline of ctx is used; one of them is required.
func (e *Engine) Query(ctx context.Context, q api.Query) (*api.Answer, error) {
	if q.Deadline.IsZero() {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("tree query: no deadline: set Query.Deadline or use a context with a deadline")
		}
		q.Deadline = dl
	}
	ch := make(chan *api.Answer, 1)
	if err := e.Start(q, func(a *api.Answer) { ch <- a }); err != nil {
		return nil, err
	}
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("tree query %s: %w", q.ID, ctx.Err())
	}
}

// Start runs q with this node as root and calls done once with the answer,
// no later than q.Deadline (give or take scheduling). It returns an error
// only for an invalid query.
func (e *Engine) Start(q api.Query, done func(*api.Answer)) error {
	if q.Deadline.IsZero() {
		return errors.New("tree query: Query.Deadline is required")
	}
	if q.Mode != api.BestRank && q.Mode != api.FirstFit {
		return fmt.Errorf("tree query: unknown mode %d", q.Mode)
	}
	if q.ID == "" {
		q.ID = uuid.NewString()
	}
	r := &root{e: e, q: q, self: e.cfg.Router.Self(), view: e.cfg.Router.View(), start: e.cfg.Clock.Now(), done: done}
	if q.Mode == api.FirstFit && q.K > 0 {
		r.maxDepth = 1
	}
	r.round()
	return nil
}

// Serve handles a request from a peer; it implements Handler.
func (e *Engine) Serve(req *Request, reply func(*Response)) {
	switch req.Kind {
	case KindStop:
		e.stop(req)
		reply(&Response{QueryID: req.Query.ID})
		return
	case KindAck:
		e.acked(req)
		reply(&Response{QueryID: req.Query.ID})
		return
	}
	e.serve(req, reply)
}

// root gathers the answers of the trees of one query.
//
// A first-fit query runs in rounds of growing depth (1, 2, 4, ... hops,
// then unlimited) until k matches are found or the ring is covered: a
// tree query spreads in parallel, so stopping it once k matches are back
// would chase a front that moves as fast as the stop, and a first-fit
// query would cost as many messages as a best-rank one. Rounds bound the
// cost to the part of the tree needed; nodes evaluate their ad once per
// query however many rounds reach them.
type root struct {
	e     *Engine
	q     api.Query
	self  ring.Member
	view  *ring.View
	start time.Time
	done  func(*api.Answer)

	mu       sync.Mutex
	maxDepth int // 0: unlimited
	rounds   int
	repairs  int
	left     int
	matches  []api.Match
	cover    []ring.Interval
	roundCov []ring.Interval
	stats    api.QueryStats
}

// round sends the query down every tree with the current depth limit.
func (r *root) round() {
	dirs := []Direction{Clockwise}
	if r.q.Redundant {
		dirs = append(dirs, CounterClockwise)
	}
	now := r.e.cfg.Clock.Now()
	dl := r.q.Deadline
	r.mu.Lock()
	r.rounds++
	round, maxDepth := r.rounds, r.maxDepth
	r.left = len(dirs)
	r.roundCov = nil
	r.mu.Unlock()
	if maxDepth > 0 {
		// Give a depth-limited round a share of the time left in
		// proportion to its depth.
		frac := min(1, float64(2*maxDepth)/float64(levels(r.view.Len())+1))
		dl = now.Add(time.Duration(float64(dl.Sub(now)) * frac))
	}
	for _, d := range dirs {
		p := d.pos(r.self.ID)
		req := &Request{Query: r.q, Dir: d, Region: ring.Interval{Begin: p, End: p}, Deadline: dl,
			From: r.self.Name, Round: round, MaxDepth: maxDepth}
		r.e.serve(req, func(resp *Response) { r.add(d, resp) })
	}
}

func (r *root) add(d Direction, resp *Response) {
	r.mu.Lock()
	r.matches = append(r.matches, resp.Matches...)
	for _, iv := range resp.Coverage {
		iv = d.toRing(iv)
		r.cover = append(r.cover, iv)
		r.roundCov = append(r.roundCov, iv)
	}
	r.stats.Visited += resp.Visited
	r.stats.Messages += resp.Messages
	r.stats.Depth = max(r.stats.Depth, resp.Depth)
	r.left--
	if r.left > 0 {
		r.mu.Unlock()
		return
	}
	r.matches = dedupe(r.matches)
	if r.maxDepth > 0 && len(r.matches) < r.q.K {
		covered := 0
		for _, iv := range ring.Union(ring.ID{}, r.roundCov) {
			covered += r.view.Count(iv)
		}
		if covered < r.view.Len() && r.e.cfg.Clock.Now().Before(r.q.Deadline) {
			r.maxDepth *= 2
			if r.maxDepth > levels(r.view.Len())+2 {
				r.maxDepth = 0
			}
			r.mu.Unlock()
			// Start the next round afresh rather than inside a reply.
			r.e.cfg.Clock.AfterFunc(0, r.round)
			return
		}
	}
	if missing := r.repairableLocked(); len(missing) > 0 {
		r.repairs++
		r.mu.Unlock()
		r.e.cfg.Clock.AfterFunc(0, func() { r.repair(missing) })
		return
	}
	r.mu.Unlock()

	a := &api.Answer{Query: r.q, Matches: TopK(r.matches, r.q.K), Stats: r.stats}
	st := &a.Stats
	st.Rounds = r.rounds
	st.Latency = r.e.cfg.Clock.Now().Sub(r.start)
	st.Members = r.view.Len()
	cover := ring.Union(ring.ID{}, r.cover)
	for _, iv := range cover {
		st.Covered += r.view.Count(iv)
		st.RingCoverage += iv.Fraction()
	}
	if st.Members > 0 {
		st.Completeness = float64(st.Covered) / float64(st.Members)
	}
	st.Missing = ring.Complement(ring.ID{}, cover)
	for _, iv := range st.Missing {
		for _, m := range r.view.In(iv, 64-len(st.MissingMembers)) {
			st.MissingMembers = append(st.MissingMembers, m.Name)
		}
	}
	r.done(a)
}

// repairableLocked returns the intervals of the ring, as the root now
// sees it, that hold members but no answer yet, if a repair round is
// allowed and worth starting. r.mu is held.
func (r *root) repairableLocked() []ring.Interval {
	cfg := &r.e.cfg
	if r.repairs >= cfg.RepairRounds || r.maxDepth > 0 {
		return nil
	}
	if r.q.Mode == api.FirstFit && r.q.K > 0 && len(r.matches) >= r.q.K {
		return nil
	}
	minLeft := cfg.RepairMinTime
	if minLeft <= 0 {
		minLeft = 4 * cfg.HopTimeout
		if cfg.HopTimeout <= 0 {
			minLeft = r.q.Deadline.Sub(r.start) / 10
		}
	}
	if r.q.Deadline.Sub(cfg.Clock.Now()) < minLeft {
		return nil
	}
	view := cfg.Router.View()
	var out []ring.Interval
	for _, iv := range ring.Complement(ring.ID{}, ring.Union(ring.ID{}, r.cover)) {
		if view.Count(iv) > 0 {
			out = append(out, iv)
		}
	}
	return out
}

// repair sends the query, once more, over each of the missing intervals.
func (r *root) repair(missing []ring.Interval) {
	r.mu.Lock()
	r.rounds++
	round := r.rounds
	r.left = len(missing)
	r.mu.Unlock()
	for _, iv := range missing {
		req := &Request{Query: r.q, Dir: Clockwise, Region: iv, Deadline: r.q.Deadline,
			From: r.self.Name, Round: round}
		r.e.serve(req, func(resp *Response) { r.add(Clockwise, resp) })
	}
}

// acked records a child's acknowledgement of a request: the child is then
// waited for until its answer is due.
func (e *Engine) acked(req *Request) {
	e.mu.Lock()
	calls := append([]*call(nil), e.active[req.Query.ID]...)
	e.mu.Unlock()
	for _, c := range calls {
		if c.req.Dir != req.Dir || c.req.Round != req.Round {
			continue
		}
		c.mu.Lock()
		for _, k := range c.kids {
			if k.done || k.acked || k.m.Name != req.From || k.region != req.Region {
				continue
			}
			k.acked = true
			k.stopTimer()
			gen := k.gen
			k.timer = e.cfg.Clock.AfterFunc(k.dl.Sub(e.cfg.Clock.Now()), func() { c.fail(k, gen, ErrTimeout) })
		}
		c.mu.Unlock()
	}
}

// PeerFailed tells the engine that the member named name has failed, as
// the membership's failure detector (serf's suspicion, say) reports it.
// Requests this node is still waiting on from that member are given up at
// once rather than at their timeout: each region is handed on to the
// members inside it, as after a timeout, and such retries skip the failed
// member. Members the engine is not waiting on are ignored.
func (e *Engine) PeerFailed(name string) {
	e.mu.Lock()
	var calls []*call
	for _, cs := range e.active {
		calls = append(calls, cs...)
	}
	e.mu.Unlock()
	type pending struct {
		k   *kid
		gen int
	}
	for _, c := range calls {
		var hit []pending
		c.mu.Lock()
		if !c.finished {
			if c.gone == nil {
				c.gone = map[string]bool{}
			}
			c.gone[name] = true
			for _, k := range c.kids {
				if !k.done && k.m.Name == name {
					hit = append(hit, pending{k, k.gen})
				}
			}
		}
		c.mu.Unlock()
		for _, p := range hit {
			c.fail(p.k, p.gen, ErrPeerFailed)
		}
	}
}

// dedupe drops repeated node names, keeping the best-ranked entry.
func dedupe(ms []api.Match) []api.Match {
	sort.Slice(ms, func(i, j int) bool { return better(&ms[i], &ms[j]) })
	seen := make(map[string]bool, len(ms))
	out := ms[:0]
	for _, m := range ms {
		if !seen[m.Name] {
			seen[m.Name] = true
			out = append(out, m)
		}
	}
	return out
}

// TopK sorts ms best first (highest rank, then name) and keeps k of them
// (all when k <= 0).
func TopK(ms []api.Match, k int) []api.Match {
	sort.Slice(ms, func(i, j int) bool { return better(&ms[i], &ms[j]) })
	if k > 0 && len(ms) > k {
		ms = ms[:k]
	}
	return ms
}

// evaluate matches q against the local ad, once per query.
func (e *Engine) evaluate(q *api.Query) (Result, bool) {
	e.mu.Lock()
	for _, c := range e.cache {
		if c.qid == q.ID && q.ID != "" {
			e.mu.Unlock()
			return c.res, c.ok
		}
	}
	e.mu.Unlock()
	res, ok, err := e.cfg.Evaluator.Match(e.cfg.Context, q)
	if err != nil {
		e.cfg.Logger.Debug("tree query: evaluation failed", "query", q.ID, "err", err)
		ok = false
	}
	e.mu.Lock()
	e.cache[e.next] = evalEntry{qid: q.ID, res: res, ok: ok}
	e.next = (e.next + 1) % len(e.cache)
	e.mu.Unlock()
	return res, ok
}

// call is one request being answered by this node.
type call struct {
	e     *Engine
	req   *Request
	view  *ring.View
	reply func(*Response)

	mu       sync.Mutex
	finished bool
	pending  int
	kids     []*kid
	matches  []api.Match
	cover    []ring.Interval
	visited  int
	messages int
	depth    int
	gone     map[string]bool // members reported failed (PeerFailed)
}

// kid is a child region and the member currently asked to answer for it.
type kid struct {
	m      ring.Member
	region ring.Interval
	tries  int
	gen    int
	timer  Timer
	done   bool
	acked  bool      // the current request was acknowledged
	dl     time.Time // when the current request's answer is due
}

// stopTimer stops the timer of k's current request, if any.
func (k *kid) stopTimer() {
	if k.timer != nil {
		k.timer.Stop()
	}
}

// point is a member placed in a region: off is its distance from the
// region's beginning in the direction's coordinates.
type point struct {
	m   ring.Member
	off ring.ID
}

// sortPoints sorts points by their offset.
func sortPoints(pts []point) {
	sort.Slice(pts, func(i, j int) bool { return pts[i].off.Cmp(pts[j].off) < 0 })
}

// regions cuts region at the points, sorted by offset from its beginning,
// and yields each member with its part: from its point up to the point of
// the next other member, or to the region's end. A member placed at
// several points in a row is yielded once.
func regions(region ring.Interval, pts []point) iter.Seq2[ring.Member, ring.Interval] {
	return func(yield func(ring.Member, ring.Interval) bool) {
		for i, p := range pts {
			if i > 0 && p.m.Name == pts[i-1].m.Name {
				continue
			}
			end := region.End
			for j := i + 1; j < len(pts); j++ {
				if pts[j].m.Name != p.m.Name {
					end = region.Begin.Add(pts[j].off)
					break
				}
			}
			if !yield(p.m, ring.Interval{Begin: region.Begin.Add(p.off), End: end}) {
				return
			}
		}
	}
}

func (e *Engine) serve(req *Request, reply func(*Response)) {
	self := e.cfg.Router.Self()
	view := e.cfg.Router.View()
	table := e.cfg.Router.Table()
	d := req.Dir
	c := &call{e: e, req: req, view: view, reply: reply, visited: 1}
	if req.Ack && req.From != self.Name {
		if i, ok := view.Index(req.From); ok {
			c.messages++
			e.cfg.Transport.Send(view.At(i), &Request{Kind: KindAck, Query: api.Query{ID: req.Query.ID}, Dir: d, Region: req.Region,
				Deadline: req.Deadline, From: self.Name, Round: req.Round}, func(*Response, error) {})
		}
	}
	// A first-fit node that matches may need no children; a best-rank
	// node hands out its sub-regions first and evaluates its own ad while
	// they work, off the critical path.
	selfFirst := req.Query.Mode == api.FirstFit
	if selfFirst {
		c.addSelf(self)
	}

	// Place self, the table members in the region, and the first member
	// of the view in the region (in case views differ), by offset.
	begin := req.Region.Begin
	endOff := req.Region.End.Sub(begin) // zero: the region runs all the way round
	inRegion := func(pos ring.ID) (ring.ID, bool) {
		off := pos.Sub(begin)
		return off, endOff.IsZero() || off.Cmp(endOff) < 0
	}
	pts := make([]point, 0, len(table)+2)
	add := func(m ring.Member) {
		if off, ok := inRegion(d.pos(m.ID)); ok {
			pts = append(pts, point{m, off})
		}
	}
	add(self)
	for _, m := range table {
		add(m)
	}
	if i := firstAtOrAfter(view, begin, d); i >= 0 {
		add(view.At(i))
	}
	sortPoints(pts)
	if len(pts) == 0 {
		// No member this node knows of lies in the region (those that
		// did left its view after the region was handed out, as a repair
		// round may find): the region is answered, empty.
		c.cover = append(c.cover, req.Region)
		c.mu.Lock()
		c.finishLocked()
		return
	}
	// Anything before the first point holds no member this node knows of.
	if !pts[0].off.IsZero() {
		c.cover = append(c.cover, ring.Interval{Begin: begin, End: begin.Add(pts[0].off)})
	}
	for m, region := range regions(req.Region, pts) {
		if m.Name == self.Name {
			c.cover = append(c.cover, region)
			continue
		}
		c.kids = append(c.kids, &kid{m: m, region: region})
	}
	if q := &req.Query; len(c.kids) == 0 || (req.MaxDepth > 0 && req.Depth >= req.MaxDepth) ||
		(q.Mode == api.FirstFit && q.K > 0 && len(c.matches) >= q.K) {
		c.kids = nil
		if !selfFirst {
			c.addSelf(self)
		}
		c.mu.Lock()
		c.finishLocked()
		return
	}
	c.pending = len(c.kids)
	if !selfFirst {
		c.pending++ // this node's own evaluation
	}
	kids := c.kids // others may append once the call is registered
	e.register(c)
	for _, k := range kids {
		c.send(k)
	}
	if !selfFirst {
		c.addSelf(self)
		c.mu.Lock()
		if c.finished {
			c.mu.Unlock()
			return
		}
		c.pending--
		c.maybeFinishLocked()
	}
}

// addSelf evaluates this node's own ad and adds it to the matches if it
// matches.
func (c *call) addSelf(self ring.Member) {
	res, ok := c.e.evaluate(&c.req.Query)
	if !ok {
		return
	}
	c.mu.Lock()
	c.matches = append(c.matches, api.Match{Name: self.Name, Addr: self.Addr, Rank: res.Rank, Attrs: res.Attrs})
	c.mu.Unlock()
}

// firstAtOrAfter returns the index of the first member at or after pos in
// direction d, or -1 for an empty view.
func firstAtOrAfter(v *ring.View, pos ring.ID, d Direction) int {
	if d == CounterClockwise {
		return v.Predecessor(pos.Not())
	}
	return v.Successor(pos)
}

// levels estimates the depth of a tree over m members.
func levels(m int) int { return bits.Len(uint(max(m, 1))) }

// childDeadline returns when a child whose region holds m members must
// answer, given that this node must answer by parentDL.
//
// Without a hop bound the child gets a share of the time left in
// proportion to the depth of its subtree, keeping one share for the way
// back up and for a retry. With a positive hop bound the child gets two
// hops per level of its subtree plus two spare levels, and no more than
// the time left less one hop for this node's own answer: a silent child is
// then given up on, and its region handed on, as soon as a live one would
// surely have answered rather than when this node's own time runs out.
func childDeadline(now, parentDL time.Time, m int, hop time.Duration) time.Time {
	left := parentDL.Sub(now)
	if left <= 0 {
		return now
	}
	l := levels(m)
	if hop > 0 {
		d := min(left-hop, 2*time.Duration(l+2)*hop)
		if d <= 0 {
			d = left / 2
		}
		return now.Add(d)
	}
	return now.Add(time.Duration(float64(left) * float64(l) / float64(l+1)))
}

// send asks k.m to answer for k.region. It must be called without c.mu.
func (c *call) send(k *kid) {
	e := c.e
	now := e.cfg.Clock.Now()
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	k.gen++
	gen := k.gen
	dl := childDeadline(now, c.req.Deadline, c.view.Count(c.req.Dir.toRing(k.region)), e.cfg.HopTimeout)
	c.messages++
	req := &Request{
		Query:    c.req.Query,
		Dir:      c.req.Dir,
		Region:   k.region,
		Deadline: dl,
		Depth:    c.req.Depth + 1,
		From:     e.cfg.Router.Self().Name,
		Round:    c.req.Round,
		MaxDepth: c.req.MaxDepth,
		Ack:      e.cfg.AckTimeout > 0,
	}
	to := k.m
	k.acked, k.dl = false, dl
	c.mu.Unlock()

	wait := dl.Sub(now)
	if req.Ack {
		wait = min(wait, e.cfg.AckTimeout)
	}
	t := e.cfg.Clock.AfterFunc(wait, func() { c.fail(k, gen, ErrTimeout) })
	c.mu.Lock()
	if k.gen == gen && !k.done && !c.finished {
		k.timer = t
	} else {
		t.Stop()
	}
	c.mu.Unlock()
	e.cfg.Transport.Send(to, req, func(resp *Response, err error) {
		if err != nil {
			c.fail(k, gen, err)
			return
		}
		c.answer(k, gen, resp)
	})
}

func (c *call) answer(k *kid, gen int, resp *Response) {
	c.mu.Lock()
	if c.finished || k.done || gen != k.gen {
		c.mu.Unlock()
		return
	}
	k.done = true
	k.stopTimer()
	c.pending--
	c.messages += 1 + resp.Messages
	c.visited += resp.Visited
	c.depth = max(c.depth, resp.Depth+1)
	c.matches = append(c.matches, resp.Matches...)
	if q := &c.req.Query; q.Mode == api.BestRank && q.K > 0 && len(c.matches) > 2*q.K {
		c.matches = TopK(c.matches, q.K)
	}
	c.cover = append(c.cover, resp.Coverage...)
	c.maybeFinishLocked()
}

func (c *call) fail(k *kid, gen int, err error) {
	e := c.e
	c.mu.Lock()
	if c.finished || k.done || gen != k.gen {
		c.mu.Unlock()
		return
	}
	k.stopTimer()
	e.cfg.Logger.Debug("tree query: child failed", "query", c.req.Query.ID, "child", k.m.Name, "err", err)
	// Hand the region to the members the failed child would have asked:
	// the next member inside it and the failed child's fingers inside it.
	var adopted []*kid
	if k.tries < e.cfg.MaxRetries {
		adopted = c.orphans(k)
	}
	if len(adopted) > 0 {
		k.done = true
		c.pending += len(adopted) - 1
		c.kids = append(c.kids, adopted...)
		c.mu.Unlock()
		for _, a := range adopted {
			c.send(a)
		}
		return
	}
	k.done = true
	c.pending--
	c.maybeFinishLocked()
}

// orphans splits the region of failed child k, less the failed member's
// own position, among the members k.m would have asked. It returns nothing
// if there is no such member or no time left. c.mu is held.
func (c *call) orphans(k *kid) []*kid {
	e := c.e
	d := c.req.Dir
	self := e.cfg.Router.Self().Name
	begin := k.region.Begin
	endOff := k.region.End.Sub(begin)
	var pts []point
	add := func(m ring.Member) bool {
		off := d.pos(m.ID).Sub(begin)
		if m.Name != self && m.Name != k.m.Name && !c.gone[m.Name] && !off.IsZero() && (endOff.IsZero() || off.Cmp(endOff) < 0) {
			pts = append(pts, point{m, off})
			return true
		}
		return false
	}
	// The next member inside the region, passing over members reported
	// failed (a few at most).
	pos := d.pos(k.m.ID)
	for range 8 {
		i := firstAtOrAfter(c.view, pos.Add(ring.Pow2(0)), d)
		if i < 0 {
			break
		}
		m := c.view.At(i)
		if add(m) || !c.gone[m.Name] {
			break
		}
		pos = d.pos(m.ID)
	}
	if i, ok := c.view.Index(k.m.Name); ok {
		for _, m := range c.view.Table(i, e.cfg.Table) {
			add(m)
		}
	}
	if len(pts) == 0 {
		return nil
	}
	sortPoints(pts)
	now := e.cfg.Clock.Now()
	var out []*kid
	for m, region := range regions(k.region, pts) {
		dl := childDeadline(now, c.req.Deadline, c.view.Count(d.toRing(region)), e.cfg.HopTimeout)
		if dl.Sub(now) < e.cfg.MinBudget {
			return nil
		}
		out = append(out, &kid{m: m, region: region, tries: k.tries + 1})
	}
	return out
}

// maybeFinishLocked finishes the call if it has all it needs; it is called
// with c.mu held and releases it.
func (c *call) maybeFinishLocked() {
	q := &c.req.Query
	if c.pending == 0 || (q.Mode == api.FirstFit && q.K > 0 && len(c.matches) >= q.K) {
		c.finishLocked()
		return
	}
	c.mu.Unlock()
}

// finishLocked answers the parent and stops children still working; it
// is called with c.mu held and releases it.
func (c *call) finishLocked() {
	c.finished = true
	var stops []*kid
	for _, k := range c.kids {
		k.stopTimer()
		if !k.done {
			k.done = true
			stops = append(stops, k)
		}
	}
	c.messages += len(stops)
	resp := &Response{
		QueryID:  c.req.Query.ID,
		Matches:  TopK(c.matches, c.req.Query.K),
		Coverage: ring.Union(c.req.Region.Begin, c.cover),
		Visited:  c.visited,
		Messages: c.messages,
		Depth:    c.depth,
	}
	c.mu.Unlock()
	if len(c.kids) > 0 {
		c.e.unregister(c)
	}
	for _, k := range stops {
		c.e.cfg.Transport.Send(k.m, &Request{
			Kind: KindStop, Query: api.Query{ID: c.req.Query.ID}, Dir: c.req.Dir, Region: k.region,
			Deadline: c.req.Deadline, From: c.e.cfg.Router.Self().Name, Round: c.req.Round,
		}, func(*Response, error) {})
	}
	c.reply(resp)
}

// abort ends the call without answering (its parent no longer wants it).
func (c *call) abort() {
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	c.reply = func(*Response) {}
	c.finishLocked()
}

func (e *Engine) register(c *call) {
	e.mu.Lock()
	if e.active == nil {
		e.active = make(map[string][]*call)
	}
	e.active[c.req.Query.ID] = append(e.active[c.req.Query.ID], c)
	e.mu.Unlock()
}

func (e *Engine) unregister(c *call) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cs := e.active[c.req.Query.ID]
	for i, x := range cs {
		if x == c {
			cs = append(cs[:i], cs[i+1:]...)
			break
		}
	}
	if len(cs) == 0 {
		delete(e.active, c.req.Query.ID)
	} else {
		e.active[c.req.Query.ID] = cs
	}
}

// stop aborts the calls answering req.Query.ID for req.Region.
func (e *Engine) stop(req *Request) {
	e.mu.Lock()
	var victims []*call
	for _, c := range e.active[req.Query.ID] {
		if c.req.Dir == req.Dir && c.req.Region == req.Region && c.req.Round == req.Round {
			victims = append(victims, c)
		}
	}
	e.mu.Unlock()
	for _, c := range victims {
		c.abort()
	}
}
