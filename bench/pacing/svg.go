package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// Chart geometry, in SVG user units (pixels). The panels are stacked, on
// one time axis, so that their lengths compare.
const (
	chartW     = 760
	padL, padR = 64, 20 // room for the y labels
	plotW      = chartW - padL - padR
	headerH    = 58 // the title and subtitle
	titleH     = 22 // a panel's strategy and numbers, above its plot
	plotH      = 120
	ticksH     = 28 // the time labels under each plot
	footerH    = 44 // the time axis's title and the legend
	// maxBars is the most bars a panel draws: a long run is drawn with
	// intervals a multiple of -interval wide, keeping the file small.
	maxBars = 200
)

// Colours: the house green for accepted attempts, orange for refused ones.
const (
	colAccepted = "#3a9a4a"
	colRefused  = "#f0a03c"
)

// figure is what the -svg chart shows: one panel per strategy.
type figure struct {
	title, subtitle string
	interval        time.Duration // the width of a bar
	capacity        float64       // attempts the server accepts per interval
	panels          []panel
}

// panel is one run of one strategy.
type panel struct {
	strategy string
	note     string // the run's numbers
	bins     []bin  // its attempts per interval
	elapsed  time.Duration
}

// sharedBy says what the clients of a run share: one Transport, or, with
// -api route53, one SDK client (whose rows may have no Transport).
func sharedBy(c config) string {
	if c.api == "route53" {
		return "ListHostedZones through one shared AWS SDK client"
	}
	return "one shared retry Transport"
}

// figureOf makes the chart of the first round of each strategy.
func figureOf(c config, serverName string, results []result) figure {
	var first []result
	var span time.Duration
	for _, r := range results {
		if r.round == 1 {
			first = append(first, r)
			span = max(span, r.elapsed, lastEvent(r.events))
		}
	}
	width := c.interval * time.Duration(max(1, math.Ceil(float64(span)/float64(c.interval*maxBars))))
	ideal := idealTime(c)
	f := figure{
		title: fmt.Sprintf("%d clients × %d requests against %s at %g requests/s",
			c.clients, c.requests, serverName, c.rate),
		subtitle: fmt.Sprintf("Attempts per %v the server saw in the first run of each strategy (%s); ideal time %v.",
			width, sharedBy(c), ideal.Round(time.Millisecond)),
		interval: width,
		capacity: c.rate * float64(width.Milliseconds()) / 1000,
	}
	for _, r := range first {
		f.panels = append(f.panels, panel{strategy: r.strategy, note: runNote(r), bins: binEvents(r.events, width), elapsed: r.elapsed})
	}
	return f
}

// lastEvent is the time of the last of evs, or zero.
func lastEvent(evs []event) time.Duration {
	var last time.Duration
	for _, e := range evs {
		last = max(last, e.at)
	}
	return last
}

// runNote sums a run up in a line.
func runNote(r result) string {
	s := fmt.Sprintf("%d attempts (%.2f per request), %d refused, %v", r.attempts,
		float64(r.attempts)/float64(max(r.requests, 1)), r.refused, r.elapsed.Round(time.Millisecond))
	if r.failed > 0 {
		s += fmt.Sprintf(", %d failed", r.failed)
	}
	return s
}

// writeSVG writes the chart to path.
func writeSVG(path string, f figure) error {
	return chart.WriteFile(path, f.svg())
}

// svg draws the chart: for each strategy, the attempts the server accepted
// per interval, and those it refused stacked on them, with the server's
// capacity per interval dashed. A bar above the common scale is clipped,
// and its panel says so.
func (f figure) svg() string {
	cellH := titleH + plotH + ticksH
	height := headerH + len(f.panels)*cellH + footerH
	tmax, step := f.timeAxis()
	ymax := f.yMax()

	var d chart.Doc
	d.Begin(chartW, height, 11)
	d.Heading(padL, f.title, f.subtitle)
	for i, p := range f.panels {
		f.drawPanel(&d, p, headerH+i*cellH, ymax, tmax, step)
	}
	y := headerH + len(f.panels)*cellH
	d.Printf(`<text x="%d" y="%d" text-anchor="middle" fill="#333">time since the run's start</text>`+"\n", padL+plotW/2, y+4)
	d.Legend(padL, y+20,
		chart.Item{Fill: colAccepted, Label: "accepted (200)"},
		chart.Item{Fill: colRefused, Label: "refused (429)"},
		chart.Item{Dashed: true, Label: fmt.Sprintf("the server's capacity: %g per %v", f.capacity, f.interval)})
	return d.End()
}

// timeAxis is the end of the time axis, past every run, and the step of
// its labels: a round number, about eight of them.
func (f figure) timeAxis() (tmax, step time.Duration) {
	span := f.interval
	for _, p := range f.panels {
		span = max(span, p.elapsed, time.Duration(len(p.bins))*f.interval)
	}
	step = time.Duration(chart.NiceCeil(span.Seconds()/8) * float64(time.Second))
	step = max(step, time.Millisecond)
	return (span + step - 1) / step * step, step
}

