package sim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// Series is one line of a chart.
type Series struct {
	Name   string
	Points [][2]float64 // (x, y)
}

// Chart is a line chart with a logarithmic x axis, or a linear one.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// LinearX draws the x axis linearly, from the smallest x to the
	// largest.
	LinearX bool
	// LogY draws the y axis logarithmically, one tick per decade, over
	// the decades the points span; YMin and YMax do not apply.
	LogY bool
	// YMin and YMax fix the y range when YMax > YMin (widened if a point
	// falls outside it); otherwise it is fitted to the data (from zero).
	YMin, YMax float64
}

// SeriesOf groups rows by variant into series of (nodes, y(row)).
func SeriesOf(rows []Row, y func(*Report) float64) []Series {
	return SeriesXY(rows, func(r *Report) float64 { return float64(r.Config.Nodes) }, y)
}

// SeriesXY groups rows by variant into series of (x(row), y(row)).
func SeriesXY(rows []Row, x, y func(*Report) float64) []Series {
	var out []Series
	idx := map[string]int{}
	for _, r := range rows {
		i, ok := idx[r.Variant]
		if !ok {
			i = len(out)
			idx[r.Variant] = i
			out = append(out, Series{Name: r.Variant})
		}
		out[i].Points = append(out[i].Points, [2]float64{x(r.Report), y(r.Report)})
	}
	return out
}

// palette colours the series, in order.
var palette = []string{
	"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
}

// Margins of the plot area, in pixels; the legend goes in a margin right
// of the plot, so that it hides no line.
const (
	plotLeft, plotTop, plotBottom = 70, 40, 50
	// charWidth is the advance of a character of the charts' monospace
	// font at fontSize.
	charWidth, fontSize = 7, 12
)

