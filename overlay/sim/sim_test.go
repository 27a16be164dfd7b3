package sim

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

var (
	figures  = flag.Bool("sim.figures", false, "regenerate the CSV files and SVG figures in docs/sim (slow)")
	maxN     = flag.Int("sim.max", 1_000_000, "largest sea simulated by -sim.figures")
	maxChurn = flag.Int("sim.churnmax", 100_000, "largest sea simulated under churn by -sim.figures")

	churnFigures = flag.Bool("sim.churn", false, "regenerate docs/sim/churn_detect_* (completeness vs churn rate with failure detection; slow)")
	churnSizes   = flag.String("sim.churnsizes", "10000,100000", "sea sizes simulated by -sim.churn")
	churnOnly    = flag.String("sim.churnonly", "", "with -sim.churn, simulate only the variants whose name matches this regular expression")
	churnSess    = flag.String("sim.churnsessions", "", "with -sim.churn, mean sessions to simulate (comma-separated durations; default by size)")
	staleFigures = flag.Bool("sim.staleness", false, "regenerate docs/sim/staleness* (scheduling validity, tree query vs collector)")
	staleNodes   = flag.Int("sim.stalenodes", 10_000, "sea size simulated by -sim.staleness")

	plots = flag.Bool("sim.plots", false, "draw the SVG figures in docs/sim again from the CSV files there (quick)")
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
		{"first-fit 1000", Config{Nodes: 1000, Mode: api.FirstFit}},
		{"first-fit redundant 1000", Config{Nodes: 1000, Mode: api.FirstFit, Redundant: true}},
		{"first-fit scarce 1000", Config{Nodes: 1000, Mode: api.FirstFit, MatchFraction: 0.005}},
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
			if tt.cfg.Mode == api.BestRank && r.MinCompleteness != 1 {
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
			if tt.cfg.Mode == api.BestRank && !tt.cfg.Redundant && tt.cfg.Nodes > 1 && r.MessagesPerEdge != 2 {
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

// TestChurnDetection runs churn in its steady state: by the time a query
// starts, nodes have been failing for two detection delays, so the views
// hold the members failed within the last detection delay (about 2% of
// the sea at 10^3 nodes with 10-minute sessions, another 5% fail during
// the 30 s query). Failure detection must remove the older failures
// from the views, and with notices and repair rounds the engines must
// still find nearly every matching live node: at least 99% (the
// product's requirement for redundant queries when 5% of the sea fails
// mid-query) with redundant trees, and with a single tree when children
// acknowledge requests; 95% with a single tree without acknowledgements,
// whose failed children are found out only by timeouts.
func TestChurnDetection(t *testing.T) {
	const n = 1000
	d := MemberlistDetectDelay(n)
	tests := []struct {
		name      string
		redundant bool
		detect    time.Duration
		repairs   int
		ack       time.Duration
		minFound  float64
	}{
		{"single, undetected", false, 0, 0, 0, 0},
		{"single, detected, repair", false, d, 3, 0, 0.95},
		{"single, detected, repair, ack", false, d, 3, 600 * time.Millisecond, 0.99},
		{"redundant, undetected", true, 0, 0, 0, 0},
		{"redundant, detected, repair", true, d, 3, 0, 0.99},
		{"redundant, detected, repair, ack", true, d, 3, 600 * time.Millisecond, 0.99},
	}
	stale := map[bool]float64{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Run(context.Background(), Config{Nodes: n, Queries: 4, K: AllMatches, Redundant: tt.redundant,
				MeanSession: 10 * time.Minute, DetectDelay: tt.detect, History: 2 * d, RepairRounds: tt.repairs, AckTimeout: tt.ack, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("found %.4f (min %.4f) of live matches; completeness %.4f; failed members in view %.4f; latency p50 %v",
				r.Found, r.MinFound, r.Completeness, r.StaleFraction, r.LatencyP50)
			if r.Found < tt.minFound {
				t.Errorf("found %.4f of live matching nodes, want >= %.2f", r.Found, tt.minFound)
			}
			if r.LatencyMax > 30*time.Second {
				t.Errorf("latency %v past the 30s deadline", r.LatencyMax)
			}
			stale[tt.detect > 0] = r.StaleFraction
		})
	}
	// Without detection the views hold every failure of the last two
	// detection delays; with it, only those of the last one.
	if stale[true] <= 0 || stale[true] > 0.75*stale[false] {
		t.Errorf("failed members in view: %.4f detected vs %.4f undetected, want a clear reduction", stale[true], stale[false])
	}
}

func TestMemberlistDetectDelay(t *testing.T) {
	prev := time.Duration(0)
	for _, n := range []int{10, 100, 1000, 10_000, 100_000, 1_000_000} {
		d := MemberlistDetectDelay(n)
		if d <= prev || d < 4*time.Second || d > time.Minute {
			t.Errorf("MemberlistDetectDelay(%d) = %v after %v, want growing, within [4s, 1m]", n, d, prev)
		}
		prev = d
	}
}

// TestStaleness checks the scheduling-validity experiment: without churn
// every match is valid either way; under node and attribute churn, ads
// up to an update interval old make the collector's matches clearly less
// valid than the tree's, matched on live ads a few seconds before the
// job starts.
func TestStaleness(t *testing.T) {
	tests := []struct {
		name           string
		cfg            StalenessConfig
		minTree        float64
		maxCollector   float64
		collectorWorse bool
	}{
		{"no churn", StalenessConfig{}, 1, 1, false},
		{"node churn", StalenessConfig{MeanSession: time.Hour}, 0.97, 0.97, true},
		{"attribute churn", StalenessConfig{AttrChange: 5 * time.Minute}, 0.97, 0.9, true},
		{"both", StalenessConfig{MeanSession: time.Hour, AttrChange: 5 * time.Minute}, 0.95, 0.8, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			c.Nodes, c.Duration, c.Every, c.Seed = 500, 30*time.Minute, 2*time.Minute, 9
			r, err := Staleness(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("valid: tree %.4f, collector %.4f; tree p50 %v; up %.3f", r.TreeValid, r.CollectorValid, r.TreeLatencyP50, r.Up)
			if len(r.Points) != 16 {
				t.Errorf("%d arrivals, want 16", len(r.Points))
			}
			if r.TreeValid < tt.minTree {
				t.Errorf("tree valid %.4f, want >= %.2f", r.TreeValid, tt.minTree)
			}
			if r.CollectorValid > tt.maxCollector {
				t.Errorf("collector valid %.4f, want <= %.2f", r.CollectorValid, tt.maxCollector)
			}
			if tt.collectorWorse && r.CollectorValid >= r.TreeValid {
				t.Errorf("collector valid %.4f not below tree valid %.4f", r.CollectorValid, r.TreeValid)
			}
			var b bytes.Buffer
			if err := WriteStalenessCSV(&b, []StalenessRow{{Scenario: tt.name, StalenessReport: r}}); err != nil {
				t.Fatal(err)
			}
			if lines := strings.Count(b.String(), "\n"); lines != len(r.Points)+1 {
				t.Errorf("CSV has %d lines, want %d", lines, len(r.Points)+1)
			}
			written := b.String()
			rows, err := ReadStalenessCSV(&b)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Scenario != tt.name || rows[0].TreeValid != r.TreeValid || rows[0].CollectorValid != r.CollectorValid ||
				math.Abs(rows[0].TreeLatencyP50.Seconds()-r.TreeLatencyP50.Seconds()) > 1e-5*r.TreeLatencyP50.Seconds() {
				t.Errorf("read back %d rows, the first %+v; want the written report %+v", len(rows), rows[0].StalenessReport, r)
			}
			b.Reset()
			if err := WriteStalenessCSV(&b, rows); err != nil {
				t.Fatal(err)
			}
			if b.String() != written {
				t.Errorf("CSV written again from what was read differs:\n%s\nwant:\n%s", b.String(), written)
			}
		})
	}
	for _, c := range []StalenessConfig{{Nodes: 1}, {MeanSession: -time.Second}, {DynamicFraction: 2}} {
		if _, err := Staleness(context.Background(), c); err == nil {
			t.Errorf("Staleness(%+v) succeeded", c)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{}, {Nodes: 10, MinLatency: time.Second, MaxLatency: time.Millisecond}, {Nodes: 10, MatchFraction: 2}, {Nodes: 10, DetectDelay: -time.Second}} {
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
	written := b.String()
	read, err := ReadCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteCSV(&b, read); err != nil {
		t.Fatal(err)
	}
	if b.String() != written {
		t.Errorf("CSV written again from what was read differs:\n%s\nwant:\n%s", b.String(), written)
	}
	old := "variant,nodes,queries,mode,redundant,k\nx,10,2,first-fit,true,-1\n"
	if read, err := ReadCSV(strings.NewReader(old)); err != nil || len(read) != 1 || read[0].Config.Mode != api.FirstFit || read[0].Config.K != -1 || read[0].Found != 0 {
		t.Errorf("ReadCSV of a file with fewer columns = %+v, %v", read, err)
	}
	for _, bad := range []string{"", "nodes\n1\n", "variant,nodes\nx,many\n", "variant,mode\nx,fastest\n"} {
		if _, err := ReadCSV(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadCSV(%q) succeeded", bad)
		}
	}

	b.Reset()
	c := &Chart{Title: "t & <u>", XLabel: "nodes", YLabel: "s", Series: SeriesOf(rows, func(r *Report) float64 { return r.LatencyP50.Seconds() })}
	if err := c.WriteSVG(&b, 400, 300); err != nil {
		t.Fatal(err)
	}
	svg := parseSVG(t, b.Bytes())
	if svg.Width != "400" || svg.Height != "300" || len(svg.series) != 2 || !slices.Contains(svg.texts, "t & <u>") {
		t.Fatalf("chart %+v, want 400 by 300 with 2 series and its title", svg)
	}
	var again bytes.Buffer
	if err := c.WriteSVG(&again, 400, 300); err != nil || !bytes.Equal(again.Bytes(), b.Bytes()) {
		t.Errorf("the same chart drawn twice differs (%v)", err)
	}
	if err := (&Chart{Title: "empty"}).WriteSVG(&b, 10, 10); err == nil {
		t.Error("empty chart drew")
	}
	if err := (&Chart{Title: "log", Series: []Series{{Points: [][2]float64{{0, 1}}}}}).WriteSVG(&b, 10, 10); err == nil {
		t.Error("x = 0 drew on a log axis")
	}
}

// svgImage is what the tests read of a chart's SVG.
type svgImage struct {
	Width, Height string
	// series holds the points of each series' line and markers.
	series [][][2]float64
	texts  []string
}

// parseSVG decodes a chart drawn by WriteSVG, failing on malformed XML.
func parseSVG(t *testing.T, data []byte) *svgImage {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	var img svgImage
	attr := func(e xml.StartElement, name string) string {
		for _, a := range e.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("coordinate %q: %v", s, err)
		}
		return v
	}
	inSeries, inText := false, false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("malformed SVG: %v\n%s", err, data)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			switch tok.Name.Local {
			case "svg":
				img.Width, img.Height = attr(tok, "width"), attr(tok, "height")
			case "g":
				inSeries = attr(tok, "class") == "series"
				if inSeries {
					img.series = append(img.series, nil)
				}
			case "polyline", "circle":
				if !inSeries {
					continue
				}
				cur := &img.series[len(img.series)-1]
				if tok.Name.Local == "circle" {
					*cur = append(*cur, [2]float64{num(attr(tok, "cx")), num(attr(tok, "cy"))})
					continue
				}
				for _, p := range strings.Fields(attr(tok, "points")) {
					x, y, _ := strings.Cut(p, ",")
					*cur = append(*cur, [2]float64{num(x), num(y)})
				}
			case "text":
				inText = true
				img.texts = append(img.texts, "")
			}
		case xml.EndElement:
			switch tok.Name.Local {
			case "g":
				inSeries = false
			case "text":
				inText = false
			}
		case xml.CharData:
			if inText {
				img.texts[len(img.texts)-1] += string(tok)
			}
		}
	}
	return &img
}

// TestChartKeepsPointsInside checks that every point of a series is drawn
// inside the plot area, also when it falls outside a fixed y range.
func TestChartKeepsPointsInside(t *testing.T) {
	const w, h = 400, 300
	tests := []struct {
		name       string
		ymin, ymax float64
		ys         []float64
	}{
		{"fitted", 0, 0, []float64{0.2, 0.9, 3}},
		{"fixed, inside", 0.5, 1, []float64{0.6, 0.9, 1}},
		{"fixed, below", 0.5, 1, []float64{0.39, 0.7, 1}},
		{"fixed, above", 0, 1, []float64{0.5, 1.7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Series{Name: "s"}
			for i, y := range tt.ys {
				s.Points = append(s.Points, [2]float64{float64(10 * (i + 1)), y})
			}
			c := &Chart{Title: tt.name, YMin: tt.ymin, YMax: tt.ymax, Series: []Series{s}}
			var b bytes.Buffer
			if err := c.WriteSVG(&b, w, h); err != nil {
				t.Fatal(err)
			}
			img := parseSVG(t, b.Bytes())
			if len(img.series) != 1 || len(img.series[0]) != 2*len(tt.ys) {
				t.Fatalf("drawn %v, want a line and a marker through each of %d points", img.series, len(tt.ys))
			}
			for _, p := range img.series[0] {
				if p[0] < plotLeft || p[0] > w || p[1] < plotTop || p[1] > h-plotBottom {
					t.Fatalf("point drawn at (%v, %v), outside the plot %d..%d by %d..%d", p[0], p[1], plotLeft, w, plotTop, h-plotBottom)
				}
			}
		})
	}
}

// TestFigures regenerates docs/sim when run with -sim.figures:
//
//	go test ./overlay/sim -run TestFigures -sim.figures -timeout 2h
func TestFigures(t *testing.T) {
	if !*figures {
		t.Skip("regenerates docs/sim: run with -sim.figures")
	}
	dir := docsDir
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
	drawFigures(t, dir, true)
}

// TestChurnFigures regenerates docs/sim/churn_detect_N.csv and .svg
// when run with -sim.churn:
//
//	go test ./overlay/sim -run TestChurnFigures -sim.churn -v -timeout 3h
func TestChurnFigures(t *testing.T) {
	if !*churnFigures {
		t.Skip("regenerates docs/sim/churn_detect_*: run with -sim.churn")
	}
	dir := docsDir
	sessions := []time.Duration{10 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour}
	for _, f := range strings.Split(*churnSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("-sim.churnsizes: %v", err)
		}
		queries, ss := 3, sessions
		if n >= 100_000 {
			// Minutes of simulation per query at 10^5.
			queries, ss = 1, []time.Duration{10 * time.Minute, time.Hour}
		}
		if *churnSess != "" {
			ss = nil
			for _, f := range strings.Split(*churnSess, ",") {
				d, err := time.ParseDuration(strings.TrimSpace(f))
				if err != nil {
					t.Fatalf("-sim.churnsessions: %v", err)
				}
				ss = append(ss, d)
			}
		}
		variants := DetectionVariants()
		if *churnOnly != "" {
			re, err := regexp.Compile(*churnOnly)
			if err != nil {
				t.Fatalf("-sim.churnonly: %v", err)
			}
			variants = slices.DeleteFunc(variants, func(v Variant) bool { return !re.MatchString(v.Name) })
		}
		r, err := SweepChurn(context.Background(), Config{Nodes: n, Queries: queries, Seed: 4}, ss, variants, func(r Row) {
			t.Logf("n=%-7d session=%-6v %-28s found=%.4f (min %.4f) completeness=%.4f stale=%.4f p50=%v msgs/node=%.2f wall=%v",
				r.Config.Nodes, r.Config.MeanSession, r.Variant, r.Found, r.MinFound, r.Completeness, r.StaleFraction,
				r.LatencyP50.Round(time.Millisecond), r.MessagesPerNode, r.Wall.Round(time.Millisecond))
		})
		if err != nil {
			t.Fatal(err)
		}
		writeCSV(t, filepath.Join(dir, fmt.Sprintf("churn_detect_%d.csv", n)), r)
	}
	drawFigures(t, dir, true)
}

// TestStalenessFigures regenerates docs/sim/staleness* when run with
// -sim.staleness:
//
//	go test ./overlay/sim -run TestStalenessFigures -sim.staleness -v -timeout 1h
func TestStalenessFigures(t *testing.T) {
	if !*staleFigures {
		t.Skip("regenerates docs/sim/staleness*: run with -sim.staleness")
	}
	dir := docsDir
	ctx := context.Background()
	n := *staleNodes
	type scenario struct {
		name string
		cfg  StalenessConfig
	}
	// The time series: one job a minute for an hour.
	main := scenario{"sessions 1h, attribute 5min", StalenessConfig{Nodes: n, MeanSession: time.Hour, AttrChange: 5 * time.Minute, Seed: 1}}
	var rows []StalenessRow
	run := func(sc scenario) {
		r, err := Staleness(ctx, sc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-34s valid: tree %.4f collector %.4f; tree p50 %v; up %.3f; %d arrivals",
			sc.name, r.TreeValid, r.CollectorValid, r.TreeLatencyP50.Round(time.Millisecond), r.Up, len(r.Points))
		rows = append(rows, StalenessRow{Scenario: sc.name, StalenessReport: r})
	}
	run(main)
	// The sweep: one job every two minutes for an hour per scenario.
	var sweep []scenario
	for _, sess := range []time.Duration{0, time.Hour, 10 * time.Minute} {
		for _, attr := range []time.Duration{0, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour} {
			name := fmt.Sprintf("sessions %v, attribute %v", sess, attr)
			sweep = append(sweep, scenario{name, StalenessConfig{Nodes: n, MeanSession: sess, AttrChange: attr, Every: 2 * time.Minute, Seed: 2}})
		}
	}
	for _, sc := range sweep {
		run(sc)
	}

	f, err := os.Create(filepath.Join(dir, "staleness.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteStalenessCSV(f, rows); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	drawFigures(t, dir, true)
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

// BenchmarkSim reports simulated query figures at several scales (10^3,
// 10^4 and 10^5 nodes; -short stops at 10^4); the ns/op is the real time
// to simulate one query.
func BenchmarkSim(b *testing.B) {
	sizes := []int{1000, 10000, 100000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, n := range sizes {
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
