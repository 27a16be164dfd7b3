package sim

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var paperFigures = flag.Bool("sim.papers", false, "write the papers' figures' CSV files in docs/sim (paper_*.csv, except the flock's, which -sim.flock writes) and draw every figure")

// schedulingModel is the central negotiator's and the flocks' model of
// paper_pond_fig6.csv: the negotiator's measured matchmaking pass, 0.36 s
// over 10,000 slots (docs/performance.md, "Against the targets"; go test
// -run '^$' -bench Matchmake ./condor/negotiator/), flocks of 100 nodes,
// and the tree simulations' mean edge of 175 ms.
var schedulingModel = SchedulingModel{Cycle: 360 * time.Millisecond, CycleSlots: 10_000, FlockSize: 100, Edge: 175 * time.Millisecond}

// Names of the series of paper_pond_fig6.csv.
const (
	seriesTreeBest  = "pond tree query, best-rank (simulated)"
	seriesTreeFirst = "pond tree query, first-fit (simulated)"
	seriesCentral   = "central negotiator (measured cycle x N/10^4)"
	seriesFlockBest = "flocks of 100, best-rank (model)"
	seriesFlockAny  = "flocks of 100, first-fit (model)"
)

// pondFig6 is the figure of scheduling latency against the size of the
// pool: the tree query's median latency from tree.csv, and the models.
func pondFig6(t *testing.T, tree []Row) []Series {
	t.Helper()
	best, first := Series{Name: seriesTreeBest}, Series{Name: seriesTreeFirst}
	for _, r := range tree {
		p := [2]float64{float64(r.Config.Nodes), r.LatencyP50.Seconds()}
		switch r.Variant {
		case "best-rank":
			best.Points = append(best.Points, p)
		case "first-fit":
			first.Points = append(first.Points, p)
		}
	}
	if len(best.Points) < 2 || len(first.Points) < 2 {
		t.Fatalf("tree.csv: %d best-rank and %d first-fit rows, want two or more of each", len(best.Points), len(first.Points))
	}
	central, flockBest, flockAny := Series{Name: seriesCentral}, Series{Name: seriesFlockBest}, Series{Name: seriesFlockAny}
	m := schedulingModel
	for _, n := range Decades(100, 1e6) {
		central.Points = append(central.Points, [2]float64{n, m.Central(n)})
		flockBest.Points = append(flockBest.Points, [2]float64{n, m.FlockBestRank(n)})
		flockAny.Points = append(flockAny.Points, [2]float64{n, m.FlockFirstFit(n)})
	}
	return []Series{best, first, central, flockBest, flockAny}
}

// condorJ2Queue is the throughput of pond's schedd against the length of
// its queue, as measured in docs/performance.md ("Schedd as its queue
// grows", "Queue-wide reads" and "CondorJ2 Figs. 13–14"), and Condor
// 6.8's as the CondorJ2 paper states it in its text. A submit of 10,000
// through the real binary is placed at the middle of the queue lengths it
// spans; the rate jobs start is measured at each queue length.
func condorJ2Queue() []Series {
	atQueued := func(name string, rates ...float64) Series {
		s := Series{Name: name}
		for i, q := range []float64{1_000, 10_000, 50_000, 100_000} {
			s.Points = append(s.Points, [2]float64{q, rates[i]})
		}
		return s
	}
	per10k := func(name string, rates ...float64) Series {
		s := Series{Name: name}
		for i, r := range rates {
			s.Points = append(s.Points, [2]float64{float64(10_000*i + 5_000), r})
		}
		return s
	}
	return []Series{
		atQueued("pond, submit in process (BenchmarkQueueFlat)", 1_062, 1_122, 1_344, 1_314),
		per10k("pond binary, submit per 10,000 (run 1)", 641, 427, 847, 1_008, 720, 607, 566, 544, 536, 755),
		per10k("pond binary, submit per 10,000 (run 2)", 1_050, 819, 994, 881, 768, 918, 824, 1_182, 1_124, 1_031),
		per10k("pond binary before autoclusters", 1_092, 511, 335, 266, 238),
		atQueued("pond binary, job starts/s (QueueStarts, run 1)", 93.1, 112.1, 116.2, 119.4),
		atQueued("pond binary, job starts/s (QueueStarts, run 2)", 52.0, 50.6, 96.0, 87.6),
		atQueued("pond binary, job starts/s (QueueStarts, run 3)", 144.9, 110.8, 105.1, 146.2),
		atQueued("pond, job starts/s in process (QueueFlat, 2 slots)", 45.5, 46.1, 23.0, 31.8),
		{Name: "Condor 6.8 (paper's text): under 2 jobs/s past 1,800", Points: [][2]float64{{1_800, 2}, {100_000, 2}}},
	}
}

