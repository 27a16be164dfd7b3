package sim

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// dynAttr is a dynamic attribute per node (an owner's activity, free
// memory or load crossing the job's threshold): at exponentially
// distributed moments it is redrawn, and it then satisfies the dynamic
// part of the Requirements with a fixed probability.
type dynAttr struct {
	init  []bool
	times [][]time.Duration
	vals  [][]bool
}

// ok reports whether node i's attribute satisfies the Requirements at t.
func (d *dynAttr) ok(i int, t time.Duration) bool {
	ts := d.times[i]
	j := sort.Search(len(ts), func(j int) bool { return ts[j] > t })
	if j == 0 {
		return d.init[i]
	}
	return d.vals[i][j-1]
}

// StalenessConfig describes the scheduling-validity experiment: jobs
// arrive at regular times and are matched either by a tree query over the
// live ads or by a central collector holding ads refreshed periodically;
// a match is valid if the node is still up and still satisfies the
// Requirements when the job would start there.
type StalenessConfig struct {
	// Nodes is the size of the sea (default 10,000).
	Nodes int
	// Duration is the observed time range (default 1 hour); Every the
	// time between job arrivals (default 60 s).
	Duration, Every time.Duration
	// K is how many nodes each job asks for (default 10).
	K int
	// MeanSession and MeanDowntime are the means of the exponential up
	// and down times of a node (node churn; MeanSession zero: none;
	// MeanDowntime defaults to MeanSession/4).
	MeanSession, MeanDowntime time.Duration
	// AttrChange is the mean time between redraws of each node's dynamic
	// attribute (attribute churn; zero: none).
	AttrChange time.Duration
	// DynamicFraction is the probability that a draw of the dynamic
	// attribute satisfies the Requirements (default 0.5); MatchFraction
	// the share of nodes whose static attributes do (default 0.5).
	DynamicFraction, MatchFraction float64
	// UpdateInterval is how often a node refreshes its ad in the
	// collector (default 300 s, HTCondor's UPDATE_INTERVAL); AdLifetime
	// how long the collector keeps an ad without an update (default
	// 900 s, CLASSAD_LIFETIME).
	UpdateInterval, AdLifetime time.Duration
	// DetectDelay is the sea's failure detection delay (default
	// MemberlistDetectDelay(Nodes)).
	DetectDelay time.Duration
	// Deadline is each tree query's time budget (default 30 s), and
	// RepairRounds the engines' repair rounds (default 2; negative: none).
	Deadline     time.Duration
	RepairRounds int
	// AckTimeout is the engines' acknowledgement timeout (default
	// 600 ms, a worst-case round trip; negative: no acknowledgements).
	AckTimeout time.Duration
	// Seed makes runs reproducible.
	Seed uint64
}

func (c StalenessConfig) withDefaults() (StalenessConfig, error) {
	if c.Nodes == 0 {
		c.Nodes = 10_000
	}
	if c.Nodes < 2 {
		return c, fmt.Errorf("staleness: Nodes = %d, want at least 2", c.Nodes)
	}
	if c.Duration <= 0 {
		c.Duration = time.Hour
	}
	if c.Every <= 0 {
		c.Every = time.Minute
	}
	if c.K <= 0 {
		c.K = 10
	}
	if c.MeanSession < 0 || c.MeanDowntime < 0 || c.AttrChange < 0 {
		return c, fmt.Errorf("staleness: negative MeanSession %v, MeanDowntime %v or AttrChange %v", c.MeanSession, c.MeanDowntime, c.AttrChange)
	}
	if c.MeanDowntime == 0 {
		c.MeanDowntime = c.MeanSession / 4
	}
	if c.DynamicFraction <= 0 {
		c.DynamicFraction = 0.5
	}
	if c.MatchFraction <= 0 {
		c.MatchFraction = 0.5
	}
	if c.DynamicFraction > 1 || c.MatchFraction > 1 {
		return c, fmt.Errorf("staleness: DynamicFraction %v or MatchFraction %v above 1", c.DynamicFraction, c.MatchFraction)
	}
	if c.UpdateInterval <= 0 {
		c.UpdateInterval = 300 * time.Second
	}
	if c.AdLifetime <= 0 {
		c.AdLifetime = 900 * time.Second
	}
	if c.DetectDelay <= 0 {
		c.DetectDelay = MemberlistDetectDelay(c.Nodes)
	}
	if c.Deadline <= 0 {
		c.Deadline = 30 * time.Second
	}
	if c.RepairRounds == 0 {
		c.RepairRounds = 2
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = 600 * time.Millisecond
	}
	return c, nil
}

