package sim

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"sort"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
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

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

// WritePNG draws the chart, w by h pixels, as PNG.
func (c *Chart) WritePNG(out io.Writer, w, h int) error {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	// The legend goes in a margin right of the plot, so it hides no line.
	const left, top, bottom = 70, 40, 50
	right := 20
	if len(c.Series) > 0 {
		longest := 0
		for _, s := range c.Series {
			longest = max(longest, len(s.Name))
		}
		right += 40 + 7*longest
	}
	if right > w/2 {
		right = w / 2
	}
	px0, px1, py0, py1 := left, w-right, h-bottom, top

	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := 0.0, math.Inf(-1)
	dmin := math.Inf(1) // the smallest y, where ymin starts from zero
	for _, s := range c.Series {
		for _, p := range s.Points {
			if p[0] <= 0 && !c.LinearX {
				return fmt.Errorf("chart %q: x = %v cannot go on a log axis", c.Title, p[0])
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
	lx0, lx1 := math.Floor(math.Log10(xmin)), math.Ceil(math.Log10(xmax))
	if lx1 <= lx0 {
		lx1 = lx0 + 1
	}
	X := func(x float64) int {
		return px0 + int(float64(px1-px0)*(math.Log10(x)-lx0)/(lx1-lx0))
	}
	if c.LinearX {
		if xmax <= xmin {
			xmax = xmin + 1
		}
		X = func(x float64) int { return px0 + int(float64(px1-px0)*(x-xmin)/(xmax-xmin)) }
	}
	Y := func(y float64) int {
		return py0 - int(float64(py0-py1)*(y-ymin)/(ymax-ymin))
	}
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	black := color.RGBA{0, 0, 0, 0xff}
	// Grid and ticks.
	if c.LinearX {
		for i := 0; i <= 6; i++ {
			v := xmin + (xmax-xmin)*float64(i)/6
			x := X(v)
			line(img, x, py0, x, py1, grey)
			text(img, x-12, py0+16, strconv.FormatFloat(v, 'g', 4, 64), black)
		}
	} else {
		for e := lx0; e <= lx1; e++ {
			x := X(math.Pow(10, e))
			line(img, x, py0, x, py1, grey)
			text(img, x-12, py0+16, "1e"+strconv.Itoa(int(e)), black)
		}
	}
	for i := 0; i <= 5; i++ {
		v := ymin + (ymax-ymin)*float64(i)/5
		y := Y(v)
		line(img, px0, y, px1, y, grey)
		text(img, 4, y+4, strconv.FormatFloat(v, 'g', 4, 64), black)
	}
	line(img, px0, py0, px1, py0, black)
	line(img, px0, py0, px0, py1, black)
	text(img, px0, 20, c.Title, black)
	text(img, (px0+px1)/2-len(c.XLabel)*3, h-12, c.XLabel, black)
	text(img, 4, py1-8, c.YLabel, black)
	// Lines, with a legend.
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		pts := append([][2]float64(nil), s.Points...)
		sort.Slice(pts, func(a, b int) bool { return pts[a][0] < pts[b][0] })
		for j, p := range pts {
			x, y := X(p[0]), Y(p[1])
			for dx := -2; dx <= 2; dx++ {
				for dy := -2; dy <= 2; dy++ {
					img.Set(x+dx, y+dy, col)
				}
			}
			if j > 0 {
				thick(img, X(pts[j-1][0]), Y(pts[j-1][1]), x, y, col)
			}
		}
		ly := py1 + 14 + 16*i
		thick(img, px1+15, ly-4, px1+35, ly-4, col)
		text(img, px1+40, ly, s.Name, black)
	}
	if err := png.Encode(out, img); err != nil {
		return fmt.Errorf("chart %q: %w", c.Title, err)
	}
	return nil
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

func text(img draw.Image, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// line draws with Bresenham's algorithm.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	for d := -1; d <= 1; d++ {
		line(img, x0, y0+d, x1, y1+d, c)
		line(img, x0+d, y0, x1+d, y1, c)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
