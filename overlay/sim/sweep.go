package sim

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// Variant is one curve of a sweep: the settings that differ from the base
// configuration.
type Variant struct {
	Name        string
	Mode        api.Mode
	Redundant   bool
	K           int
	MeanSession time.Duration
	AttrChurn   time.Duration
	// Detect turns failure detection on (MemberlistDetectDelay of the
	// sea's size); RepairRounds is passed to the engines.
	Detect       bool
	RepairRounds int
	// Ack sets the engines' AckTimeout to two hop bounds (a worst-case
	// round trip).
	Ack bool
}

// TreeVariants compares best-rank and first-fit over single and redundant
// trees, k=10, without churn.
func TreeVariants() []Variant {
	return []Variant{
		{Name: "best-rank", Mode: api.BestRank, K: 10},
		{Name: "best-rank redundant", Mode: api.BestRank, K: 10, Redundant: true},
		{Name: "first-fit", Mode: api.FirstFit, K: 10},
		{Name: "first-fit redundant", Mode: api.FirstFit, K: 10, Redundant: true},
	}
}

// ChurnVariants asks for every match while nodes fail with a mean session
// of session, over single and redundant trees, with attribute churn.
func ChurnVariants(session time.Duration) []Variant {
	return []Variant{
		{Name: "churn single", Mode: api.BestRank, K: AllMatches, MeanSession: session, AttrChurn: time.Minute},
		{Name: "churn redundant", Mode: api.BestRank, K: AllMatches, Redundant: true, MeanSession: session, AttrChurn: time.Minute},
	}
}

// DetectionVariants ask for every match under churn, over single and
// redundant trees: failures never detected during the query (the views
// hold every node failed in the last History, found out by timeouts
// only); detected as memberlist would (failed members leave the views,
// waiting nodes are told); detected, with repair rounds; and detected,
// with repair rounds and acknowledgements (a child silent for a round
// trip is given up on at once).
func DetectionVariants() []Variant {
	var out []Variant
	for _, red := range []bool{false, true} {
		trees := "single"
		if red {
			trees = "redundant"
		}
		out = append(out,
			Variant{Name: trees + " undetected", Mode: api.BestRank, K: AllMatches, Redundant: red},
			Variant{Name: trees + " detected", Mode: api.BestRank, K: AllMatches, Redundant: red, Detect: true},
			Variant{Name: trees + " detected+repair", Mode: api.BestRank, K: AllMatches, Redundant: red, Detect: true, RepairRounds: 3},
			Variant{Name: trees + " detected+repair+ack", Mode: api.BestRank, K: AllMatches, Redundant: red, Detect: true, RepairRounds: 3, Ack: true},
		)
	}
	return out
}

// SweepChurn runs base (whose Nodes is set) for every mean session and
// variant. Variants without detection keep base.History, so they see the
// same failed members in their views as those with detection before it
// removes them.
func SweepChurn(ctx context.Context, base Config, sessions []time.Duration, variants []Variant, progress func(Row)) ([]Row, error) {
	var rows []Row
	d := MemberlistDetectDelay(base.Nodes)
	for _, sess := range sessions {
		for _, v := range variants {
			cfg := base
			cfg.Mode, cfg.Redundant, cfg.K, cfg.MeanSession, cfg.AttrChurn = v.Mode, v.Redundant, v.K, sess, v.AttrChurn
			cfg.DetectDelay, cfg.RepairRounds, cfg.AckTimeout = 0, v.RepairRounds, 0
			if v.Ack {
				hop := cfg.HopTimeout
				if hop <= 0 {
					hop = cfg.MaxLatency
				}
				if hop <= 0 {
					hop = 300 * time.Millisecond
				}
				cfg.AckTimeout = 2 * hop
			}
			if cfg.History == 0 {
				cfg.History = 2 * d
			}
			if v.Detect {
				cfg.DetectDelay = d
			}
			r, err := Run(ctx, cfg)
			if err != nil {
				return rows, fmt.Errorf("churn sweep %s session %v: %w", v.Name, sess, err)
			}
			row := Row{Variant: v.Name, Report: r}
			rows = append(rows, row)
			if progress != nil {
				progress(row)
			}
		}
	}
	return rows, nil
}

// Row is one point of a sweep.
type Row struct {
	Variant string
	*Report
}

// Sweep runs base for every size and variant; queries(n) gives the query
// count for size n. progress, if not nil, is called after each run.
func Sweep(ctx context.Context, base Config, sizes []int, variants []Variant, queries func(n int) int, progress func(Row)) ([]Row, error) {
	var rows []Row
	for _, n := range sizes {
		for _, v := range variants {
			cfg := base
			cfg.Nodes, cfg.Queries = n, queries(n)
			cfg.Mode, cfg.Redundant, cfg.K = v.Mode, v.Redundant, v.K
			cfg.MeanSession, cfg.AttrChurn = v.MeanSession, v.AttrChurn
			r, err := Run(ctx, cfg)
			if err != nil {
				return rows, fmt.Errorf("sweep %s n=%d: %w", v.Name, n, err)
			}
			row := Row{Variant: v.Name, Report: r}
			rows = append(rows, row)
			if progress != nil {
				progress(row)
			}
		}
	}
	return rows, nil
}