// Job-length model of paper_condorj2_joblength.csv: examples/local's 8
// slots (four agents of two) and its measured rate of trivial jobs,
// 93.8 jobs/s over 10,000 (BenchmarkLocalThroughput, docs/performance.md).
const (
	localSlots     = 8
	localTrivialPS = 93.8
)

// condorJ2JobLength is pond's throughput against the length of its jobs,
// scaled from the measured trivial-job rate: each of S slots runs a job
// of L seconds, then waits S/R for the pool to start the next one, so
// X(L) = S / (L + S/R).
func condorJ2JobLength() []Series {
	s := Series{Name: "pond, examples/local (8 slots), scaled from 93.8 jobs/s"}
	for _, l := range Decades(0.1, 10_000) {
		s.Points = append(s.Points, [2]float64{l, localSlots / (l + localSlots/localTrivialPS)})
	}
	return []Series{s}
}

// paperCSVs returns the contents of the papers' figures' CSV files that
// are computed from the other files and the models, by file name.
func paperCSVs(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "tree.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tree, err := ReadCSV(f)
	if err != nil {
		t.Fatalf("tree.csv: %v", err)
	}
	out := map[string][]byte{}
	for _, c := range []struct {
		file, x, y string
		series     []Series
	}{
		{"paper_pond_fig6.csv", "nodes", "latency_s", pondFig6(t, tree)},
		{"paper_condorj2_queue.csv", "queued", "jobs_per_s", condorJ2Queue()},
		{"paper_condorj2_joblength.csv", "job_length_s", "jobs_per_s", condorJ2JobLength()},
	} {
		var b bytes.Buffer
		if err := WriteSeriesCSV(&b, c.x, c.y, c.series); err != nil {
			t.Fatal(err)
		}
		out[c.file] = b.Bytes()
	}
	return out
}