// StalenessPoint is one job arrival.
type StalenessPoint struct {
	// At is the arrival time from the start of the observed range.
	At time.Duration
	// TreeValid and CollectorValid are the fractions of the returned
	// matches valid when the job would start; NaN if none was returned.
	TreeValid, CollectorValid float64
	// TreeMatches and CollectorMatches count the returned matches.
	TreeMatches, CollectorMatches int
	// TreeLatency is the tree query's latency.
	TreeLatency time.Duration
}

// StalenessReport summarises a staleness run.
type StalenessReport struct {
	Config StalenessConfig
	Points []StalenessPoint
	// TreeValid and CollectorValid are the fractions of all returned
	// matches that were valid.
	TreeValid, CollectorValid float64
	// TreeLatencyP50 is the median tree query latency.
	TreeLatencyP50 time.Duration
	// Up is the mean share of nodes up at the arrivals.
	Up float64
}

// Staleness runs the scheduling-validity experiment of cfg.
//
// Each node alternates exponential up and down times (rejoining with the
// same identity) and redraws its dynamic attribute at exponential
// intervals. At every arrival a job asks for the K best-ranked nodes
// that satisfy the Requirements (static attributes and the dynamic one):
//   - by tree query from a random live node, over the engines' live
//     evaluation, on views that lag failures by DetectDelay; the job
//     starts after the query's latency plus a round trip to claim the node;
//   - from a collector that holds each node's ad as of its last update
//     (every UpdateInterval from boot while up, dropped AdLifetime after
//     the last one); the job starts after a round trip to the collector
//     plus one to claim the node.
//
// A match is valid if the node is up and satisfies the Requirements when
// the job starts.
func Staleness(ctx context.Context, cfg StalenessConfig) (*StalenessReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s, err := newSea(ctx, Config{
		Nodes: cfg.Nodes, K: cfg.K, Mode: api.BestRank, MinLatency: 50 * time.Millisecond, MaxLatency: 300 * time.Millisecond,
		HopTimeout: 300 * time.Millisecond, Deadline: cfg.Deadline, MatchFraction: cfg.MatchFraction,
		DetectDelay: cfg.DetectDelay, RepairRounds: max(cfg.RepairRounds, 0), AckTimeout: max(cfg.AckTimeout, 0), Seed: cfg.Seed,
	})
	if err != nil {
		return nil, err
	}
	r := &stalenessRun{cfg: cfg, s: s, rng: rand.New(rand.NewPCG(cfg.Seed, 0x57a1e)), boot: make([]time.Duration, cfg.Nodes)}
	// The timeline starts well before the observed range so the
	// collector holds a steady state: every node up from an earlier boot
	// (phases of its updates spread over an interval), or down.
	begin := -2 * (cfg.AdLifetime + cfg.UpdateInterval)
	end := cfg.Duration + cfg.Deadline + time.Minute
	r.drawSessions(begin, end)
	if cfg.AttrChange > 0 {
		r.drawAttrs(begin, end)
	}
	return r.arrivals(ctx)
}

// stalenessRun is one run of the staleness experiment: the simulated sea,
// its nodes' boot times, and the tallies over the arrivals.
type stalenessRun struct {
	cfg StalenessConfig
	s   *sea
	rng *rand.Rand
	// boot is when each node last booted before the observed range.
	boot []time.Duration
	// collector is the node the central collector runs on.
	collector int
	// The live roots and the collector's candidates of an arrival, their
	// arrays reused from one arrival to the next.
	roots []int
	cs    []stalenessCand

	treeOK, treeN, collOK, collN int
}

