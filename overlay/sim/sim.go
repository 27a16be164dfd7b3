// Package sim is a discrete-event simulator that drives the tree-query
// engine of package tree, unchanged, over simulated time and a simulated
// network, for seas of 10^2 to 10^6 nodes on one machine.
//
// Every node is a tree.Engine whose Router, Transport and Evaluator are a
// few bytes of simulator state; engines are created when first reached.
// Edge latency is uniform in [MinLatency, MaxLatency] (50–300 ms as in the
// PonD paper), fixed per pair of nodes. Optional churn kills nodes during
// a query after exponentially distributed session times (they stay in the
// membership views, as they would until failure detection catches up), and
// optional attribute churn changes each node's Rank value periodically.
//
// Run simulates one configuration; Sweep runs a grid; WriteCSV records the
// results, ReadCSV reads them back, and Chart draws them as SVG (see
// docs/sim and docs/performance/tree.md).
package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
	"github.com/pond-htc/pond/overlay/tree"
)

// AllMatches as Config.K asks for every matching node.
const AllMatches = -1

// Config describes one simulated scenario.
type Config struct {
	// Nodes is the size of the sea (at least 1).
	Nodes int
	// Queries is how many queries run one after another (default 5).
	Queries int
	// K is the result size (default 10); AllMatches asks for all.
	K int
	// Mode is api.BestRank or api.FirstFit.
	Mode api.Mode
	// Redundant runs both trees.
	Redundant bool
	// MinLatency and MaxLatency bound the one-way edge latency
	// (defaults 50ms and 300ms).
	MinLatency, MaxLatency time.Duration
	// Deadline is each query's time budget (default 30s).
	Deadline time.Duration
	// MeanSession, if positive, is the mean of the exponential session
	// time after which a node fails; failures are drawn afresh for each
	// query, starting from a fully live sea History before the query.
	MeanSession time.Duration
	// DetectDelay, if positive, is how long after a failure every node
	// learns of it (see MemberlistDetectDelay); zero means failures are
	// never detected during a query.
	DetectDelay time.Duration
	// History is how long churn has run before each query starts
	// (default 2×DetectDelay, so the views hold the failed members not
	// yet detected; zero without detection).
	History time.Duration
	// RepairRounds and AckTimeout are passed to the engines
	// (tree.Config.RepairRounds and AckTimeout).
	RepairRounds int
	AckTimeout   time.Duration
	// AttrChurn, if positive, is the mean interval between changes of a
	// node's Rank value.
	AttrChurn time.Duration
	// MatchFraction is the fraction of nodes whose ad satisfies the
	// Requirements (default 0.5).
	MatchFraction float64
	// HopTimeout is the engines' hop bound (see tree.Config.HopTimeout);
	// zero means MaxLatency, negative none.
	HopTimeout time.Duration
	// Seed makes runs reproducible.
	Seed uint64
	// Table sizes the routing tables.
	Table ring.TableConfig
}

func (c Config) withDefaults() (Config, error) {
	if c.Nodes < 1 {
		return c, fmt.Errorf("sim: Nodes = %d, want at least 1", c.Nodes)
	}
	if c.Queries <= 0 {
		c.Queries = 5
	}
	if c.K == 0 {
		c.K = 10
	}
	if c.MinLatency <= 0 {
		c.MinLatency = 50 * time.Millisecond
	}
	if c.MaxLatency <= 0 {
		c.MaxLatency = 300 * time.Millisecond
	}
	if c.MaxLatency < c.MinLatency {
		return c, fmt.Errorf("sim: MaxLatency %v is below MinLatency %v", c.MaxLatency, c.MinLatency)
	}
	if c.HopTimeout == 0 {
		c.HopTimeout = c.MaxLatency
	}
	if c.Deadline <= 0 {
		c.Deadline = 30 * time.Second
	}
	if c.DetectDelay < 0 || c.History < 0 {
		return c, fmt.Errorf("sim: negative DetectDelay %v or History %v", c.DetectDelay, c.History)
	}
	if c.History == 0 {
		c.History = 2 * c.DetectDelay
	}
	if c.MatchFraction <= 0 {
		c.MatchFraction = 0.5
	}
	if c.MatchFraction > 1 {
		return c, fmt.Errorf("sim: MatchFraction %v is above 1", c.MatchFraction)
	}
	return c, nil
}