// WriteSVG draws the chart, w by h pixels, as an SVG image. The image is
// plain text, written with the standard library only, and the same chart
// always gives the same bytes.
func (c *Chart) WriteSVG(out io.Writer, w, h int) error {
	f, err := c.frame(w, h)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="%d">`+"\n",
		w, h, w, h, fontSize)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	c.writeAxes(&b, f, h)
	c.writeSeries(&b, f)
	b.WriteString("</svg>\n")
	if _, err := out.Write(b.Bytes()); err != nil {
		return fmt.Errorf("chart %q: %w", c.Title, err)
	}
	return nil
}

// chartFrame places a chart's data in its image: the plot area, in
// pixels, and the data ranges it spans.
type chartFrame struct {
	px0, px1, py0, py1     float64
	xmin, xmax, ymin, ymax float64
	// lx0 and lx1 are the decades the logarithmic x axis spans, ly0
	// and ly1 those of a logarithmic y axis.
	lx0, lx1 float64
	ly0, ly1 float64
	linearX  bool
	logY     bool
}

// frame fits the plot area of a w by h image, with the legend's margin
// right of it, and the axes' ranges to the chart's points.
func (c *Chart) frame(w, h int) (*chartFrame, error) {
	right := 20
	if len(c.Series) > 0 {
		longest := 0
		for _, s := range c.Series {
			longest = max(longest, len(s.Name))
		}
		right += 40 + charWidth*longest
	}
	if right > w/2 {
		right = w / 2
	}
	f := &chartFrame{px0: float64(plotLeft), px1: float64(w - right), py0: float64(h - plotBottom), py1: float64(plotTop), linearX: c.LinearX, logY: c.LogY}
	if err := c.fitRanges(f); err != nil {
		return nil, err
	}
	f.lx0, f.lx1 = math.Floor(math.Log10(f.xmin)), math.Ceil(math.Log10(f.xmax))
	if f.lx1 <= f.lx0 {
		f.lx1 = f.lx0 + 1
	}
	if c.LinearX && f.xmax <= f.xmin {
		f.xmax = f.xmin + 1
	}
	if c.LogY {
		f.ly0, f.ly1 = math.Floor(math.Log10(f.ymin)), math.Ceil(math.Log10(f.ymax))
		if f.ly1 <= f.ly0 {
			f.ly1 = f.ly0 + 1
		}
	}
	return f, nil
}

// fitRanges sets f's x range to the points' and its y range to the fixed
// one, widened to show every point, or to one fitted from zero.
func (c *Chart) fitRanges(f *chartFrame) error {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := 0.0, math.Inf(-1)
	dmin := math.Inf(1) // the smallest y, where ymin starts from zero
	for _, s := range c.Series {
		for _, p := range s.Points {
			if p[0] <= 0 && !c.LinearX {
				return fmt.Errorf("chart %q: x = %v cannot go on a log axis", c.Title, p[0])
			}
			if p[1] <= 0 && c.LogY {
				return fmt.Errorf("chart %q: y = %v cannot go on a log axis", c.Title, p[1])
			}
			xmin, xmax = math.Min(xmin, p[0]), math.Max(xmax, p[0])
			ymax = math.Max(ymax, p[1])
			ymin = math.Min(ymin, p[1])
			dmin = math.Min(dmin, p[1])
		}
	}
	if math.IsInf(xmin, 1) {
		return fmt.Errorf("chart %q: no data", c.Title)
	}
	if c.LogY {
		f.xmin, f.xmax, f.ymin, f.ymax = xmin, xmax, dmin, ymax
		return nil
	}
	if c.YMax > c.YMin {
		// A fixed range is widened to show every point rather than
		// drawing lines outside the plot.
		dmax := ymax
		ymin, ymax = c.YMin, c.YMax
		if dmin < ymin {
			ymin = math.Floor(dmin*10) / 10
		}
		if dmax > ymax {
			ymax = niceCeil(dmax)
		}
	} else {
		ymax = niceCeil(ymax)
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	f.xmin, f.xmax, f.ymin, f.ymax = xmin, xmax, ymin, ymax
	return nil
}

// X is the pixel column of x.
func (f *chartFrame) X(x float64) float64 {
	if f.linearX {
		return f.px0 + (f.px1-f.px0)*(x-f.xmin)/(f.xmax-f.xmin)
	}
	return f.px0 + (f.px1-f.px0)*(math.Log10(x)-f.lx0)/(f.lx1-f.lx0)
}

// Y is the pixel row of y.
func (f *chartFrame) Y(y float64) float64 {
	if f.logY {
		return f.py0 - (f.py0-f.py1)*(math.Log10(y)-f.ly0)/(f.ly1-f.ly0)
	}
	return f.py0 - (f.py0-f.py1)*(y-f.ymin)/(f.ymax-f.ymin)
}

// ticks returns where the x axis has its ticks (seven evenly spaced on a
// linear axis, one per decade on a logarithmic one) and where the y axis
// has its own (six on a linear axis, one per decade on a logarithmic one).
func (f *chartFrame) ticks() (xticks, yticks []float64) {
	if f.linearX {
		for i := 0; i <= 6; i++ {
			xticks = append(xticks, f.xmin+(f.xmax-f.xmin)*float64(i)/6)
		}
	} else {
		for e := f.lx0; e <= f.lx1; e++ {
			xticks = append(xticks, math.Pow(10, e))
		}
	}
	if f.logY {
		for e := f.ly0; e <= f.ly1; e++ {
			yticks = append(yticks, math.Pow(10, e))
		}
		return xticks, yticks
	}
	yticks = make([]float64, 6)
	for i := range yticks {
		yticks[i] = f.ymin + (f.ymax-f.ymin)*float64(i)/5
	}
	return xticks, yticks
}

// writeAxes draws the grid, the ticks' labels, the axes, the title and
// the axes' labels of an image h pixels high.
func (c *Chart) writeAxes(b *bytes.Buffer, f *chartFrame, h int) {
	xticks, yticks := f.ticks()
	b.WriteString(`<g stroke="#dddddd">` + "\n")
	for _, v := range xticks {
		line(b, f.X(v), f.py0, f.X(v), f.py1)
	}
	for _, v := range yticks {
		line(b, f.px0, f.Y(v), f.px1, f.Y(v))
	}
	b.WriteString("</g>\n")
	for _, v := range xticks {
		label := strconv.FormatFloat(v, 'g', 4, 64)
		if !c.LinearX {
			label = "1e" + strconv.Itoa(int(math.Round(math.Log10(v))))
		}
		text(b, f.X(v), f.py0+16, "middle", label)
	}
	for _, v := range yticks {
		label := strconv.FormatFloat(v, 'g', 4, 64)
		if c.LogY {
			label = decadeLabel(v)
		}
		text(b, f.px0-6, f.Y(v)+4, "end", label)
	}
	b.WriteString(`<g stroke="black">` + "\n")
	line(b, f.px0, f.py0, f.px1, f.py0)
	line(b, f.px0, f.py0, f.px0, f.py1)
	b.WriteString("</g>\n")
	text(b, f.px0, 20, "start", c.Title)
	text(b, (f.px0+f.px1)/2, float64(h-12), "middle", c.XLabel)
	text(b, 4, f.py1-8, "start", c.YLabel)
}

// writeSeries draws each series' line and points, in order of x, and its
// entry in the legend.
func (c *Chart) writeSeries(b *bytes.Buffer, f *chartFrame) {
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		pts := append([][2]float64(nil), s.Points...)
		sort.SliceStable(pts, func(a, b int) bool { return pts[a][0] < pts[b][0] })
		fmt.Fprintf(b, `<g class="series" stroke="%s" fill="%s">`+"\n", col, col)
		b.WriteString(`<polyline fill="none" stroke-width="3" stroke-linejoin="round" points="`)
		for j, p := range pts {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(b, "%s,%s", num(f.X(p[0])), num(f.Y(p[1])))
		}
		b.WriteString(`"/>` + "\n")
		for _, p := range pts {
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.5"/>`+"\n", num(f.X(p[0])), num(f.Y(p[1])))
		}
		b.WriteString("</g>\n")
		ly := f.py1 + 14 + 16*float64(i)
		fmt.Fprintf(b, `<line class="legend" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"/>`+"\n",
			num(f.px1+15), num(ly-4), num(f.px1+35), num(ly-4), col)
		text(b, f.px1+40, ly, "start", s.Name)
	}
}

// decadeLabel labels a power of ten: in full from 0.001 to 100,000, as
// 1eN beyond.
func decadeLabel(v float64) string {
	e := int(math.Round(math.Log10(v)))
	if e < -3 || e > 5 {
		return "1e" + strconv.Itoa(e)
	}
	return strconv.FormatFloat(math.Pow(10, float64(e)), 'f', -1, 64)
}

// num formats a coordinate to a tenth of a pixel.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

func line(b *bytes.Buffer, x0, y0, x1, y1 float64) {
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", num(x0), num(y0), num(x1), num(y1))
}

// text writes s at (x, y), anchored at its start, middle or end.
func text(b *bytes.Buffer, x, y float64, anchor, s string) {
	fmt.Fprintf(b, `<text x="%s" y="%s"`, num(x), num(y))
	if anchor != "start" {
		fmt.Fprintf(b, ` text-anchor="%s"`, anchor)
	}
	b.WriteByte('>')
	_ = xml.EscapeText(b, []byte(s)) // writes to a bytes.Buffer cannot fail
	b.WriteString("</text>\n")
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
