package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// The charts are drawn by hand, in SVG, with the standard library only. Each
// function returns a whole document; writeCharts writes them to files.

// Chart file names, in the directory of -svg.
const (
	callsFile  = "calls.svg"
	timeFile   = "time.svg"
	seriesFile = "series.svg"
)

// chartFile is one chart and the name of its file.
type chartFile struct {
	name string
	draw func(config, results) string
}

// writeCharts writes the charts of res to dir and returns the paths
// written: calls and completion time against the number of clients, and,
// if res has them, the time series of calls.
func writeCharts(dir string, cfg config, res results) ([]string, error) {
	charts := []chartFile{{callsFile, callsChart}, {timeFile, timeChart}}
	if len(res.series) > 0 {
		charts = append(charts, chartFile{seriesFile, seriesChart})
	}
	var paths []string
	for _, c := range charts {
		path := filepath.Join(dir, c.name)
		if err := chart.WriteFile(path, c.draw(cfg, res)); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// style is how a strategy is drawn.
type style struct {
	color  string
	dash   string // stroke-dasharray, empty for a solid line
	marker string // circle, square, diamond, triangle or cross
}

// styles gives each strategy of the experiment its own colour (the
// Okabe-Ito palette, distinct for colour-blind readers too) and marker.
var styles = map[string]style{
	nameNone:         {"#555555", "2 3", "square"},
	nameExponential:  {"#D55E00", "", "triangle"},
	nameFullJitter:   {"#0072B2", "", "circle"},
	nameEqualJitter:  {"#CC79A7", "7 3", "diamond"},
	nameDecorrelated: {"#009E73", "", "cross"},
}

// styleOf returns the style of a strategy; a strategy with no style of its
// own (a Backoff plugged in by a user) gets a colour by its position.
func styleOf(name string, i int) style {
	if s, ok := styles[name]; ok {
		return s
	}
	extra := []string{"#E69F00", "#56B4E9", "#F0E442", "#000000"}
	return style{extra[i%len(extra)], "", "circle"}
}

// Layout of the line charts, in pixels.
const (
	chartWidth   = 820
	plotLeft     = 90
	plotTop      = 72
	plotWidth    = 540
	plotHeight   = 340
	legendLeft   = plotLeft + plotWidth + 28
	noteLine     = 18
	gridColor    = "#e3e3e3"
	axisColor    = "#333333"
	clipPadding  = 6 // markers at the edge of the plot stay whole
	markerRadius = 3.5
)

// axis is the range and ticks of one axis of a chart.
type axis struct {
	min, max float64
	step     float64 // between ticks; on a log axis, the factor between them
	log      bool    // logarithmic: min must be positive
	format   func(float64) string
}

// ticks returns the tick values: the multiples of step within the range,
// or on a log axis the powers of step.
func (a axis) ticks() []float64 {
	var out []float64
	if a.log {
		first := math.Pow(a.step, math.Ceil(math.Log(a.min)/math.Log(a.step)-1e-9))
		for v := first; v <= a.max*(1+1e-9); v *= a.step {
			out = append(out, v)
		}
		return out
	}
	for i := math.Ceil(a.min/a.step - 1e-9); ; i++ {
		v := i*a.step + 0 // + 0 turns -0 into 0, which prints without a sign
		if v > a.max+a.step*1e-9 {
			return out
		}
		out = append(out, v)
	}
}

// scale maps a value of the axis onto [lo, hi] pixels. On a log axis,
// values below min (zero) map to lo.
func (a axis) scale(v, lo, hi float64) float64 {
	if a.log {
		if v <= a.min {
			return lo
		}
		return lo + math.Log(v/a.min)/math.Log(a.max/a.min)*(hi-lo)
	}
	return lo + (v-a.min)/(a.max-a.min)*(hi-lo)
}

// point is one point of a line, in data units.
type point struct{ x, y float64 }

// plotLine is one strategy's line.
type plotLine struct {
	name   string
	style  style
	points []point
}

// lineChart is a chart of lines against a common x axis.
type lineChart struct {
	title, subtitle string
	xLabel, yLabel  string
	x, y            axis
	lines           []plotLine
	notes           []string // printed under the chart
}

// svg accumulates a document.
type svg struct {
	chart.Doc
}

// printf appends formatted text.
func (s *svg) printf(format string, args ...any) { s.Printf(format, args...) }

// begin writes the document's header and a white background.
func (s *svg) begin(width, height int) { s.Begin(width, height, 0) }

// end closes the document and returns it.
func (s *svg) end() string { return s.End() }

// text writes a text element; anchor is start, middle or end.
func (s *svg) text(x, y float64, anchor string, size int, attrs, body string) {
	s.printf(`<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d" fill="%s"%s>%s</text>`+"\n",
		x, y, anchor, size, axisColor, attrs, chart.Esc(body))
}

// line writes a straight line.
func (s *svg) line(x1, y1, x2, y2 float64, color string, width float64) {
	s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%g"/>`+"\n",
		x1, y1, x2, y2, color, width)
}

// marker draws a strategy's marker centred on (x, y).
func (s *svg) marker(kind string, x, y float64, color string) {
	r := markerRadius
	switch kind {
	case "square":
		s.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x-r, y-r, 2*r, 2*r, color)
	case "diamond":
		r *= 1.3
		s.printf(`<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y-r, x+r, y, x, y+r, x-r, y, color)
	case "triangle":
		r *= 1.3
		s.printf(`<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y-r, x+r, y+0.8*r, x-r, y+0.8*r, color)
	case "cross":
		s.printf(`<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2"/>`,
			x-r, y-r, x+r, y+r, x-r, y+r, x+r, y-r, color)
	default:
		s.printf(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>`, x, y, r, color)
	}
	s.WriteString("\n")
}

// header writes the title and the subtitle.
func (s *svg) header(title, subtitle string) {
	s.text(plotLeft, 30, "start", 18, ` font-weight="bold"`, title)
	s.text(plotLeft, 52, "start", 13, "", subtitle)
}

// render draws c.
func (c lineChart) render() string {
	bottom := plotTop + plotHeight
	height := bottom + 64 + noteLine*len(c.notes) + 8
	var s svg
	s.begin(chartWidth, height)
	s.header(c.title, c.subtitle)
	c.drawAxes(&s)
	s.printf(`<clipPath id="plot"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>`+"\n",
		plotLeft-clipPadding, plotTop-clipPadding, plotWidth+2*clipPadding, plotHeight+2*clipPadding)
	s.WriteString(`<g clip-path="url(#plot)">` + "\n")
	for _, l := range c.lines {
		c.drawLine(&s, l)
	}
	s.WriteString("</g>\n")
	for _, l := range c.lines {
		c.labelExit(&s, l)
	}
	c.drawLegend(&s)
	for i, n := range c.notes {
		s.text(plotLeft, float64(bottom+64+noteLine*i), "start", 12, "", n)
	}
	return s.end()
}

// drawAxes draws the grid, the ticks with their labels and the axis labels.
func (c lineChart) drawAxes(s *svg) {
	left, top := float64(plotLeft), float64(plotTop)
	right, bottom := left+plotWidth, top+plotHeight
	for _, v := range c.y.ticks() {
		y := c.y.scale(v, bottom, top)
		s.line(left, y, right, y, gridColor, 1)
		s.line(left-5, y, left, y, axisColor, 1)
		s.text(left-9, y+4, "end", 12, "", c.y.format(v))
	}
	for _, v := range c.x.ticks() {
		x := c.x.scale(v, left, right)
		s.line(x, top, x, bottom, gridColor, 1)
		s.line(x, bottom, x, bottom+5, axisColor, 1)
		s.text(x, bottom+20, "middle", 12, "", c.x.format(v))
	}
	s.line(left, top, left, bottom, axisColor, 1)
	s.line(left, bottom, right, bottom, axisColor, 1)
	s.text((left+right)/2, bottom+44, "middle", 13, "", c.xLabel)
	mid := (top + bottom) / 2
	s.text(26, mid, "middle", 13, fmt.Sprintf(` transform="rotate(-90 26 %.1f)"`, mid), c.yLabel)
}

// drawLine draws one line and its markers.
func (c lineChart) drawLine(s *svg, l plotLine) {
	left, top := float64(plotLeft), float64(plotTop)
	var pts []string
	for _, p := range l.points {
		x, y := c.x.scale(p.x, left, left+plotWidth), c.y.scale(p.y, top+plotHeight, top)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	dash := ""
	if l.style.dash != "" {
		dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.style.dash)
	}
	s.printf(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2.2" stroke-linejoin="round"%s/>`+"\n",
		strings.Join(pts, " "), l.style.color, dash)
	for _, p := range l.points {
		s.marker(l.style.marker, c.x.scale(p.x, left, left+plotWidth), c.y.scale(p.y, top+plotHeight, top), l.style.color)
	}
}

// labelExit names a line where it first leaves the chart through the top.
func (c lineChart) labelExit(s *svg, l plotLine) {
	for i := 1; i < len(l.points); i++ {
		a, b := l.points[i-1], l.points[i]
		if a.y > c.y.max || b.y <= c.y.max {
			continue
		}
		xv := a.x + (c.y.max-a.y)/(b.y-a.y)*(b.x-a.x)
		x := c.x.scale(xv, plotLeft, plotLeft+plotWidth)
		label := l.name + " ↑ off the chart"
		// About 7 pixels a character at 12 pixels: a label that would
		// run past the plot goes to the left of the exit instead.
		x, anchor := x+8, "start"
		if x+7*float64(len(label)) > plotLeft+plotWidth {
			x, anchor = x-16, "end"
		}
		s.printf(`<text x="%.1f" y="%d" text-anchor="%s" font-size="12" fill="%s">%s</text>`+"\n",
			x, plotTop+14, anchor, l.style.color, chart.Esc(label))
		return
	}
}

// drawLegend draws the legend to the right of the plot, in the order of the
// lines.
func (c lineChart) drawLegend(s *svg) {
	for i, l := range c.lines {
		y := float64(plotTop + 12 + 26*i)
		x := float64(legendLeft)
		dash := ""
		if l.style.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.style.dash)
		}
		s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.2"%s/>`+"\n",
			x, y, x+30, y, l.style.color, dash)
		s.marker(l.style.marker, x+15, y, l.style.color)
		s.text(x+40, y+4.5, "start", 13, "", l.name)
	}
}

