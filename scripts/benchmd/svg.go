package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The plots are plain SVG: a white background (readable in light and dark
// themes), axes with ticks and labels, and lines or bars. No scripts, no
// external fonts or assets.

const (
	svgFont = `font-family="sans-serif"`
	gridCol = "#dddddd"
	axisCol = "#333333"
)

// palette is the series colours, in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f"}

// series is one line of a line chart.
type series struct {
	Name   string
	X, Y   []float64
	Dashed bool
}

// lineChart describes a chart of series over a numeric x axis.
type lineChart struct {
	Title, Note, XLabel, YLabel string
	Series                      []series
	XTicks                      []float64 // the x positions to label (nil: nice ticks)
}

// writeLineChart renders c as SVG.
func writeLineChart(w io.Writer, c lineChart) error {
	const width, height = 720, 420
	const left, right, top, bottom = 70, 190, 56, 60
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymax := 0.0
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("series %q: %d x, %d y", s.Name, len(s.X), len(s.Y))
		}
		for i := range s.X {
			xmin, xmax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i])
			ymax = math.Max(ymax, s.Y[i])
		}
	}
	if math.IsInf(xmin, 0) {
		return fmt.Errorf("no points")
	}
	xticks := c.XTicks
	if xticks == nil {
		xticks = niceTicks(xmin, xmax)
	}
	xmin, xmax = math.Min(xmin, 0), math.Max(xmax, xticks[len(xticks)-1])
	yticks := niceTicks(0, ymax)
	ytop := yticks[len(yticks)-1]
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ytop == 0 {
		ytop = 1
	}
	px := func(x float64) float64 { return float64(left) + (x-xmin)/(xmax-xmin)*pw }
	py := func(y float64) float64 { return float64(top) + ph - y/ytop*ph }

	var b strings.Builder
	svgOpen(&b, width, height, c.Title, c.Note)
	for _, y := range yticks {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, py(y), float64(left)+pw, py(y), gridCol)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end" %s>%s</text>`+"\n", left-6, py(y)+4, svgFont, num(y))
	}
	for _, x := range xticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", px(x), float64(top)+ph, px(x), float64(top)+ph+5, axisCol)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle" %s>%s</text>`+"\n", px(x), float64(top)+ph+19, svgFont, num(x))
	}
	axes(&b, left, top, pw, ph, c.XLabel, c.YLabel)
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for j := range s.X {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[j]), py(s.Y[j])))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), col, dash)
		for j := range s.X {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s at %s</title></circle>`+"\n",
				px(s.X[j]), py(s.Y[j]), col, esc(s.Name), num(s.Y[j]), num(s.X[j]))
		}
		ly := float64(top) + 10 + float64(i)*22
		lx := float64(left) + pw + 16
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+22, ly, col, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" %s>%s</text>`+"\n", lx+28, ly+4, svgFont, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// bar is one row of a bar chart: a value, and optionally a second value
// drawn as a lighter bar behind it (e.g. a mean in front of its p99).
type bar struct {
	Label      string
	Value      float64
	Back       float64 // 0: none
	Colour     int     // index into palette
	ValueLabel string  // "" : the value
}

// barChart describes a horizontal bar chart.
type barChart struct {
	Title, Note    string
	XLabel         string
	Bars           []bar
	Legend         [][2]string // colour, text
	BackLegend     string      // the lighter bars' meaning ("" : none)
	LabelWidthHint int         // pixels for the row labels (0: 250)
}