// QueryReport describes one simulated query.
type QueryReport struct {
	Latency      time.Duration `json:"latency"`
	Depth        int           `json:"depth"`
	Messages     int           `json:"messages"`
	Visited      int           `json:"visited"`
	Completeness float64       `json:"completeness"`
	// Found is the fraction of the expected answer returned: for
	// best-rank the share of the true top k (or of all matches) among
	// nodes that stayed alive; for first-fit the share of k (or of all
	// live matches if fewer) returned.
	Found float64 `json:"found"`
	// MaxNodeMessages is the most messages one node sent or received.
	MaxNodeMessages int `json:"max_node_messages"`
	// Killed counts nodes that failed during the query.
	Killed int `json:"killed"`
	// Stale counts failed members still in the view when the query
	// started (failed, not yet detected).
	Stale int `json:"stale"`
}

// Report summarises a Run.
type Report struct {
	Config  Config        `json:"config"`
	Queries []QueryReport `json:"queries"`

	LatencyMean time.Duration `json:"latency_mean"`
	LatencyP50  time.Duration `json:"latency_p50"`
	LatencyMax  time.Duration `json:"latency_max"`
	DepthMean   float64       `json:"depth_mean"`
	DepthMax    int           `json:"depth_max"`
	// MessagesPerQuery is the mean count of requests and answers.
	MessagesPerQuery float64 `json:"messages_per_query"`
	// MessagesPerEdge is messages per tree edge (visited nodes other
	// than the roots): 2 when every request is answered once.
	MessagesPerEdge float64 `json:"messages_per_edge"`
	// MessagesPerNode is MessagesPerQuery over Nodes, and
	// MaxNodeMessages the mean busiest node's load per query.
	MessagesPerNode float64 `json:"messages_per_node"`
	MaxNodeMessages float64 `json:"max_node_messages"`
	Completeness    float64 `json:"completeness"`
	MinCompleteness float64 `json:"min_completeness"`
	Found           float64 `json:"found"`
	MinFound        float64 `json:"min_found"`
	// StaleFraction is the mean share of the view that had failed
	// undetected when a query started.
	StaleFraction float64 `json:"stale_fraction"`
	// Wall is the real time the run took.
	Wall time.Duration `json:"wall"`
}

// sea is the state of one simulation.
type sea struct {
	cfg  Config
	loop loop
	full *ring.View // every member; a member's index is its node number
	// cur is the membership as the sea knows it (failures detected and
	// rejoins learned); every node routes on it. It is rebuilt at most
	// once per viewRefresh of simulated time, when it has changed.
	cur     *ring.View
	dirty   bool
	builtAt time.Duration
	engines []*tree.Engine
	incs    []int
	// toggles holds, per node, the sorted times it goes down and comes
	// back up again, alternately; a node starts up.
	toggles [][]time.Duration
	dyn     *dynAttr
	msgs    []uint32
	waiting map[int32][]int32 // node -> nodes waiting on its answer
	ctx     context.Context
}

// viewRefresh is how often, at most, the shared view is rebuilt; joinDelay
// is how long a node coming back after a detected failure takes to
// reappear in the views (gossip of its alive message).
const (
	viewRefresh = time.Second
	joinDelay   = 2 * time.Second
)

// MemberlistDetectDelay estimates how long memberlist's LAN profile (serf's
// default) takes to tell every member of a failure in a sea of n: the
// first probe to reach the failed node (about one probe interval, 1 s,
// plus the 0.5 s probe timeout), the suspicion timeout (4 × log10(n)
// probe intervals, at least 4; independent confirmations arrive within a
// few probe intervals and keep it near that minimum), and the gossip of
// the death (about log3(n) rounds of 200 ms).
func MemberlistDetectDelay(n int) time.Duration {
	l := math.Max(1, math.Log10(float64(n)))
	gossip := math.Ceil(math.Log(float64(max(n, 2)))/math.Log(3)) * 0.2
	return time.Duration((1.5 + 4*l + gossip) * float64(time.Second))
}

