package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"
)

// SchedulingModel holds the first-order models that scheduling latency
// against the size of a pool is compared with: one central negotiator
// over the whole pool, and the pool split into flocks of FlockSize nodes.
type SchedulingModel struct {
	// Cycle is a negotiation cycle's matchmaking over CycleSlots slots,
	// measured; a cycle over n slots is taken to cost Cycle·n/CycleSlots.
	Cycle      time.Duration
	CycleSlots int
	// FlockSize is the number of nodes of each flocked pool.
	FlockSize int
	// Edge is the mean one-way latency between two nodes (the tree
	// simulations' edges are uniform in 50–300 ms: 175 ms).
	Edge time.Duration
}

// cycle is the negotiation cycle's cost over n slots, in seconds.
func (m SchedulingModel) cycle(n float64) float64 {
	return m.Cycle.Seconds() * n / float64(m.CycleSlots)
}

// Central is the latency of scheduling a job with one negotiator over n
// nodes: one cycle over all of them (the wait for the cycle to start is
// left out, which favours the negotiator).
func (m SchedulingModel) Central(n float64) float64 { return m.cycle(n) }

// FlockBestRank is the latency of finding the best-ranked matches among
// n nodes split into pools of FlockSize flocked in turn: to know the best
// of them the schedd negotiates with every pool, each costing a request
// and an answer over an edge and that pool's cycle.
func (m SchedulingModel) FlockBestRank(n float64) float64 {
	pools := math.Ceil(n / float64(m.FlockSize))
	return pools * (2*m.Edge.Seconds() + m.cycle(math.Min(n, float64(m.FlockSize))))
}

// FlockFirstFit is the latency of finding any matches when the schedd's
// own pool of FlockSize holds enough of them (half the nodes match and
// ten are wanted: it nearly always does): one request, one answer and
// one cycle.
func (m SchedulingModel) FlockFirstFit(n float64) float64 {
	return 2*m.Edge.Seconds() + m.cycle(math.Min(n, float64(m.FlockSize)))
}

// LogInterp returns the function through pts (x ascending, x > 0) that is
// linear in log10 x between them: tree latency grows as log N, so it is
// a straight line between two simulated sizes. Outside pts it extends the
// nearest segment.
func LogInterp(pts [][2]float64) (func(float64) float64, error) {
	if len(pts) < 2 {
		return nil, fmt.Errorf("sim: interpolation needs two points or more, have %d", len(pts))
	}
	p := append([][2]float64(nil), pts...)
	sort.Slice(p, func(a, b int) bool { return p[a][0] < p[b][0] })
	for i, q := range p {
		if q[0] <= 0 || (i > 0 && q[0] == p[i-1][0]) {
			return nil, fmt.Errorf("sim: interpolation: x = %v is not positive or repeats", q[0])
		}
	}
	return func(x float64) float64 {
		i := sort.Search(len(p)-1, func(i int) bool { return p[i+1][0] >= x })
		if i >= len(p)-1 {
			i = len(p) - 2
		}
		a, b := p[i], p[i+1]
		t := (math.Log10(x) - math.Log10(a[0])) / (math.Log10(b[0]) - math.Log10(a[0]))
		return a[1] + t*(b[1]-a[1])
	}, nil
}

// Crossover returns the x in [lo, hi] where f and g cross, by bisection
// on log x, and false if f − g has the same sign at both ends.
func Crossover(f, g func(float64) float64, lo, hi float64) (float64, bool) {
	d := func(x float64) float64 { return f(x) - g(x) }
	dlo, dhi := d(lo), d(hi)
	if dlo == 0 {
		return lo, true
	}
	if (dlo < 0) == (dhi < 0) {
		return 0, false
	}
	a, b := math.Log10(lo), math.Log10(hi)
	for i := 0; i < 100 && b-a > 1e-9; i++ {
		mid := (a + b) / 2
		if (d(math.Pow(10, mid)) < 0) == (dlo < 0) {
			a = mid
		} else {
			b = mid
		}
	}
	return math.Pow(10, (a+b)/2), true
}

// Decades returns 1, 2 and 5 times each power of ten from lo to hi, both
// included: points for a model's line on a logarithmic axis.
func Decades(lo, hi float64) []float64 {
	var out []float64
	for e := math.Floor(math.Log10(lo)); ; e++ {
		for _, m := range []float64{1, 2, 5} {
			x := m * math.Pow(10, e)
			if x > hi*(1+1e-9) {
				return out
			}
			if x >= lo*(1-1e-9) {
				out = append(out, x)
			}
		}
	}
}

// WriteSeriesCSV writes series as CSV rows of (series, x, y) under a
// header naming the three columns.
func WriteSeriesCSV(w io.Writer, xName, yName string, series []Series) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"series", xName, yName}); err != nil {
		return err
	}
	for _, s := range series {
		for _, p := range s.Points {
			if err := cw.Write([]string{s.Name, strconv.FormatFloat(p[0], 'g', 6, 64), strconv.FormatFloat(p[1], 'g', 6, 64)}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadSeriesCSV reads what WriteSeriesCSV wrote: the series in the order
// they first appear, and the names of the x and y columns.
func ReadSeriesCSV(r io.Reader) (series []Series, xName, yName string, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 3
	head, err := cr.Read()
	if err != nil {
		return nil, "", "", fmt.Errorf("header: %w", err)
	}
	if head[0] != "series" {
		return nil, "", "", fmt.Errorf("header: first column %q, want series", head[0])
	}
	idx := map[string]int{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return series, head[1], head[2], nil
		}
		if err != nil {
			return nil, "", "", err
		}
		var p [2]float64
		for j, f := range rec[1:] {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, "", "", fmt.Errorf("line %d: %s %q is not a finite number", line, head[j+1], f)
			}
			p[j] = v
		}
		i, ok := idx[rec[0]]
		if !ok {
			i = len(series)
			idx[rec[0]] = i
			series = append(series, Series{Name: rec[0]})
		}
		series[i].Points = append(series[i].Points, p)
	}
}

// ReadLocalityCSV reads what WriteLocalityCSV wrote.
func ReadLocalityCSV(r io.Reader) ([]LocalityPoint, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 4
	if _, err := cr.Read(); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	var out []LocalityPoint
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		p := LocalityPoint{Mode: FlockMode(rec[0])}
		for j, dst := range []*float64{&p.Within, &p.All, &p.Flocked} {
			v, err := strconv.ParseFloat(rec[j+1], 64)
			if err != nil || v < 0 || v > 1 {
				return nil, fmt.Errorf("line %d: %q is not a fraction", line, rec[j+1])
			}
			*dst = v
		}
		out = append(out, p)
	}
}
