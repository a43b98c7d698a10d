package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// Layout of the time-series chart: one panel per strategy, one above the
// other, sharing both axes.
const (
	panelHeight = 96
	panelGap    = 26
)

// seriesView is what the time-series chart shows: a common time range and
// a common height of bins, in writes per bin.
type seriesView struct {
	x       axis // seconds
	y       axis // writes per bin
	binSecs float64
}

// seriesChart draws the time series of calls of every strategy: the number
// of writes reaching the server in each 10ms bin, summed over the runs.
func seriesChart(cfg config, res results) string {
	v := viewOf(res.series)
	n := len(res.series)
	bottom := plotTop + n*panelHeight + (n-1)*panelGap
	notes := seriesNotes(res.series, v)
	height := bottom + 64 + noteLine*len(notes) + 8
	var s svg
	s.begin(chartWidth, height)
	clients, runs := res.series[0].clients, res.series[0].runs
	s.header(fmt.Sprintf("When the calls happen: %d clients", clients),
		fmt.Sprintf("Writes reaching the server per %v, summed over %d runs · latency %v ± %v · base %v, cap %s",
			seriesBin, runs, cfg.latency, cfg.latencySD, cfg.base, capText(cfg.cap)))
	for i, sr := range res.series {
		top := float64(plotTop + i*(panelHeight+panelGap))
		drawPanel(&s, sr, styleOf(sr.strategy, i), v, top, i == n-1)
	}
	mid := float64(plotTop+bottom) / 2
	s.text(26, mid, "middle", 13, fmt.Sprintf(` transform="rotate(-90 26 %.1f)"`, mid),
		fmt.Sprintf("writes per %v (all runs)", seriesBin))
	for i, line := range notes {
		s.text(plotLeft, float64(bottom+64+noteLine*i), "start", 12, "", line)
	}
	return s.end()
}

// viewOf chooses the common axes. The time axis ends after the last write of
// every strategy but one whose last write comes much later than the others'
// (exponential backoff with no jitter), which is cut off. The bin axis is
// logarithmic, from half a write (an empty bin draws nothing, a bin of one
// write shows) to the power of ten above the highest bin: the first writes
// of all the clients, at once, tower over the rest, and on a linear axis
// the later calls of the jittered strategies would be a line along the
// bottom.
func viewOf(ss []series) seriesView {
	binSecs := seriesBin.Seconds()
	ends := make([]float64, len(ss))
	for i, s := range ss {
		ends[i] = float64(lastBin(s.bins)+1) * binSecs
	}
	end := 0.0
	for i := range ss {
		rest := 0.0
		for j, e := range ends {
			if j != i {
				rest = max(rest, e)
			}
		}
		if rest == 0 || ends[i] <= outlierRatio*rest {
			end = max(end, ends[i])
		}
	}
	top := 10.0
	for _, s := range ss {
		for _, b := range s.bins {
			for float64(b) > top {
				top *= 10
			}
		}
	}
	return seriesView{
		x:       niceAxis(end, 10, seconds),
		y:       axis{min: 0.5, max: top, step: 10, log: true, format: grouped},
		binSecs: binSecs,
	}
}

// lastBin returns the index of the last bin with a write, or -1.
func lastBin(bins []int64) int {
	for i := len(bins) - 1; i >= 0; i-- {
		if bins[i] > 0 {
			return i
		}
	}
	return -1
}