// count is how many toggles of node i happened at or before t: even when
// the node is up; it also numbers the node's incarnations.
func (s *sea) count(i int, t time.Duration) int {
	tg := s.toggles[i]
	if len(tg) == 0 || tg[0] > t {
		return 0
	}
	return sort.Search(len(tg), func(j int) bool { return tg[j] > t })
}

// up reports whether node i is running at time t.
func (s *sea) up(i int, t time.Duration) bool { return s.count(i, t)%2 == 0 }

// live reports whether incarnation inc of node i is running now.
func (s *sea) live(i, inc int) bool { return s.count(i, s.loop.now) == inc }

// absent reports whether the membership leaves node i out at time t: it
// failed at least DetectDelay ago, or it came back less than joinDelay
// ago from a failure that had been detected.
func (s *sea) absent(i int, t time.Duration) bool {
	d := s.cfg.DetectDelay
	if d <= 0 {
		return false
	}
	n := s.count(i, t)
	tg := s.toggles[i]
	if n%2 == 1 {
		return t-tg[n-1] >= d
	}
	return n >= 2 && tg[n-1]-tg[n-2] >= d && t-tg[n-1] < joinDelay
}

// view returns the shared membership view, rebuilding it if it is due.
func (s *sea) view() *ring.View {
	if s.cur == nil || (s.dirty && s.loop.now-s.builtAt >= viewRefresh) {
		s.rebuild()
	}
	return s.cur
}

func (s *sea) rebuild() {
	s.dirty, s.builtAt = false, s.loop.now
	if s.cfg.DetectDelay <= 0 {
		s.cur = s.full
		return
	}
	ms := make([]ring.Member, 0, s.full.Len())
	for i := range s.full.Len() {
		if !s.absent(i, s.loop.now) {
			ms = append(ms, s.full.At(i))
		}
	}
	v, err := ring.NewSortedView(ms)
	if err != nil {
		panic(err) // unreachable: a subsequence of a sorted view
	}
	s.cur = v
}

// schedule queues, for the window [t0, t1), the moments the membership
// learns of a failure or a rejoin: the view is then due for a rebuild, and
// nodes waiting on a failed member are told.
func (s *sea) schedule(t0, t1 time.Duration) {
	d := s.cfg.DetectDelay
	if d <= 0 {
		return
	}
	for i, tg := range s.toggles {
		for j := 0; j < len(tg); j += 2 {
			down := tg[j]
			back := time.Duration(math.MaxInt64)
			if j+1 < len(tg) {
				back = tg[j+1]
			}
			if back-down < d {
				continue // back before anyone noticed
			}
			if at := down + d; at >= t0 && at < t1 {
				s.loop.at(at, func() { s.detected(i) })
			}
			if at := back + joinDelay; j+1 < len(tg) && at >= t0 && at < t1 {
				s.loop.at(at, func() { s.dirty = true })
			}
		}
	}
}

// detected tells the nodes waiting on failed node i.
func (s *sea) detected(i int) {
	s.dirty = true
	name := s.full.At(i).Name
	ws := s.waiting[int32(i)]
	delete(s.waiting, int32(i))
	for _, w := range ws {
		if e := s.engines[w]; e != nil && s.live(int(w), s.incs[w]) {
			e.PeerFailed(name)
		}
	}
}

// node is one incarnation of a simulated member: its Router, Transport
// and Evaluator.
type node struct {
	s   *sea
	idx int32
	inc int
}

// Self implements tree.Router.
func (n *node) Self() ring.Member { return n.s.full.At(int(n.idx)) }

// View implements tree.Router.
func (n *node) View() *ring.View { return n.s.view() }