// csvHeader names the columns written by WriteCSV.
var csvHeader = []string{
	"variant", "nodes", "queries", "mode", "redundant", "k", "mean_session_s",
	"latency_mean_s", "latency_p50_s", "latency_max_s", "depth_mean", "depth_max",
	"messages_per_query", "messages_per_edge", "messages_per_node", "max_node_messages",
	"completeness", "min_completeness", "found", "min_found", "wall_s",
	"detect_delay_s", "history_s", "repair_rounds", "ack_timeout_s", "stale_fraction",
}

// WriteCSV writes rows as CSV with a header line.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	s := func(d time.Duration) string { return f(d.Seconds()) }
	for _, r := range rows {
		c := r.Config
		rec := []string{
			r.Variant, strconv.Itoa(c.Nodes), strconv.Itoa(c.Queries), c.Mode.String(), strconv.FormatBool(c.Redundant),
			strconv.Itoa(c.K), s(c.MeanSession),
			s(r.LatencyMean), s(r.LatencyP50), s(r.LatencyMax), f(r.DepthMean), strconv.Itoa(r.DepthMax),
			f(r.MessagesPerQuery), f(r.MessagesPerEdge), f(r.MessagesPerNode), f(r.MaxNodeMessages),
			f(r.Completeness), f(r.MinCompleteness), f(r.Found), f(r.MinFound), s(r.Wall),
			s(c.DetectDelay), s(c.History), strconv.Itoa(c.RepairRounds), s(c.AckTimeout), f(r.StaleFraction),
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// ReadCSV reads the rows of a file written by WriteCSV, so that its figures
// can be drawn again without simulating. Columns are found by their header
// names: a file written before a column existed reads with that field zero.
// The per-query reports are not in the file.
func ReadCSV(r io.Reader) ([]Row, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read csv: %w", err)
	}
	if len(recs) == 0 {
		return nil, errors.New("read csv: no header line")
	}
	col := columns(recs[0])
	if _, ok := col["variant"]; !ok {
		return nil, errors.New(`read csv: no "variant" column`)
	}
	rows := make([]Row, 0, len(recs)-1)
	for i, rec := range recs[1:] {
		f := &csvFields{rec: rec, col: col, line: i + 2}
		mode, err := api.ParseMode(f.str("mode"))
		if err != nil {
			return nil, fmt.Errorf("read csv: line %d: %w", f.line, err)
		}
		r := &Report{
			Config: Config{
				Nodes: f.int("nodes"), Queries: f.int("queries"), Mode: mode, Redundant: f.bool("redundant"),
				K: f.int("k"), MeanSession: f.seconds("mean_session_s"),
				DetectDelay: f.seconds("detect_delay_s"), History: f.seconds("history_s"),
				RepairRounds: f.int("repair_rounds"), AckTimeout: f.seconds("ack_timeout_s"),
			},
			LatencyMean: f.seconds("latency_mean_s"), LatencyP50: f.seconds("latency_p50_s"), LatencyMax: f.seconds("latency_max_s"),
			DepthMean: f.float("depth_mean"), DepthMax: f.int("depth_max"),
			MessagesPerQuery: f.float("messages_per_query"), MessagesPerEdge: f.float("messages_per_edge"),
			MessagesPerNode: f.float("messages_per_node"), MaxNodeMessages: f.float("max_node_messages"),
			Completeness: f.float("completeness"), MinCompleteness: f.float("min_completeness"),
			Found: f.float("found"), MinFound: f.float("min_found"), Wall: f.seconds("wall_s"),
			StaleFraction: f.float("stale_fraction"),
		}
		if f.err != nil {
			return nil, fmt.Errorf("read csv: %w", f.err)
		}
		rows = append(rows, Row{Variant: f.str("variant"), Report: r})
	}
	return rows, nil
}

// columns maps the names of a CSV header to their indexes.
func columns(header []string) map[string]int {
	col := make(map[string]int, len(header))
	for i, name := range header {
		col[name] = i
	}
	return col
}

// csvFields reads the fields of one CSV record by column name; a column
// the file lacks reads as zero. The first malformed field is kept in err.
type csvFields struct {
	rec  []string
	col  map[string]int
	line int
	err  error
}

func (f *csvFields) str(name string) string {
	i, ok := f.col[name]
	if !ok || i >= len(f.rec) {
		return ""
	}
	return f.rec[i]
}

func (f *csvFields) fail(name string, err error) {
	if f.err == nil {
		f.err = fmt.Errorf("line %d, column %s: %w", f.line, name, err)
	}
}

func (f *csvFields) float(name string) float64 {
	s := f.str(name)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		f.fail(name, err)
	}
	return v
}

func (f *csvFields) int(name string) int {
	s := f.str(name)
	if s == "" {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		f.fail(name, err)
	}
	return v
}

func (f *csvFields) bool(name string) bool {
	s := f.str(name)
	if s == "" {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		f.fail(name, err)
	}
	return v
}

// seconds reads a duration written in seconds.
func (f *csvFields) seconds(name string) time.Duration {
	return time.Duration(math.Round(f.float(name) * float64(time.Second)))
}
