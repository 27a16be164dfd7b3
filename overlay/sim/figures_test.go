package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docsDir holds the simulations' CSV files and the figures drawn from them.
const docsDir = "../../docs/sim"

// figure is one chart of docs/sim and the file it is drawn to.
type figure struct {
	file  string
	w, h  int
	chart Chart
}

// treeFigures are the charts of a tree sweep (tree.csv) and of the sweep
// under churn (churn.csv).
func treeFigures(rows, churn []Row) []figure {
	figs := []struct {
		file string
		rows []Row
		c    Chart
		y    func(*Report) float64
	}{
		{"latency.svg", rows, Chart{Title: "Median query latency (edges 50-300 ms)", YLabel: "seconds"}, func(r *Report) float64 { return r.LatencyP50.Seconds() }},
		{"depth.svg", rows, Chart{Title: "Mean tree depth (hops)", YLabel: "hops"}, func(r *Report) float64 { return r.DepthMean }},
		{"messages.svg", rows, Chart{Title: "Messages per node per query", YLabel: "messages"}, func(r *Report) float64 { return r.MessagesPerNode }},
		{"load.svg", rows, Chart{Title: "Busiest node's messages per query", YLabel: "messages"}, func(r *Report) float64 { return r.MaxNodeMessages }},
		{"completeness.svg", churn, Chart{Title: "Live matching nodes found, ~5% failing per query", YLabel: "fraction", YMin: 0.8, YMax: 1}, func(r *Report) float64 { return r.Found }},
		{"churn_latency.svg", churn, Chart{Title: "Median latency under churn (deadline 30 s)", YLabel: "seconds"}, func(r *Report) float64 { return r.LatencyP50.Seconds() }},
	}
	var out []figure
	for _, f := range figs {
		if len(f.rows) == 0 {
			continue
		}
		f.c.XLabel = "nodes"
		f.c.Series = SeriesOf(f.rows, f.y)
		out = append(out, figure{f.file, 800, 500, f.c})
	}
	return out
}

// churnDetectFigure is the chart of churn_detect_N.csv: the live matching
// nodes found against the mean session, per variant.
func churnDetectFigure(n int, rows []Row) figure {
	return figure{fmt.Sprintf("churn_detect_%d.svg", n), 900, 520, Chart{
		Title:  fmt.Sprintf("Live matching nodes found, %d nodes, 30 s deadline", n),
		XLabel: "mean session (minutes)", YLabel: "fraction", YMin: 0.5, YMax: 1,
		Series: SeriesXY(rows, func(r *Report) float64 { return r.Config.MeanSession.Minutes() }, func(r *Report) float64 { return r.Found }),
	}}
}

// stalenessFigures are the charts of staleness.csv: the first scenario's
// validity over time, and the mean validity of the others against the
// rate of attribute changes.
func stalenessFigures(rows []StalenessRow) []figure {
	if len(rows) == 0 {
		return nil
	}
	series := rows[0]
	ts := Chart{Title: fmt.Sprintf("Valid when the job starts (%d nodes, sessions 1 h, attribute redrawn every 5 min)", series.Config.Nodes),
		XLabel: "time (minutes)", YLabel: "fraction valid", YMin: 0, YMax: 1, LinearX: true}
	tree, coll := Series{Name: "tree query at submit"}, Series{Name: "collector, 300 s updates"}
	for _, p := range series.Points {
		if !math.IsNaN(p.TreeValid) {
			tree.Points = append(tree.Points, [2]float64{p.At.Minutes(), p.TreeValid})
		}
		if !math.IsNaN(p.CollectorValid) {
			coll.Points = append(coll.Points, [2]float64{p.At.Minutes(), p.CollectorValid})
		}
	}
	ts.Series = []Series{tree, coll}

	vs := Chart{Title: fmt.Sprintf("Valid when the job starts vs attribute churn (%d nodes)", series.Config.Nodes),
		XLabel: "mean time between attribute changes (minutes)", YLabel: "fraction valid", YMin: 0, YMax: 1}
	idx := map[string]int{}
	for _, r := range rows[1:] {
		if r.Config.AttrChange == 0 {
			continue
		}
		sess := "no node churn"
		if s := r.Config.MeanSession; s > 0 {
			sess = "sessions " + s.String()
		}
		for _, m := range []struct {
			name string
			v    float64
		}{{"tree, " + sess, r.TreeValid}, {"collector, " + sess, r.CollectorValid}} {
			j, ok := idx[m.name]
			if !ok {
				j = len(vs.Series)
				idx[m.name] = j
				vs.Series = append(vs.Series, Series{Name: m.name})
			}
			vs.Series[j].Points = append(vs.Series[j].Points, [2]float64{r.Config.AttrChange.Minutes(), m.v})
		}
	}
	return []figure{{"staleness.svg", 900, 520, ts}, {"staleness_attr.svg", 900, 520, vs}}
}