// Table implements tree.Router; it is rebuilt from the current view on
// each call, which keeps a million nodes' tables out of memory.
func (n *node) Table() []ring.Member {
	v := n.s.view()
	if v == n.s.full {
		return v.Table(int(n.idx), n.s.cfg.Table)
	}
	i := v.Search(n.Self().ID)
	if i >= v.Len() {
		i = 0
	}
	return v.Table(i, n.s.cfg.Table)
}

// Send implements tree.Transport over simulated latency. Messages to or
// from a failed node are lost; a member already known to have failed is
// reported at once, as the membership would.
func (n *node) Send(to ring.Member, req *tree.Request, reply func(*tree.Response, error)) {
	s := n.s
	from := int(n.idx)
	ti := s.full.Search(to.ID)
	if ti >= s.full.Len() || !s.live(from, n.inc) {
		return
	}
	if s.absent(ti, s.loop.now) {
		s.loop.at(s.loop.now, func() {
			if s.live(from, n.inc) {
				reply(nil, tree.ErrPeerFailed)
			}
		})
		return
	}
	s.msgs[from]++
	s.msgs[ti]++
	if s.cfg.DetectDelay > 0 {
		s.waiting[int32(ti)] = append(s.waiting[int32(ti)], int32(from))
	}
	s.loop.at(s.loop.now+s.latency(from, ti), func() {
		if !s.up(ti, s.loop.now) {
			return
		}
		e, inc := s.engine(ti)
		e.Serve(req, func(resp *tree.Response) {
			if !s.live(ti, inc) {
				return
			}
			s.msgs[from]++
			s.msgs[ti]++
			s.loop.at(s.loop.now+s.latency(ti, from), func() {
				if s.live(from, n.inc) {
					reply(resp, nil)
				}
			})
		})
	})
}

// Match implements tree.Evaluator over a synthetic ad.
func (n *node) Match(_ context.Context, q *api.Query) (tree.Result, bool, error) {
	s := n.s
	if !s.satisfies(int(n.idx), s.loop.now) {
		return tree.Result{}, false, nil
	}
	res := tree.Result{Rank: s.rank(int(n.idx), s.loop.now)}
	if len(q.Attrs) > 0 {
		res.Attrs = map[string]any{}
		for _, a := range q.Attrs {
			if a == "Memory" {
				res.Attrs[a] = s.memory(int(n.idx))
			}
		}
	}
	return res, true, nil
}

// mix is SplitMix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (s *sea) hash(i int, salt uint64) uint64 { return mix(s.cfg.Seed ^ mix(uint64(i)^salt<<40)) }

func (s *sea) matches(i int) bool {
	return float64(s.hash(i, 1)>>11)/(1<<53) < s.cfg.MatchFraction
}

// satisfies reports whether node i's ad meets the Requirements at t: the
// static part, and the dynamic attribute if there is one.
func (s *sea) satisfies(i int, t time.Duration) bool {
	return s.matches(i) && (s.dyn == nil || s.dyn.ok(i, t))
}

func (s *sea) memory(i int) int { return 1024 * int(1+s.hash(i, 2)%64) }

// rank is the node's Rank at simulated time t: fixed, or redrawn every
// AttrChurn with a per-node phase.
func (s *sea) rank(i int, t time.Duration) float64 {
	version := uint64(0)
	if c := s.cfg.AttrChurn; c > 0 {
		phase := time.Duration(s.hash(i, 3) % uint64(c))
		version = uint64((t + phase) / c)
	}
	return float64(mix(s.hash(i, 4)^version) % 1_000_000)
}

// latency is the fixed one-way latency of the edge between a and b.
func (s *sea) latency(a, b int) time.Duration {
	lo, hi := min(a, b), max(a, b)
	span := uint64(s.cfg.MaxLatency-s.cfg.MinLatency) + 1
	return s.cfg.MinLatency + time.Duration(mix(s.cfg.Seed^uint64(lo)<<32^uint64(hi))%span)
}