// TestPaperFigures checks that the papers' figures' CSV files in docs/sim
// are those the models and tree.csv give, and reports where the lines of
// PonD's Figure 6 cross; with -sim.papers it writes them and draws every
// figure again, in seconds:
//
//	go test ./overlay/sim -run TestPaperFigures -sim.papers -v
func TestPaperFigures(t *testing.T) {
	for file, want := range paperCSVs(t, docsDir) {
		path := filepath.Join(docsDir, file)
		if *paperFigures {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if have, err := os.ReadFile(path); err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s is not what the models give (%v): run go test ./overlay/sim -run TestPaperFigures -sim.papers", path, err)
		}
	}
	if *paperFigures {
		drawFigures(t, docsDir, true)
	}

	f, err := os.Open(filepath.Join(docsDir, "paper_pond_fig6.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	series, _, _, err := ReadSeriesCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	// The tree's lines are its simulated sizes joined in log N; the
	// models' their own functions.
	m := schedulingModel
	lines := map[string]func(float64) float64{seriesCentral: m.Central, seriesFlockBest: m.FlockBestRank, seriesFlockAny: m.FlockFirstFit}
	for _, s := range series {
		if lines[s.Name] != nil {
			continue
		}
		if lines[s.Name], err = LogInterp(s.Points); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
	}
	for _, c := range []struct{ a, b string }{{seriesTreeBest, seriesCentral}, {seriesTreeBest, seriesFlockBest}, {seriesTreeFirst, seriesCentral}, {seriesTreeFirst, seriesFlockAny}} {
		if x, ok := Crossover(lines[c.a], lines[c.b], 100, 1e6); ok {
			t.Logf("%s crosses %s at %.3g nodes (%.2f s)", c.a, c.b, x, lines[c.a](x))
		} else {
			t.Logf("%s does not cross %s between 10^2 and 10^6 nodes", c.a, c.b)
		}
	}
}

// TestSchedulingModel checks the models against values worked by hand.
func TestSchedulingModel(t *testing.T) {
	m := schedulingModel
	for _, c := range []struct {
		name string
		f    func(float64) float64
		n    float64
		want float64
	}{
		{"central, 10^4 slots: the measured cycle", m.Central, 1e4, 0.36},
		{"central, 10^6", m.Central, 1e6, 36},
		{"flocks best-rank, one pool of 100", m.FlockBestRank, 100, 0.35 + 0.0036},
		{"flocks best-rank, 10^4 = 100 pools", m.FlockBestRank, 1e4, 100 * 0.3536},
		{"flocks best-rank, 150 = two pools", m.FlockBestRank, 150, 2 * 0.3536},
		{"flocks first-fit, 10^6: the home pool", m.FlockFirstFit, 1e6, 0.3536},
		{"flocks first-fit, 50 nodes", m.FlockFirstFit, 50, 0.35 + 0.0018},
	} {
		if got := c.f(c.n); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLogInterpCrossover(t *testing.T) {
	tree, err := LogInterp([][2]float64{{1e4, 4}, {100, 2}, {1e6, 6}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ x, want float64 }{{100, 2}, {1000, 3}, {1e5, 5}, {10, 1}, {1e7, 7}} {
		if got := tree(c.x); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("interpolated at %v: %v, want %v", c.x, got, c.want)
		}
	}
	linear := func(n float64) float64 { return n / 1000 } // 1 s at 1,000 nodes
	x, ok := Crossover(tree, linear, 100, 1e6)
	// tree(x) = 2 + log10(x/100), linear(x) = x/1000: they meet near 3,550 nodes.
	if !ok || math.Abs(tree(x)-linear(x)) > 1e-6 || x < 3500 || x > 3600 {
		t.Errorf("crossover at %v (%v), want where both are equal near 3,550", x, ok)
	}
	if _, ok := Crossover(tree, func(float64) float64 { return 100 }, 100, 1e6); ok {
		t.Error("a line above the other everywhere crosses it")
	}
	for _, bad := range [][][2]float64{{{1, 1}}, {{0, 1}, {10, 2}}, {{10, 1}, {10, 2}}} {
		if _, err := LogInterp(bad); err == nil {
			t.Errorf("LogInterp(%v): no error", bad)
		}
	}
}

func TestDecades(t *testing.T) {
	got := Decades(100, 1000)
	want := []float64{100, 200, 500, 1000}
	if len(got) != len(want) {
		t.Fatalf("Decades(100, 1000) = %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("Decades(100, 1000) = %v, want %v", got, want)
		}
	}
}

func TestSeriesCSV(t *testing.T) {
	in := []Series{{Name: "a, quoted", Points: [][2]float64{{1, 2}, {10, 0.5}}}, {Name: "b", Points: [][2]float64{{3, 4}}}}
	var b bytes.Buffer
	if err := WriteSeriesCSV(&b, "x", "y", in); err != nil {
		t.Fatal(err)
	}
	out, x, y, err := ReadSeriesCSV(&b)
	if err != nil || x != "x" || y != "y" || len(out) != 2 || out[0].Name != "a, quoted" || len(out[0].Points) != 2 || out[0].Points[1] != [2]float64{10, 0.5} || out[1].Points[0] != [2]float64{3, 4} {
		t.Fatalf("read back %v %q %q %v", out, x, y, err)
	}
	for _, bad := range []string{"", "name,x,y\na,1,2\n", "series,x,y\na,1\n", "series,x,y\na,one,2\n", "series,x,y\na,1,NaN\n"} {
		if _, _, _, err := ReadSeriesCSV(bytes.NewReader([]byte(bad))); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzReadSeriesCSV(f *testing.F) {
	f.Add([]byte("series,x,y\na,1,2\nb,3,4e5\n"))
	f.Add([]byte("series,x,y\n\"a,b\",1,2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		series, x, y, err := ReadSeriesCSV(bytes.NewReader(data))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := WriteSeriesCSV(&b, x, y, series); err != nil {
			t.Fatal(err)
		}
		again, _, _, err := ReadSeriesCSV(&b)
		if err != nil || len(again) != len(series) {
			t.Fatalf("written and read again: %v, %d series, want %d", err, len(again), len(series))
		}
	})
}

func TestLocality(t *testing.T) {
	rep := &FlockReport{Mode: FlockNearest, Distances: []float64{0, 0.3, 0, 0.1, 0.5, 0}}
	for _, c := range []struct{ within, all, flocked float64 }{
		{0, 3.0 / 6, 0}, {0.1, 4.0 / 6, 1.0 / 3}, {0.2, 4.0 / 6, 1.0 / 3}, {0.35, 5.0 / 6, 2.0 / 3}, {1, 1, 1},
	} {
		p := Locality(rep, []float64{c.within})[0]
		if math.Abs(p.All-c.all) > 1e-12 || math.Abs(p.Flocked-c.flocked) > 1e-12 || p.Mode != FlockNearest {
			t.Errorf("within %v: all %v flocked %v, want %v and %v", c.within, p.All, p.Flocked, c.all, c.flocked)
		}
	}
	if p := Locality(&FlockReport{}, []float64{0.5})[0]; p.All != 0 || p.Flocked != 0 {
		t.Errorf("no job: %+v", p)
	}
	var b bytes.Buffer
	pts := Locality(rep, []float64{0, 0.2, 1})
	if err := WriteLocalityCSV(&b, pts); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLocalityCSV(&b)
	if err != nil || len(back) != 3 || back[1].Within != 0.2 || math.Abs(back[1].Flocked-1.0/3) > 1e-4 {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if _, err := ReadLocalityCSV(bytes.NewReader([]byte("mode,within_diameter,all_jobs,flocked_jobs\nnearest,0.2,1.5,0\n"))); err == nil {
		t.Error("a share of 1.5: no error")
	}
}

// TestChartLogY checks a logarithmic y axis: one labelled tick per decade
// the points span, each decade the same height, every point inside the
// plot, and no y of zero or below.
func TestChartLogY(t *testing.T) {
	const w, h = 400, 300
	c := &Chart{Title: "log y", LogY: true, Series: []Series{{Name: "s", Points: [][2]float64{{10, 0.002}, {100, 0.02}, {1000, 0.2}, {1e4, 2000}}}}}
	var b bytes.Buffer
	if err := c.WriteSVG(&b, w, h); err != nil {
		t.Fatal(err)
	}
	img := parseSVG(t, b.Bytes())
	labels := strings.Join(img.texts, " ")
	for _, want := range []string{"0.001", "0.01", "0.1", " 1 ", "10", "100", "1000", "10000"} {
		if !strings.Contains(" "+labels+" ", " "+strings.TrimSpace(want)+" ") {
			t.Errorf("no tick labelled %q among %q", strings.TrimSpace(want), labels)
		}
	}
	pts := img.series[0][len(img.series[0])-4:] // the markers
	d1, d2 := pts[0][1]-pts[1][1], pts[1][1]-pts[2][1]
	if math.Abs(d1-d2) > 0.11 || d1 <= 0 {
		t.Errorf("a decade is %v pixels high, then %v", d1, d2)
	}
	for _, p := range img.series[0] {
		if p[1] < plotTop || p[1] > h-plotBottom {
			t.Errorf("point drawn at y = %v, outside %d..%d", p[1], plotTop, h-plotBottom)
		}
	}
	for _, y := range []float64{0, -1} {
		bad := &Chart{Title: "bad", LogY: true, Series: []Series{{Name: "s", Points: [][2]float64{{1, 1}, {2, y}}}}}
		if err := bad.WriteSVG(&b, w, h); err == nil {
			t.Errorf("y = %v on a log axis: no error", y)
		}
	}
	if got := decadeLabel(1e7); got != "1e7" {
		t.Errorf("decadeLabel(1e7) = %q", got)
	}
}

// TestPandaFactoryFigures checks the measured series of the PanDA pilot
// factory's figures (acceptance/TestFactoryDayFigures writes them): each
// file holds both modes, each read once a second of a scaled hour or
// more, in time order, with CPU and memory that a process can have and
// jobs done that never decrease. TestPlots checks their charts.
func TestPandaFactoryFigures(t *testing.T) {
	modes := []string{"factory, late binding", "a glidein per job"}
	for _, c := range []struct {
		file, y string
		ok      func(prev, v float64) bool
	}{
		{"paper_panda_factory_cpu.csv", "cpu_percent", func(_, v float64) bool { return v >= 0 && v <= 100*64 }},
		{"paper_panda_factory_mem.csv", "rss_mib", func(_, v float64) bool { return v > 0 }},
		{"paper_panda_factory_jobs.csv", "jobs_done", func(prev, v float64) bool { return v >= prev && v == math.Trunc(v) }},
	} {
		f, err := os.Open(filepath.Join(docsDir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		series, x, y, err := ReadSeriesCSV(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if x != "scaled_hour" || y != c.y {
			t.Errorf("%s: columns %s, %s; want scaled_hour, %s", c.file, x, y, c.y)
		}
		if len(series) != len(modes) {
			t.Fatalf("%s: %d series, want %d", c.file, len(series), len(modes))
		}
		for i, s := range series {
			if s.Name != modes[i] {
				t.Errorf("%s: series %d is %q, want %q", c.file, i, s.Name, modes[i])
			}
			if len(s.Points) < 30 {
				t.Errorf("%s: %s has %d points", c.file, s.Name, len(s.Points))
			}
			for j, p := range s.Points {
				prev := 0.0
				if j > 0 {
					prev = s.Points[j-1][1]
					if p[0] <= s.Points[j-1][0] {
						t.Errorf("%s: %s: x %v after %v", c.file, s.Name, p[0], s.Points[j-1][0])
						break
					}
				}
				if !c.ok(prev, p[1]) {
					t.Errorf("%s: %s: %s %v at %v", c.file, s.Name, c.y, p[1], p[0])
					break
				}
			}
		}
	}
}