// stalenessCand is a node the collector would match, with its rank.
type stalenessCand struct {
	i    int
	rank float64
	name string
}

// exp draws an exponential duration of the given mean.
func (r *stalenessRun) exp(mean time.Duration) time.Duration {
	return time.Duration(r.rng.ExpFloat64() * float64(mean))
}

// drawSessions draws every node's boot time and, with node churn, its
// alternating up and down times from begin to end.
func (r *stalenessRun) drawSessions(begin, end time.Duration) {
	cfg := r.cfg
	upFrac := float64(cfg.MeanSession) / float64(cfg.MeanSession+cfg.MeanDowntime)
	for i := range cfg.Nodes {
		r.boot[i] = begin - time.Duration(r.rng.Float64()*float64(cfg.UpdateInterval))
		if cfg.MeanSession <= 0 {
			continue
		}
		var tg []time.Duration
		t := begin
		if r.rng.Float64() >= upFrac {
			r.boot[i] = begin
			tg = append(tg, begin)
			t = begin + r.exp(cfg.MeanDowntime)
			tg = append(tg, t)
		}
		for t < end {
			t += r.exp(cfg.MeanSession)
			tg = append(tg, t)
			t += r.exp(cfg.MeanDowntime)
			tg = append(tg, t)
		}
		r.s.toggles[i] = tg
	}
}

// drawAttrs draws every node's dynamic attribute and its redraws from
// begin to end.
func (r *stalenessRun) drawAttrs(begin, end time.Duration) {
	cfg := r.cfg
	d := &dynAttr{init: make([]bool, cfg.Nodes), times: make([][]time.Duration, cfg.Nodes), vals: make([][]bool, cfg.Nodes)}
	for i := range cfg.Nodes {
		d.init[i] = r.rng.Float64() < cfg.DynamicFraction
		for t := begin + r.exp(cfg.AttrChange); t < end; t += r.exp(cfg.AttrChange) {
			d.times[i] = append(d.times[i], t)
			d.vals[i] = append(d.vals[i], r.rng.Float64() < cfg.DynamicFraction)
		}
	}
	r.s.dyn = d
}

// adAt returns when node i last updated the collector at or before t,
// and whether the collector still holds that ad.
func (r *stalenessRun) adAt(i int, t time.Duration) (time.Duration, bool) {
	n := r.s.count(i, t)
	tg := r.s.toggles[i]
	b, until := r.boot[i], t
	if n > 0 {
		if n%2 == 0 {
			b = tg[n-1]
		} else {
			if n >= 2 {
				b = tg[n-2]
			}
			until = tg[n-1] - 1
		}
	}
	if until < b {
		return 0, false
	}
	u := b + (until-b)/r.cfg.UpdateInterval*r.cfg.UpdateInterval
	return u, t-u <= r.cfg.AdLifetime
}

// valid reports whether a job matched to node i and starting at t finds
// it up and satisfying the Requirements.
func (r *stalenessRun) valid(i int, t time.Duration) bool { return r.s.up(i, t) && r.s.satisfies(i, t) }

// rtt is the round trip between nodes a and b.
func (r *stalenessRun) rtt(a, b int) time.Duration { return 2 * r.s.latency(a, b) }

