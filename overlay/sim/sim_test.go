package sim

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/tree"
)

var (
	figures  = flag.Bool("sim.figures", false, "regenerate the CSV files and PNG figures in docs/sim (slow)")
	maxN     = flag.Int("sim.max", 1_000_000, "largest sea simulated by -sim.figures")
	maxChurn = flag.Int("sim.churnmax", 100_000, "largest sea simulated under churn by -sim.figures")
)

func TestRun(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"single node", Config{Nodes: 1}},
		{"best-rank 100", Config{Nodes: 100}},
		{"best-rank all 300", Config{Nodes: 300, K: AllMatches}},
		{"best-rank redundant 1000", Config{Nodes: 1000, Redundant: true}},
		{"first-fit 1000", Config{Nodes: 1000, Mode: tree.FirstFit}},
		{"first-fit redundant 1000", Config{Nodes: 1000, Mode: tree.FirstFit, Redundant: true}},
		{"first-fit scarce 1000", Config{Nodes: 1000, Mode: tree.FirstFit, MatchFraction: 0.005}},
		{"attribute churn 1000", Config{Nodes: 1000, AttrChurn: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Queries = 3
			r, err := Run(context.Background(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.MinFound != 1 {
				t.Errorf("found %.3f of the expected answer (min %.3f), want all", r.Found, r.MinFound)
			}
			if tt.cfg.Mode == tree.BestRank && r.MinCompleteness != 1 {
				t.Errorf("completeness %.3f without faults", r.MinCompleteness)
			}
			if n := tt.cfg.Nodes; n > 1 {
				if limit := math.Log2(float64(n)) + 5; float64(r.DepthMax) > limit {
					t.Errorf("depth %d exceeds log2(%d)+5", r.DepthMax, n)
				}
				if min := time.Duration(r.DepthMean) * 2 * 50 * time.Millisecond; r.LatencyMean < min/2 {
					t.Errorf("latency %v is impossibly low for depth %.1f", r.LatencyMean, r.DepthMean)
				}
			}
			if tt.cfg.Mode == tree.BestRank && !tt.cfg.Redundant && tt.cfg.Nodes > 1 && r.MessagesPerEdge != 2 {
				t.Errorf("%.3f messages per tree edge, want 2", r.MessagesPerEdge)
			}
		})
	}
}