// engine returns the engine of node i's current incarnation, creating it
// on first use.
func (s *sea) engine(i int) (*tree.Engine, int) {
	inc := s.count(i, s.loop.now)
	if e := s.engines[i]; e != nil && s.incs[i] == inc {
		return e, inc
	}
	n := &node{s: s, idx: int32(i), inc: inc}
	e, err := tree.NewEngine(tree.Config{Router: n, Transport: n, Evaluator: n, Clock: &s.loop, Context: s.ctx,
		Table: s.cfg.Table, HopTimeout: max(s.cfg.HopTimeout, 0), RepairRounds: s.cfg.RepairRounds, AckTimeout: s.cfg.AckTimeout})
	if err != nil {
		panic(err) // unreachable: every field is set
	}
	s.engines[i], s.incs[i] = e, inc
	return e, inc
}

// newSea builds the members of cfg (which has its defaults) and a sea
// over them, every node up and never failing.
func newSea(ctx context.Context, cfg Config) (*sea, error) {
	ms := make([]ring.Member, cfg.Nodes)
	for i := range ms {
		ms[i] = ring.NewMember(fmt.Sprintf("n%07d", i), "")
	}
	slices.SortFunc(ms, func(a, b ring.Member) int { return a.ID.Cmp(b.ID) })
	view, err := ring.NewSortedView(ms)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return &sea{
		cfg: cfg, full: view, ctx: ctx,
		engines: make([]*tree.Engine, cfg.Nodes),
		incs:    make([]int, cfg.Nodes),
		toggles: make([][]time.Duration, cfg.Nodes),
		msgs:    make([]uint32, cfg.Nodes),
		waiting: map[int32][]int32{},
	}, nil
}

// Run simulates cfg and reports on it.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	s, err := newSea(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x51))
	rep := &Report{Config: cfg}
	for qi := range cfg.Queries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		qr, err := s.query(ctx, qi, rng)
		if err != nil {
			return nil, err
		}
		rep.Queries = append(rep.Queries, qr)
	}
	rep.summarise()
	rep.Wall = time.Since(start)
	return rep, nil
}

// query runs query number qi from a random root, with failures drawn
// afresh from a fully live sea History before it.
func (s *sea) query(ctx context.Context, qi int, rng *rand.Rand) (QueryReport, error) {
	cfg := s.cfg
	// Start past everything earlier queries scheduled.
	t0 := s.loop.now + cfg.History + time.Second
	root := rng.IntN(cfg.Nodes)
	var qr QueryReport
	for i := range s.toggles {
		s.toggles[i] = s.toggles[i][:0]
		if cfg.MeanSession <= 0 || i == root {
			continue
		}
		down := t0 - cfg.History + time.Duration(rng.ExpFloat64()*float64(cfg.MeanSession))
		if down < t0+cfg.Deadline {
			s.toggles[i] = append(s.toggles[i], down)
			if down >= t0 {
				qr.Killed++
			}
		}
	}
	s.loop.now = t0
	for i := range s.full.Len() {
		if !s.up(i, t0) && !s.absent(i, t0) {
			qr.Stale++
		}
	}
	ans, err := s.ask(ctx, qi, root)
	if err != nil {
		return qr, err
	}
	st := ans.Stats
	qr.Latency, qr.Depth, qr.Messages, qr.Visited, qr.Completeness = st.Latency, st.Depth, st.Messages, st.Visited, st.Completeness
	for _, m := range s.msgs {
		qr.MaxNodeMessages = max(qr.MaxNodeMessages, int(m))
	}
	qr.Found = s.found(ans, t0)
	return qr, nil
}

