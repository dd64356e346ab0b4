package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The drawing's size and the plot area within it, in SVG units: the top
// of the plot area moves down by legendRow for each row of the legend past
// the first.
const (
	width, height           = 760, 380
	left, right, top, below = 64, 16, 56, 52
	legendRow               = 18
)

// palette colours the series in order (then again).
var palette = []string{"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2"}

// num writes a coordinate or a tick: at most two decimals, no trailing zeros.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

func esc(s string) string { return html.EscapeString(s) }

// svg draws the chart.
func (c *chart) svg() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", left, esc(c.title))
	ptop := float64(top + legendRow*(c.legend(&b)-1))
	xmin, xmax := c.xRange()
	ymax := c.yMax()
	step := niceStep(ymax)
	ymax = math.Ceil(ymax/step) * step
	py := func(v float64) float64 { return height - below - v/ymax*(height-below-ptop) }
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%s" y2="%s" stroke="#ddd"/>`+"\n", left, width-right, num(py(v)), num(py(v)))
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end">%s</text>`+"\n", left-6, num(py(v)+4), num(v))
	}
	mid := num((ptop + height - below) / 2)
	fmt.Fprintf(&b, `<text x="14" y="%s" transform="rotate(-90 14 %s)" text-anchor="middle">%s</text>`+"\n", mid, mid, esc(c.y))
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (left+width-right)/2, height-8, esc(c.x))
	if c.kind == "lines" {
		c.lines(&b, xmin, xmax, py)
	} else {
		c.bars(&b, py)
	}
	if c.ref != nil {
		y := num(py(*c.ref))
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%s" y2="%s" stroke="#333" stroke-dasharray="6 4"/>`+"\n", left, width-right, y, y)
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end" fill="#333">%s</text>`+"\n", width-right-4, num(py(*c.ref)-5), esc(c.refLabel))
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>`+"\n", left, width-right, height-below, height-below)
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// legend names the series in rows under the title, and returns how many
// rows it took.
func (c *chart) legend(b *strings.Builder) (rows int) {
	x, y := left, 32
	for i, s := range c.series {
		w := 16 + 7*len([]rune(s)) + 18
		if x > left && x+w > width-right {
			x, y = left, y+legendRow
		}
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", x, y, palette[i%len(palette)])
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x+16, y+10, esc(s))
		x += w
	}
	return (y-32)/legendRow + 1
}

// xRange is the span of x of a line chart.
func (c *chart) xRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, l := range c.labels {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil {
			continue
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// yMax is the largest value drawn (at least the reference line's), with room
// above it.
func (c *chart) yMax() float64 {
	m := 0.0
	if c.ref != nil {
		m = *c.ref
	}
	for _, row := range c.values {
		for _, v := range row {
			if !math.IsNaN(v) {
				m = max(m, v)
			}
		}
	}
	if m <= 0 {
		return 1
	}
	return m * 1.08
}

// niceStep is a tick step of 1, 2 or 5 times a power of ten giving at most
// eight ticks up to m.
func niceStep(m float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(m)))
	for _, f := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10} {
		if m/(f*p) <= 8 {
			return f * p
		}
	}
	return 10 * p
}

func (c *chart) lines(b *strings.Builder, xmin, xmax float64, py func(float64) float64) {
	px := func(v float64) float64 { return left + (v-xmin)/(xmax-xmin)*(width-right-left) }
	step := niceStep(xmax - xmin)
	for v := math.Ceil(xmin/step) * step; v <= xmax+step/1e6; v += step {
		fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(px(v)), height-below+16, num(v))
	}
	for s := range c.series {
		var pts []string
		for r, l := range c.labels {
			v := c.values[r][s]
			if math.IsNaN(v) {
				continue
			}
			x, _ := strconv.ParseFloat(l, 64)
			pts = append(pts, num(px(x))+","+num(py(v)))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", palette[s%len(palette)], strings.Join(pts, " "))
	}
}

func (c *chart) bars(b *strings.Builder, py func(float64) float64) {
	group := float64(width-right-left) / float64(len(c.labels))
	bar := group * 0.8 / float64(len(c.series))
	for r, l := range c.labels {
		x0 := left + float64(r)*group + group*0.1
		fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(x0+group*0.4), height-below+16, esc(l))
		for s := range c.series {
			v := c.values[r][s]
			if math.IsNaN(v) {
				continue
			}
			x := x0 + float64(s)*bar
			fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s, %s: %s</title></rect>`+"\n",
				num(x), num(py(v)), num(bar*0.92), num(py(0)-py(v)), palette[s%len(palette)], esc(l), esc(c.series[s]), num(v))
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="10">%s</text>`+"\n", num(x+bar*0.46), num(py(v)-3), num(v))
		}
	}
}