// arrivals runs every job arrival of the observed range and summarises
// them.
func (r *stalenessRun) arrivals(ctx context.Context) (*StalenessReport, error) {
	cfg := r.cfg
	rep := &StalenessReport{Config: cfg}
	var lat []time.Duration
	var upSum float64
	for qi := 0; time.Duration(qi)*cfg.Every <= cfg.Duration; qi++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("staleness: %w", err)
		}
		t := time.Duration(qi) * cfg.Every
		r.s.loop.now = t
		up := r.liveRoots(t)
		upSum += float64(up) / float64(cfg.Nodes)
		if len(r.roots) == 0 {
			continue
		}
		root := r.roots[r.rng.IntN(len(r.roots))]
		pt := StalenessPoint{At: t, TreeValid: math.NaN(), CollectorValid: math.NaN()}
		r.collectorMatch(&pt, root)
		if err := r.treeMatch(ctx, &pt, qi, root); err != nil {
			return nil, err
		}
		lat = append(lat, pt.TreeLatency)
		rep.Points = append(rep.Points, pt)
	}
	if r.treeN > 0 {
		rep.TreeValid = float64(r.treeOK) / float64(r.treeN)
	}
	if r.collN > 0 {
		rep.CollectorValid = float64(r.collOK) / float64(r.collN)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		rep.TreeLatencyP50 = lat[len(lat)/2]
	}
	if n := len(rep.Points); n > 0 {
		rep.Up = upSum / float64(n)
	}
	return rep, nil
}

// liveRoots sets roots to the nodes up at t and present in the views, and
// returns how many nodes are up.
func (r *stalenessRun) liveRoots(t time.Duration) int {
	up := 0
	r.roots = r.roots[:0]
	for i := range r.cfg.Nodes {
		if r.s.up(i, t) {
			up++
			if !r.s.absent(i, t) {
				r.roots = append(r.roots, i)
			}
		}
	}
	return up
}

// collectorMatch matches the job arriving at pt.At from root in the
// central collector, over the ads it holds, and records in pt how many
// matches it returned and how many are valid when the job starts.
func (r *stalenessRun) collectorMatch(pt *StalenessPoint, root int) {
	t := pt.At
	r.cs = r.cs[:0]
	for i := range r.cfg.Nodes {
		if u, ok := r.adAt(i, t); ok && r.s.satisfies(i, u) {
			r.cs = append(r.cs, stalenessCand{i, r.s.rank(i, 0), r.s.full.At(i).Name})
		}
	}
	slices.SortFunc(r.cs, func(a, b stalenessCand) int { return bestFirst(a.rank, a.name, b.rank, b.name) })
	ok := 0
	for _, c := range r.cs[:min(len(r.cs), r.cfg.K)] {
		pt.CollectorMatches++
		if r.valid(c.i, t+r.rtt(root, r.collector)+r.rtt(root, c.i)) {
			ok++
		}
	}
	if pt.CollectorMatches > 0 {
		pt.CollectorValid = float64(ok) / float64(pt.CollectorMatches)
	}
	r.collOK, r.collN = r.collOK+ok, r.collN+pt.CollectorMatches
}

// treeMatch matches the job arriving at pt.At by tree query qi from root
// over the live ads, and records in pt the query's latency, how many
// matches it returned and how many are valid when the job starts.
func (r *stalenessRun) treeMatch(ctx context.Context, pt *StalenessPoint, qi, root int) error {
	t := pt.At
	ans, err := r.s.ask(ctx, qi, root)
	if err != nil {
		return fmt.Errorf("staleness at %v: %w", t, err)
	}
	pt.TreeLatency = ans.Stats.Latency
	ok := 0
	for _, m := range ans.Matches {
		i, found := r.s.full.Index(m.Name)
		if !found {
			return fmt.Errorf("staleness at %v: answer names unknown node %q", t, m.Name)
		}
		pt.TreeMatches++
		if r.valid(i, t+pt.TreeLatency+r.rtt(root, i)) {
			ok++
		}
	}
	if pt.TreeMatches > 0 {
		pt.TreeValid = float64(ok) / float64(pt.TreeMatches)
	}
	r.treeOK, r.treeN = r.treeOK+ok, r.treeN+pt.TreeMatches
	return nil
}

// StalenessRow is one scenario of a staleness sweep.
type StalenessRow struct {
	Scenario string
	*StalenessReport
}