// niceStep returns a tick spacing of 1, 2 or 5 times a power of ten that
// divides span into at most about n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// niceAxis returns an axis from 0 to max rounded up to a tick, with about
// n ticks.
func niceAxis(hi float64, n int, format func(float64) string) axis {
	step := niceStep(hi, n)
	top := math.Ceil(hi/step-1e-9) * step
	if top <= 0 {
		top = step
	}
	return axis{min: 0, max: top, step: step, format: format}
}

// grouped formats v rounded to a whole number, with thousands separated by
// commas: 12,345.
func grouped(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// seconds formats v seconds with as few decimals as it needs: 0, 2.5, 10.
func seconds(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// settings describes the experiment in one line, for the subtitles.
func settings(cfg config) string {
	return fmt.Sprintf("Mean of %d runs per point · one-way latency %v ± %v · backoff base %v, cap %s",
		cfg.runs, cfg.latency, cfg.latencySD, cfg.base, capText(cfg.cap))
}

// strategyNames returns the names of the strategies in res, in order.
func strategyNames(res results) []string {
	var names []string
	for _, c := range res.cells {
		if len(names) > 0 && c.strategy == names[0] {
			break
		}
		names = append(names, c.strategy)
	}
	return names
}

// linesOf returns one line per strategy: the value f of each cell against
// the number of clients.
func linesOf(res results, f func(cell) float64) []plotLine {
	var lines []plotLine
	for i, name := range strategyNames(res) {
		l := plotLine{name: name, style: styleOf(name, i)}
		for _, c := range res.cells {
			if c.strategy == name {
				l.points = append(l.points, point{float64(c.clients), f(c)})
			}
		}
		lines = append(lines, l)
	}
	return lines
}

// clientsAxis returns the x axis of the charts against the number of
// clients.
func clientsAxis(res results) axis {
	hi := 0.0
	for _, c := range res.cells {
		hi = max(hi, float64(c.clients))
	}
	return niceAxis(hi, 10, grouped)
}

// maxY returns the largest y of the lines.
func maxY(lines []plotLine) float64 {
	hi := 0.0
	for _, l := range lines {
		for _, p := range l.points {
			hi = max(hi, p.y)
		}
	}
	return hi
}

// callsChart draws the mean number of calls against the number of clients.
func callsChart(cfg config, res results) string {
	lines := linesOf(res, func(c cell) float64 { return c.calls })
	return lineChart{
		title:    "Work: calls against the number of clients",
		subtitle: settings(cfg),
		xLabel:   "clients",
		yLabel:   "calls (writes reaching the server)",
		x:        clientsAxis(res),
		y:        niceAxis(maxY(lines), 8, grouped),
		lines:    lines,
		notes: append([]string{
			"Every client writes the row once; each failed write is a wasted call.",
		}, closeNotes(lines, 0.1)...),
	}.render()
}

// closeNotes returns a note for each pair of lines within a fraction tol of
// each other at every point, as the chart draws them one over the other.
func closeNotes(lines []plotLine, tol float64) []string {
	var notes []string
	for i, a := range lines {
		for _, b := range lines[i+1:] {
			if lo, hi, ok := ratioRange(b, a); ok && lo >= 1-tol && hi <= 1+tol {
				notes = append(notes, fmt.Sprintf("%s and %s nearly coincide: %s makes %.2f to %.2f times the calls of %s.",
					a.name, b.name, b.name, lo, hi, a.name))
			}
		}
	}
	return notes
}

// ratioRange returns the least and the greatest ratio b.y/a.y over the
// points of two lines with the same x values; ok is false if they differ.
func ratioRange(b, a plotLine) (lo, hi float64, ok bool) {
	if len(a.points) == 0 || len(a.points) != len(b.points) {
		return 0, 0, false
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for i, p := range a.points {
		q := b.points[i]
		if q.x != p.x || p.y <= 0 {
			return 0, 0, false
		}
		lo, hi = min(lo, q.y/p.y), max(hi, q.y/p.y)
	}
	return lo, hi, true
}

// outlierRatio is how far above the other lines a line must reach for a
// chart to leave it off the top, as the blog does with exponential backoff.
const outlierRatio = 3

// timeChart draws the mean completion time against the number of clients.
// A line far above the others (exponential backoff with no jitter) is cut
// at the top of the chart, with its values in a note, so that the others
// stay readable.
func timeChart(cfg config, res results) string {
	lines := linesOf(res, func(c cell) float64 { return c.timeMS / 1000 })
	c := lineChart{
		title:    "Completion time against the number of clients",
		subtitle: settings(cfg),
		xLabel:   "clients",
		yLabel:   "time until every client has written (s)",
		x:        clientsAxis(res),
		lines:    lines,
	}
	hi := maxY(lines)
	for _, l := range lines {
		rest := maxY(withoutLine(lines, l.name))
		if rest > 0 && maxY([]plotLine{l}) > outlierRatio*rest {
			hi = rest
			c.notes = append(c.notes, offChartNote(l))
		}
	}
	c.y = niceAxis(hi, 8, seconds)
	return c.render()
}

// withoutLine returns the lines but the named one.
func withoutLine(lines []plotLine, name string) []plotLine {
	var out []plotLine
	for _, l := range lines {
		if l.name != name {
			out = append(out, l)
		}
	}
	return out
}

// offChartNote describes a line cut at the top of the time chart: its first,
// middle and last values.
func offChartNote(l plotLine) string {
	pts := l.points
	var parts []string
	idx := []int{0, len(pts) / 2, len(pts) - 1}
	for k, j := range idx {
		if k > 0 && j == idx[k-1] {
			continue // fewer than three points
		}
		p := pts[j]
		parts = append(parts, fmt.Sprintf("%s s at %s clients", strconv.FormatFloat(p.y, 'f', 1, 64), grouped(p.x)))
	}
	return fmt.Sprintf("%s runs off the top of the chart: %s.", l.name, strings.Join(parts, ", "))
}