// drawPanel draws the series of one strategy as a filled step curve in the
// panel whose top is at top, with the strategy's name and figures to its
// right. Bins above the panel are cut at its top.
func drawPanel(s *svg, sr series, st style, v seriesView, top float64, last bool) {
	left, right, bottom := float64(plotLeft), float64(plotLeft+plotWidth), top+panelHeight
	for _, t := range v.y.ticks() {
		y := v.y.scale(t, bottom, top)
		s.line(left, y, right, y, gridColor, 1)
		s.line(left-5, y, left, y, axisColor, 1)
		s.text(left-9, y+4, "end", 12, "", v.y.format(t))
	}
	for _, t := range v.x.ticks() {
		x := v.x.scale(t, left, right)
		s.line(x, top, x, bottom, gridColor, 1)
		if last {
			s.line(x, bottom, x, bottom+5, axisColor, 1)
			s.text(x, bottom+20, "middle", 12, "", v.x.format(t))
		}
	}
	id := "panel-" + sr.strategy
	s.printf(`<clipPath id="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></clipPath>`+"\n",
		chart.Esc(id), left, top, right-left, bottom-top)
	s.printf(`<path d="%s" fill="%s" fill-opacity="0.85" stroke="%s" stroke-width="0.6" clip-path="url(#%s)"/>`+"\n",
		stepPath(sr.bins, v, left, right, top, bottom), st.color, st.color, chart.Esc(id))
	s.line(left, top, left, bottom, axisColor, 1)
	s.line(left, bottom, right, bottom, axisColor, 1)
	drawPanelLabel(s, sr, st, v, top)
	if last {
		s.text((left+right)/2, bottom+44, "middle", 13, "", "time since the start (s)")
	}
}

// stepPath returns the outline of the bins within the view, as an SVG path
// closed along the bottom of the panel.
func stepPath(bins []int64, v seriesView, left, right, top, bottom float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "M%.1f %.1f", left, bottom)
	prev := math.NaN()
	x := left
	for i, n := range bins {
		t := float64(i) * v.binSecs
		if t >= v.x.max {
			break
		}
		y := v.y.scale(min(float64(n), v.y.max*1.05), bottom, top)
		x = v.x.scale(t, left, right)
		if y != prev {
			fmt.Fprintf(&b, "L%.1f %.1fL%.1f %.1f", x, prevOr(prev, bottom), x, y)
			prev = y
		}
		x = v.x.scale(min(t+v.binSecs, v.x.max), left, right)
	}
	fmt.Fprintf(&b, "L%.1f %.1fL%.1f %.1fZ", x, prevOr(prev, bottom), x, bottom)
	return b.String()
}

// prevOr returns y, or def when y is NaN (no bin drawn yet).
func prevOr(y, def float64) float64 {
	if math.IsNaN(y) {
		return def
	}
	return y
}

// drawPanelLabel writes the strategy's name and figures to the right of its
// panel: its calls in all and its peak, and when its last write arrived.
func drawPanelLabel(s *svg, sr series, st style, v seriesView, top float64) {
	x := float64(legendLeft)
	s.printf(`<text x="%.1f" y="%.1f" font-size="14" font-weight="bold" fill="%s">%s</text>`+"\n",
		x, top+14, st.color, chart.Esc(sr.strategy))
	var total, peak int64
	for _, b := range sr.bins {
		total += b
		peak = max(peak, b)
	}
	end := float64(lastBin(sr.bins)+1) * v.binSecs
	lines := []string{
		fmt.Sprintf("%s calls per run", grouped(float64(total)/float64(sr.runs))),
		fmt.Sprintf("peak %s per bin", grouped(float64(peak))),
		fmt.Sprintf("last call at %s s", seconds(math.Round(end*10)/10)),
	}
	if end > v.x.max {
		lines[2] += " →"
	}
	for i, l := range lines {
		s.text(x, top+34+float64(16*i), "start", 12, "", l)
	}
}

// seriesNotes explains the scale and what the chart cuts off.
func seriesNotes(ss []series, v seriesView) []string {
	notes := []string{
		"The vertical scale is logarithmic: each gridline is ten times the one below. An empty bin draws nothing.",
	}
	for _, s := range ss {
		if end := float64(lastBin(s.bins)+1) * v.binSecs; end > v.x.max {
			notes = append(notes, fmt.Sprintf("%s goes on past the right edge, until %s s.", s.strategy, seconds(math.Round(end*10)/10)))
		}
	}
	return notes
}