// WriteStalenessCSV writes one line per job arrival of every row.
func WriteStalenessCSV(w io.Writer, rows []StalenessRow) error {
	cw := csv.NewWriter(w)
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	rec := [][]string{{"scenario", "nodes", "mean_session_s", "attr_change_s", "update_interval_s", "detect_delay_s",
		"t_s", "tree_valid", "tree_matches", "tree_latency_s", "collector_valid", "collector_matches"}}
	for _, r := range rows {
		c := r.Config
		for _, p := range r.Points {
			rec = append(rec, []string{r.Scenario, strconv.Itoa(c.Nodes), f(c.MeanSession.Seconds()), f(c.AttrChange.Seconds()),
				f(c.UpdateInterval.Seconds()), f(c.DetectDelay.Seconds()), f(p.At.Seconds()),
				f(p.TreeValid), strconv.Itoa(p.TreeMatches), f(p.TreeLatency.Seconds()),
				f(p.CollectorValid), strconv.Itoa(p.CollectorMatches)})
		}
	}
	if err := cw.WriteAll(rec); err != nil {
		return fmt.Errorf("write staleness csv: %w", err)
	}
	return nil
}

// ReadStalenessCSV reads the rows of a file written by WriteStalenessCSV,
// one per scenario in the order of the file, so that its figures can be
// drawn again without simulating. The summary of each row (TreeValid,
// CollectorValid, TreeLatencyP50) is computed again from its points; Up is
// not in the file and reads as zero.
func ReadStalenessCSV(r io.Reader) ([]StalenessRow, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read staleness csv: %w", err)
	}
	if len(recs) == 0 {
		return nil, errors.New("read staleness csv: no header line")
	}
	col := columns(recs[0])
	if _, ok := col["scenario"]; !ok {
		return nil, errors.New(`read staleness csv: no "scenario" column`)
	}
	var rows []StalenessRow
	for i, rec := range recs[1:] {
		f := &csvFields{rec: rec, col: col, line: i + 2}
		name := f.str("scenario")
		if len(rows) == 0 || rows[len(rows)-1].Scenario != name {
			rows = append(rows, StalenessRow{Scenario: name, StalenessReport: &StalenessReport{Config: StalenessConfig{
				Nodes: f.int("nodes"), MeanSession: f.seconds("mean_session_s"), AttrChange: f.seconds("attr_change_s"),
				UpdateInterval: f.seconds("update_interval_s"), DetectDelay: f.seconds("detect_delay_s"),
			}}})
		}
		rep := rows[len(rows)-1].StalenessReport
		rep.Points = append(rep.Points, StalenessPoint{
			At: f.seconds("t_s"), TreeValid: f.float("tree_valid"), TreeMatches: f.int("tree_matches"),
			TreeLatency: f.seconds("tree_latency_s"), CollectorValid: f.float("collector_valid"),
			CollectorMatches: f.int("collector_matches"),
		})
		if f.err != nil {
			return nil, fmt.Errorf("read staleness csv: %w", f.err)
		}
	}
	for _, r := range rows {
		r.summarize()
	}
	return rows, nil
}

// summarize computes TreeValid, CollectorValid and TreeLatencyP50 from the
// points, as Staleness does: the valid matches over all matches returned.
func (r *StalenessReport) summarize() {
	var treeOK, treeN, collOK, collN float64
	lat := make([]time.Duration, 0, len(r.Points))
	for _, p := range r.Points {
		if p.TreeMatches > 0 {
			treeOK += math.Round(p.TreeValid * float64(p.TreeMatches))
			treeN += float64(p.TreeMatches)
		}
		if p.CollectorMatches > 0 {
			collOK += math.Round(p.CollectorValid * float64(p.CollectorMatches))
			collN += float64(p.CollectorMatches)
		}
		lat = append(lat, p.TreeLatency)
	}
	r.TreeValid, r.CollectorValid = 0, 0
	if treeN > 0 {
		r.TreeValid = treeOK / treeN
	}
	if collN > 0 {
		r.CollectorValid = collOK / collN
	}
	r.TreeLatencyP50 = 0
	if len(lat) > 0 {
		slices.Sort(lat)
		r.TreeLatencyP50 = lat[len(lat)/2]
	}
}
