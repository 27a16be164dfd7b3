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
// Run simulates one configuration; Sweep runs a grid; WriteCSV and Plot
// record the results (see docs/sim and docs/performance/tree.md).
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

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
	// Mode is tree.BestRank or tree.FirstFit.
	Mode tree.Mode
	// Redundant runs both trees.
	Redundant bool
	// MinLatency and MaxLatency bound the one-way edge latency
	// (defaults 50ms and 300ms).
	MinLatency, MaxLatency time.Duration
	// Deadline is each query's time budget (default 30s).
	Deadline time.Duration
	// MeanSession, if positive, is the mean of the exponential session
	// time after which a node fails; failures are drawn afresh for each
	// query, starting from a fully live sea.
	MeanSession time.Duration
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
	// Wall is the real time the run took.
	Wall time.Duration `json:"wall"`
}

// sea is the state of one simulation.
type sea struct {
	cfg     Config
	loop    loop
	view    *ring.View
	engines []*tree.Engine
	alive   []bool
	msgs    []uint32
	ctx     context.Context
}

// node is one simulated member: its Router, Transport and Evaluator.
type node struct {
	s   *sea
	idx int32
}

// Self implements tree.Router.
func (n *node) Self() ring.Member { return n.s.view.At(int(n.idx)) }

// View implements tree.Router.
func (n *node) View() *ring.View { return n.s.view }

// Table implements tree.Router; it is rebuilt on each call, which keeps a
// million nodes' tables out of memory.
func (n *node) Table() []ring.Member { return n.s.view.Table(int(n.idx), n.s.cfg.Table) }

// Send implements tree.Transport over simulated latency.
func (n *node) Send(to ring.Member, req *tree.Request, reply func(*tree.Response, error)) {
	s := n.s
	from := int(n.idx)
	ti := s.view.Search(to.ID)
	if ti >= s.view.Len() || !s.alive[from] {
		return
	}
	s.msgs[from]++
	s.msgs[ti]++
	s.loop.at(s.loop.now+s.latency(from, ti), func() {
		if !s.alive[ti] {
			return
		}
		s.engine(ti).Serve(req, func(resp *tree.Response) {
			if !s.alive[ti] {
				return
			}
			s.msgs[from]++
			s.msgs[ti]++
			s.loop.at(s.loop.now+s.latency(ti, from), func() {
				if s.alive[from] {
					reply(resp, nil)
				}
			})
		})
	})
}

// Match implements tree.Evaluator over a synthetic ad.
func (n *node) Match(_ context.Context, q *tree.Query) (tree.Result, bool, error) {
	s := n.s
	if !s.matches(int(n.idx)) {
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

// engine returns node i's engine, creating it on first use.
func (s *sea) engine(i int) *tree.Engine {
	if e := s.engines[i]; e != nil {
		return e
	}
	n := &node{s: s, idx: int32(i)}
	e, err := tree.NewEngine(tree.Config{Router: n, Transport: n, Evaluator: n, Clock: &s.loop, Context: s.ctx, Table: s.cfg.Table, HopTimeout: max(s.cfg.HopTimeout, 0)})
	if err != nil {
		panic(err) // unreachable: every field is set
	}
	s.engines[i] = e
	return e
}

// Run simulates cfg and reports on it.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	ms := make([]ring.Member, cfg.Nodes)
	for i := range ms {
		ms[i] = ring.NewMember(fmt.Sprintf("n%07d", i), "")
	}
	slices.SortFunc(ms, func(a, b ring.Member) int { return a.ID.Cmp(b.ID) })
	view, err := ring.NewSortedView(ms)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s := &sea{
		cfg: cfg, view: view, ctx: ctx,
		engines: make([]*tree.Engine, cfg.Nodes),
		alive:   make([]bool, cfg.Nodes),
		msgs:    make([]uint32, cfg.Nodes),
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

// query runs query number qi from a random root.
func (s *sea) query(ctx context.Context, qi int, rng *rand.Rand) (QueryReport, error) {
	cfg := s.cfg
	for i := range s.alive {
		s.alive[i] = true
		s.msgs[i] = 0
	}
	t0 := s.loop.now
	root := rng.IntN(cfg.Nodes)
	var qr QueryReport
	if cfg.MeanSession > 0 {
		for i := range cfg.Nodes {
			if i == root {
				continue
			}
			life := time.Duration(rng.ExpFloat64() * float64(cfg.MeanSession))
			if life < cfg.Deadline {
				qr.Killed++
				s.loop.at(t0+life, func() { s.alive[i] = false })
			}
		}
	}
	k := cfg.K
	if k == AllMatches {
		k = 0
	}
	q := tree.Query{
		ID: fmt.Sprintf("q%d", qi), Requirements: "Matches", Rank: "Rank", K: k,
		Mode: cfg.Mode, Redundant: cfg.Redundant, Deadline: s.loop.Now().Add(cfg.Deadline),
	}
	var ans *tree.Answer
	s.loop.at(t0, func() {
		if err := s.engine(root).Start(q, func(a *tree.Answer) { ans = a }); err != nil {
			panic(err) // unreachable: the query is valid
		}
	})
	steps := 0
	s.loop.run(func() bool {
		steps++
		return steps%(1<<16) == 0 && ctx.Err() != nil
	})
	if err := ctx.Err(); err != nil {
		return qr, fmt.Errorf("sim: %w", err)
	}
	if ans == nil {
		return qr, errors.New("sim: query ended without an answer")
	}
	st := ans.Stats
	qr.Latency, qr.Depth, qr.Messages, qr.Visited, qr.Completeness = st.Latency, st.Depth, st.Messages, st.Visited, st.Completeness
	for _, m := range s.msgs {
		qr.MaxNodeMessages = max(qr.MaxNodeMessages, int(m))
	}
	qr.Found = s.found(ans, t0)
	return qr, nil
}

// found compares an answer with brute force over the nodes alive at the end.
func (s *sea) found(ans *tree.Answer, t0 time.Duration) float64 {
	type cand struct {
		name string
		rank float64
	}
	var live []cand
	for i := range s.cfg.Nodes {
		if s.alive[i] && s.matches(i) {
			live = append(live, cand{s.view.At(i).Name, s.rank(i, t0)})
		}
	}
	got := make(map[string]bool, len(ans.Matches))
	for _, m := range ans.Matches {
		got[m.Name] = true
	}
	k := ans.Query.K
	if s.cfg.Mode == tree.FirstFit {
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
	slices.SortFunc(live, func(a, b cand) int {
		switch {
		case a.rank > b.rank:
			return -1
		case a.rank < b.rank:
			return 1
		}
		if a.name < b.name {
			return -1
		}
		return 1
	})
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
	var depth, msgs, maxNode, comp, found float64
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
}