// ask runs one query from root starting at the current simulated time,
// with fresh engines, until every event has run.
func (s *sea) ask(ctx context.Context, qi, root int) (*api.Answer, error) {
	cfg := s.cfg
	t0 := s.loop.now
	clear(s.engines)
	clear(s.msgs)
	clear(s.waiting)
	s.cur = nil
	s.schedule(t0, t0+cfg.Deadline+time.Second)
	k := cfg.K
	if k == AllMatches {
		k = 0
	}
	q := api.Query{
		ID: fmt.Sprintf("q%d", qi), Requirements: "Matches", Rank: "Rank", K: k,
		Mode: cfg.Mode, Redundant: cfg.Redundant, Deadline: s.loop.Now().Add(cfg.Deadline),
	}
	var ans *api.Answer
	s.loop.at(t0, func() {
		e, _ := s.engine(root)
		if err := e.Start(q, func(a *api.Answer) { ans = a }); err != nil {
			panic(err) // unreachable: the query is valid
		}
	})
	steps := 0
	s.loop.run(func() bool {
		steps++
		return steps%(1<<16) == 0 && ctx.Err() != nil
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if ans == nil {
		return nil, errors.New("sim: query ended without an answer")
	}
	return ans, nil
}

// found compares an answer with brute force over the nodes alive at the end.
func (s *sea) found(ans *api.Answer, t0 time.Duration) float64 {
	type cand struct {
		name string
		rank float64
	}
	var live []cand
	for i := range s.cfg.Nodes {
		if s.up(i, s.loop.now) && s.satisfies(i, t0) {
			live = append(live, cand{s.full.At(i).Name, s.rank(i, t0)})
		}
	}
	got := make(map[string]bool, len(ans.Matches))
	for _, m := range ans.Matches {
		got[m.Name] = true
	}
	k := ans.Query.K
	if s.cfg.Mode == api.FirstFit {
		want := len(live)
		if k > 0 {
			want = min(k, want)
		}
		if want == 0 {
			return 1
		}
		n := 0
		for _, c := range live {
			if got[c.name] {
				n++
			}
		}
		return math.Min(1, float64(n)/float64(want))
	}
	slices.SortFunc(live, func(a, b cand) int { return bestFirst(a.rank, a.name, b.rank, b.name) })
	if k > 0 && len(live) > k {
		live = live[:k]
	}
	if len(live) == 0 {
		return 1
	}
	n := 0
	for _, c := range live {
		if got[c.name] {
			n++
		}
	}
	return float64(n) / float64(len(live))
}

func (r *Report) summarise() {
	n := len(r.Queries)
	if n == 0 {
		return
	}
	lat := make([]time.Duration, 0, n)
	r.MinCompleteness, r.MinFound = 1, 1
	var sumLat time.Duration
	var depth, msgs, maxNode, comp, found, stale float64
	edges := 0
	trees := 1
	if r.Config.Redundant {
		trees = 2
	}
	for _, q := range r.Queries {
		lat = append(lat, q.Latency)
		sumLat += q.Latency
		depth += float64(q.Depth)
		r.DepthMax = max(r.DepthMax, q.Depth)
		msgs += float64(q.Messages)
		edges += max(q.Visited-trees, 0)
		maxNode += float64(q.MaxNodeMessages)
		comp += q.Completeness
		found += q.Found
		stale += float64(q.Stale) / float64(r.Config.Nodes)
		r.MinCompleteness = min(r.MinCompleteness, q.Completeness)
		r.MinFound = min(r.MinFound, q.Found)
	}
	slices.Sort(lat)
	fn := float64(n)
	r.LatencyMean = sumLat / time.Duration(n)
	r.LatencyP50 = lat[n/2]
	r.LatencyMax = lat[n-1]
	r.DepthMean = depth / fn
	r.MessagesPerQuery = msgs / fn
	if edges > 0 {
		r.MessagesPerEdge = msgs / float64(edges)
	}
	r.MessagesPerNode = r.MessagesPerQuery / float64(r.Config.Nodes)
	r.MaxNodeMessages = maxNode / fn
	r.Completeness = comp / fn
	r.Found = found / fn
	r.StaleFraction = stale / fn
}

// bestFirst orders matches best first: higher rank, then name.
func bestFirst(aRank float64, aName string, bRank float64, bName string) int {
	if c := cmp.Compare(bRank, aRank); c != 0 {
		return c
	}
	return strings.Compare(aName, bName)
}