func TestLatencyGrowsLogarithmically(t *testing.T) {
	var lat []float64
	sizes := []int{100, 1000, 10000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, n := range sizes {
		r, err := Run(context.Background(), Config{Nodes: n, Queries: 3, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		lat = append(lat, r.LatencyMean.Seconds())
	}
	// Each tenfold growth adds about log2(10) levels: an additive step,
	// far from the tenfold growth of a linear scan.
	for i := 1; i < len(lat); i++ {
		if ratio := lat[i] / lat[i-1]; ratio < 1 || ratio > 2 {
			t.Errorf("latency %v s at n=%d vs %v s at n=%d: ratio %.2f, want between 1 and 2", lat[i], sizes[i], lat[i-1], sizes[i-1], ratio)
		}
	}
}

func TestChurn(t *testing.T) {
	// A mean session of 10 minutes fails about 5% of nodes within a
	// 30-second query window.
	for _, redundant := range []bool{false, true} {
		t.Run(fmt.Sprintf("redundant=%v", redundant), func(t *testing.T) {
			r, err := Run(context.Background(), Config{Nodes: 1000, Queries: 4, K: AllMatches, Redundant: redundant, MeanSession: 10 * time.Minute, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			killed := 0
			for _, q := range r.Queries {
				killed += q.Killed
			}
			t.Logf("killed %.1f%% per query; found %.4f (min %.4f) of live matches; completeness %.4f; latency %v",
				100*float64(killed)/float64(4*1000), r.Found, r.MinFound, r.Completeness, r.LatencyMean)
			if redundant && r.MinFound < 0.99 {
				t.Errorf("redundant trees found %.4f of live matching nodes, want >= 0.99", r.MinFound)
			}
			if r.LatencyMax > 30*time.Second {
				t.Errorf("latency %v past the 30s deadline", r.LatencyMax)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{}, {Nodes: 10, MinLatency: time.Second, MaxLatency: time.Millisecond}, {Nodes: 10, MatchFraction: 2}} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("Run(%+v) succeeded", cfg)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Config{Nodes: 10}); err == nil {
		t.Error("Run with a cancelled context succeeded")
	}
}

func TestCSVAndPlot(t *testing.T) {
	rows, err := Sweep(context.Background(), Config{Seed: 1}, []int{10, 100}, TreeVariants()[:2], func(int) int { return 2 }, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(b.String(), "\n"); lines != 5 {
		t.Errorf("CSV has %d lines, want header and 4 rows:\n%s", lines, b.String())
	}
	b.Reset()
	c := &Chart{Title: "t", XLabel: "nodes", YLabel: "s", Series: SeriesOf(rows, func(r *Report) float64 { return r.LatencyP50.Seconds() })}
	if err := c.WritePNG(&b, 400, 300); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil || img.Bounds().Dx() != 400 {
		t.Fatalf("decoding the chart: %v", err)
	}
	if err := (&Chart{Title: "empty"}).WritePNG(&b, 10, 10); err == nil {
		t.Error("empty chart drew")
	}
}

// TestFigures regenerates docs/sim when run with -sim.figures:
//
//	go test ./overlay/sim -run TestFigures -sim.figures -timeout 2h
func TestFigures(t *testing.T) {
	if !*figures {
		t.Skip("regenerates docs/sim: run with -sim.figures")
	}
	dir := filepath.Join("..", "..", "docs", "sim")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for n := 100; n <= *maxN; n *= 10 {
		sizes = append(sizes, n)
	}
	queries := func(n int) int {
		switch {
		case n >= 1_000_000:
			return 1
		case n >= 100_000:
			return 4
		}
		return 20
	}
	logRow := func(r Row) {
		t.Logf("%-20s n=%-8d p50=%-8v depth=%-5.1f msgs/node=%-6.3f completeness=%.4f found=%.4f wall=%v",
			r.Variant, r.Config.Nodes, r.LatencyP50.Round(time.Millisecond), r.DepthMean, r.MessagesPerNode, r.Completeness, r.Found, r.Wall.Round(time.Millisecond))
	}
	ctx := context.Background()
	rows, err := Sweep(ctx, Config{Seed: 1}, sizes, TreeVariants(), queries, logRow)
	if err != nil {
		t.Fatal(err)
	}
	var churnSizes []int
	for _, n := range sizes {
		if n <= *maxChurn {
			churnSizes = append(churnSizes, n)
		}
	}
	churn, err := Sweep(ctx, Config{Seed: 2}, churnSizes, ChurnVariants(10*time.Minute), queries, logRow)
	if err != nil {
		t.Fatal(err)
	}
	writeCSV(t, filepath.Join(dir, "tree.csv"), rows)
	writeCSV(t, filepath.Join(dir, "churn.csv"), churn)
	charts := []struct {
		file string
		rows []Row
		c    Chart
		y    func(*Report) float64
	}{
		{"latency.png", rows, Chart{Title: "Median query latency (edges 50-300 ms)", YLabel: "seconds"}, func(r *Report) float64 { return r.LatencyP50.Seconds() }},
		{"depth.png", rows, Chart{Title: "Mean tree depth (hops)", YLabel: "hops"}, func(r *Report) float64 { return r.DepthMean }},
		{"messages.png", rows, Chart{Title: "Messages per node per query", YLabel: "messages"}, func(r *Report) float64 { return r.MessagesPerNode }},
		{"load.png", rows, Chart{Title: "Busiest node's messages per query", YLabel: "messages"}, func(r *Report) float64 { return r.MaxNodeMessages }},
		{"completeness.png", churn, Chart{Title: "Live matching nodes found, ~5% failing per query", YLabel: "fraction", YMin: 0.8, YMax: 1}, func(r *Report) float64 { return r.Found }},
		{"churn_latency.png", churn, Chart{Title: "Median latency under churn (deadline 30 s)", YLabel: "seconds"}, func(r *Report) float64 { return r.LatencyP50.Seconds() }},
	}
	for _, ch := range charts {
		ch.c.XLabel = "nodes"
		ch.c.Series = SeriesOf(ch.rows, ch.y)
		f, err := os.Create(filepath.Join(dir, ch.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.c.WritePNG(f, 800, 500); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func writeCSV(t *testing.T, path string, rows []Row) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(f, rows); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSim reports simulated query figures at several scales; the
// ns/op is the real time to simulate one query.
func BenchmarkSim(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		for _, v := range TreeVariants() {
			b.Run(fmt.Sprintf("n=%d/%s", n, strings.ReplaceAll(v.Name, " ", "-")), func(b *testing.B) {
				r, err := Run(context.Background(), Config{Nodes: n, Queries: b.N, Mode: v.Mode, Redundant: v.Redundant, K: v.K, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.LatencyP50.Seconds(), "sim-p50-s")
				b.ReportMetric(r.DepthMean, "depth")
				b.ReportMetric(r.MessagesPerQuery, "msgs/query")
				b.ReportMetric(r.Completeness, "completeness")
			})
		}
	}
}