// readFigures returns the figures of every CSV file in dir.
func readFigures(t *testing.T, dir string) []figure {
	t.Helper()
	open := func(name string) *os.File {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	readRows := func(name string) []Row {
		f := open(name)
		if f == nil {
			return nil
		}
		rows, err := ReadCSV(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return rows
	}
	figs := treeFigures(readRows("tree.csv"), readRows("churn.csv"))
	matches, err := filepath.Glob(filepath.Join(dir, "churn_detect_*.csv"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^churn_detect_([0-9]+)\.csv$`)
	for _, m := range matches {
		sm := re.FindStringSubmatch(filepath.Base(m))
		if sm == nil {
			continue
		}
		n, err := strconv.Atoi(sm[1])
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		figs = append(figs, churnDetectFigure(n, readRows(filepath.Base(m))))
	}
	if f := open("staleness.csv"); f != nil {
		rows, err := ReadStalenessCSV(f)
		if err != nil {
			t.Fatalf("staleness.csv: %v", err)
		}
		figs = append(figs, stalenessFigures(rows)...)
	}
	for _, pf := range paperSeriesFigures() {
		f := open(pf.csv)
		if f == nil {
			continue
		}
		series, _, _, err := ReadSeriesCSV(f)
		if err != nil {
			t.Fatalf("%s: %v", pf.csv, err)
		}
		pf.chart.Series = series
		figs = append(figs, figure{strings.TrimSuffix(pf.csv, ".csv") + ".svg", 1000, 560, pf.chart})
	}
	if f := open("paper_flock_fig6.csv"); f != nil {
		pts, err := ReadLocalityCSV(f)
		if err != nil {
			t.Fatalf("paper_flock_fig6.csv: %v", err)
		}
		figs = append(figs, flockLocalityFigure(pts))
	}
	return figs
}

// paperSeriesFigures are the charts of the papers' figures whose CSV
// files hold (series, x, y) rows, by file.
func paperSeriesFigures() []struct {
	csv   string
	chart Chart
} {
	return []struct {
		csv   string
		chart Chart
	}{
		{"paper_pond_fig6.csv", Chart{Title: "Scheduling latency vs pool size (PonD Fig. 6; edges 50-300 ms)", XLabel: "nodes", YLabel: "seconds", LogY: true}},
		{"paper_condorj2_queue.csv", Chart{Title: "Schedd throughput vs queue length (CondorJ2 Figs. 13-14)", XLabel: "jobs queued", YLabel: "jobs/s", LogY: true}},
		{"paper_condorj2_joblength.csv", Chart{Title: "Throughput vs job length (CondorJ2 Fig. 7, scaled)", XLabel: "job length (s)", YLabel: "jobs/s", LogY: true}},
		{"paper_panda_factory_cpu.csv", Chart{Title: "Pilot factory's CPU on the head node, a day of short jobs (PanDA factory Fig. 5, hours as minutes)", XLabel: "scaled hour", YLabel: "% of a core", LinearX: true}},
		{"paper_panda_factory_mem.csv", Chart{Title: "Pilot factory's resident memory (PanDA factory Fig. 6, hours as minutes)", XLabel: "scaled hour", YLabel: "MiB", LinearX: true}},
		{"paper_panda_factory_jobs.csv", Chart{Title: "Jobs done over the scaled day", XLabel: "scaled hour", YLabel: "jobs", LinearX: true}},
	}
}

// flockLocalityFigure is the chart of paper_flock_fig6.csv: the share of
// the jobs run within a distance of their own pool, per mode, of the
// flocked jobs and of all.
func flockLocalityFigure(pts []LocalityPoint) figure {
	c := Chart{Title: "Jobs run within a distance of their pool, 1,000 pools (Flock of Condors Fig. 6)",
		XLabel: "distance, fraction of the network's diameter", YLabel: "share of jobs", LinearX: true, YMin: 0, YMax: 1}
	idx := map[string]int{}
	add := func(name string, x, y float64) {
		i, ok := idx[name]
		if !ok {
			i = len(c.Series)
			idx[name] = i
			c.Series = append(c.Series, Series{Name: name})
		}
		c.Series[i].Points = append(c.Series[i].Points, [2]float64{x, y})
	}
	label := func(m FlockMode) string {
		switch m {
		case FlockNearest:
			return "nearest first"
		case FlockRandom:
			return "random order"
		}
		return string(m)
	}
	for _, p := range pts {
		add(label(p.Mode)+", flocked jobs", p.Within, p.Flocked)
	}
	for _, p := range pts {
		add(label(p.Mode)+", all jobs", p.Within, p.All)
	}
	return figure{"paper_flock_fig6.svg", 1000, 560, c}
}

// drawFigures draws the figures of the CSV files in dir. With write set it
// writes them to dir; otherwise it checks that the files there are those
// drawings.
func drawFigures(t *testing.T, dir string, write bool) {
	t.Helper()
	figs := readFigures(t, dir)
	if len(figs) == 0 {
		t.Fatalf("no CSV file to draw in %s", dir)
	}
	for _, f := range figs {
		var b bytes.Buffer
		if err := f.chart.WriteSVG(&b, f.w, f.h); err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
		path := filepath.Join(dir, f.file)
		if write {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		have, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(have, b.Bytes()) {
			t.Errorf("%s is not the figure drawn from the CSV files beside it (%v): run go test ./overlay/sim -run TestPlots -sim.plots", path, err)
		}
	}
}

// TestPlots checks that the figures in docs/sim are drawn from the CSV
// files there; with -sim.plots it draws them again, which takes seconds:
//
//	go test ./overlay/sim -run TestPlots -sim.plots
func TestPlots(t *testing.T) {
	drawFigures(t, docsDir, *plots)
}