// yMax is the panels' common scale, in attempts per interval: a round
// number above the capacity and above nine in ten of the bars that are not
// empty, whichever panel they are in. The others, a cold start's burst and
// the storm of retries that follows it, are clipped: on their scale the
// bars that matter, those near the capacity, would be too short to read.
func (f figure) yMax() float64 {
	var bars []int
	for _, p := range f.panels {
		for _, b := range p.bins {
			if n := b.accepted + b.refused; n > 0 {
				bars = append(bars, n)
			}
		}
	}
	top := f.capacity
	if len(bars) > 0 {
		sort.Ints(bars)
		top = max(top, float64(bars[len(bars)*9/10]))
	}
	return chart.NiceCeil(top * 1.05)
}

// peak is the first of bins with the most attempts, and their number.
func peak(bins []bin) (k, attempts int) {
	for i, b := range bins {
		if n := b.accepted + b.refused; n > attempts {
			k, attempts = i, n
		}
	}
	return k, attempts
}

// drawPanel draws one strategy's run with its top at y.
func (f figure) drawPanel(b *chart.Doc, p panel, y int, ymax float64, tmax, step time.Duration) {
	x0, y0 := padL, y+titleH
	bottom := float64(y0 + plotH)
	sx := func(t time.Duration) float64 { return float64(x0) + float64(plotW)*float64(t)/float64(tmax) }
	sy := func(v float64) float64 { return bottom - float64(plotH)*min(v, ymax)/ymax }

	fmt.Fprintf(b, `<text x="%d" y="%d"><tspan font-size="12.5" font-weight="bold">%s</tspan><tspan dx="10" fill="#333">%s</tspan></text>`+"\n",
		x0, y0-7, chart.Esc(p.strategy), chart.Esc(p.note))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#bbb"/>`+"\n", x0, y0, plotW, plotH)
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e2e2e2"/>`+"\n", x0+1, sy(ymax/2), x0+plotW-1, sy(ymax/2))

	// Bars, as one path per series: accepted from the axis, refused on top.
	var acc, ref strings.Builder
	bw := max(float64(plotW)*float64(f.interval)/float64(tmax)*0.85, 0.5)
	for k, n := range p.bins {
		x := sx(time.Duration(k) * f.interval)
		ya, yt := sy(float64(n.accepted)), sy(float64(n.accepted+n.refused))
		if n.accepted > 0 {
			fmt.Fprintf(&acc, "M%.1f %.1fh%.1fV%.1fh%.1fz", x, ya, bw, bottom, -bw)
		}
		if yt < ya {
			fmt.Fprintf(&ref, "M%.1f %.1fh%.1fV%.1fh%.1fz", x, yt, bw, ya, -bw)
		}
	}
	fmt.Fprintf(b, `<g class="series" data-strategy="%s">`+"\n", chart.Esc(p.strategy))
	fmt.Fprintf(b, `<path class="accepted" fill="%s" d="%s"/>`+"\n", colAccepted, acc.String())
	fmt.Fprintf(b, `<path class="refused" fill="%s" d="%s"/>`+"\n", colRefused, ref.String())
	b.WriteString("</g>\n")
	if k, m := peak(p.bins); float64(m) > ymax {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" fill="#a00" font-weight="bold">clipped: peak %d at %v</text>`+"\n",
			x0+plotW-6, y0+14, m, time.Duration(k)*f.interval)
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-dasharray="5,3"/>`+"\n", x0, sy(f.capacity), x0+plotW, sy(f.capacity))
	f.axes(b, x0, y0, ymax, tmax, step)
}

// axes labels a plot whose top left corner is (x0, y0): the attempts at
// zero, half and full scale, and the time every step.
func (f figure) axes(b *chart.Doc, x0, y0 int, ymax float64, tmax, step time.Duration) {
	for _, v := range []float64{0, ymax / 2, ymax} {
		y := float64(y0+plotH) - float64(plotH)*v/ymax
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%g</text>`+"\n", x0-5, y+4, v)
	}
	fmt.Fprintf(b, `<text transform="translate(%d %d) rotate(-90)" text-anchor="middle" fill="#333" font-size="10">attempts per %v</text>`+"\n",
		x0-34, y0+plotH/2, f.interval)
	for t := time.Duration(0); t <= tmax; t += step {
		x := float64(x0) + float64(plotW)*float64(t)/float64(tmax)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999"/>`+"\n", x, y0+plotH, x, y0+plotH+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%gs</text>`+"\n", x, y0+plotH+16, math.Round(t.Seconds()*1000)/1000)
	}
}