// writeBarChart renders c as SVG.
func writeBarChart(w io.Writer, c barChart) error {
	if len(c.Bars) == 0 {
		return fmt.Errorf("no bars")
	}
	const width = 880
	left := c.LabelWidthHint
	if left == 0 {
		left = 250
	}
	const right, top, row, bottom = 190, 56, 30, 90
	height := top + row*len(c.Bars) + bottom
	pw, ph := float64(width-left-right), float64(row*len(c.Bars))
	xmax := 0.0
	for _, r := range c.Bars {
		xmax = math.Max(xmax, math.Max(r.Value, r.Back))
	}
	xticks := niceTicks(0, xmax)
	xtop := xticks[len(xticks)-1]
	if xtop == 0 {
		xtop = 1
	}
	px := func(x float64) float64 { return float64(left) + x/xtop*pw }

	var b strings.Builder
	svgOpen(&b, width, height, c.Title, c.Note)
	for _, x := range xticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", px(x), top, px(x), float64(top)+ph, gridCol)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle" %s>%s</text>`+"\n", px(x), float64(top)+ph+19, svgFont, num(x))
	}
	for i, r := range c.Bars {
		y := float64(top + i*row)
		col := palette[r.Colour%len(palette)]
		if r.Back > 0 {
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s" fill-opacity="0.25"><title>%s</title></rect>`+"\n",
				left, y+5, px(r.Back)-float64(left), row-10, col, esc(r.Label+": "+num(r.Back)))
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
			left, y+9, math.Max(px(r.Value)-float64(left), 1), row-18, col, esc(r.Label+": "+num(r.Value)))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end" %s>%s</text>`+"\n", left-8, y+row/2+4, svgFont, esc(r.Label))
		vl := r.ValueLabel
		if vl == "" {
			vl = num(r.Value)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" %s>%s</text>`+"\n", math.Max(px(r.Value), px(r.Back))+5, y+row/2+4, svgFont, esc(vl))
	}
	axes(&b, left, top, pw, ph, c.XLabel, "")
	lx := float64(left)
	ly := float64(top) + ph + 56
	for _, l := range c.Legend {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="14" height="10" fill="%s"/>`+"\n", lx, ly-9, l[0])
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" %s>%s</text>`+"\n", lx+18, ly, svgFont, esc(l[1]))
		lx += 18 + 6.6*float64(len([]rune(l[1]))) + 24
	}
	if c.BackLegend != "" {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="14" height="10" fill="%s" fill-opacity="0.25"/>`+"\n", lx, ly-9, axisCol)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" %s>%s</text>`+"\n", lx+18, ly, svgFont, esc(c.BackLegend))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// svgOpen starts the document: its size, title and note (a smaller line
// under the title: when and where it was measured).
func svgOpen(b *strings.Builder, width, height int, title, note string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, height, width, height)
	fmt.Fprintf(b, `<title>%s</title>`+"\n", esc(title))
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="16" font-weight="bold" text-anchor="middle" %s>%s</text>`+"\n", width/2, svgFont, esc(title))
	if note != "" {
		fmt.Fprintf(b, `<text x="%d" y="41" font-size="11" fill="#555555" text-anchor="middle" %s>%s</text>`+"\n", width/2, svgFont, esc(note))
	}
}

// axes draws the plot area's left and bottom axes and their labels.
func axes(b *strings.Builder, left, top int, pw, ph float64, xlabel, ylabel string) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", left, top, left, float64(top)+ph, axisCol)
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, float64(top)+ph, float64(left)+pw, float64(top)+ph, axisCol)
	if xlabel != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="13" text-anchor="middle" %s>%s</text>`+"\n", float64(left)+pw/2, float64(top)+ph+40, svgFont, esc(xlabel))
	}
	if ylabel != "" {
		cy := float64(top) + ph/2
		fmt.Fprintf(b, `<text x="18" y="%.1f" font-size="13" text-anchor="middle" transform="rotate(-90 18 %.1f)" %s>%s</text>`+"\n", cy, cy, svgFont, esc(ylabel))
	}
}

// niceTicks returns 4–8 evenly spaced round values from at most lo up to at
// least hi.
func niceTicks(lo, hi float64) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var out []float64
	for v := start; ; v += step {
		out = append(out, roundTo(v, step))
		if v >= hi-step*1e-9 {
			break
		}
	}
	return out
}

func roundTo(v, step float64) float64 {
	d := math.Max(0, -math.Floor(math.Log10(step))+2)
	p := math.Pow(10, d)
	return math.Round(v*p) / p
}

// num formats an axis or value label: thousands separated, at most three
// significant decimals.
func num(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return thousands(strconv.FormatInt(int64(v), 10))
	case math.Abs(v) >= 100:
		return thousands(strconv.FormatFloat(v, 'f', 0, 64))
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func thousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
