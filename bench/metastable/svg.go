package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// Chart geometry, in SVG user units.
const (
	plotW, plotH = 820, 190
	marginL      = 60
	marginT      = 64
	plotGap      = 56
	legendRows   = 2
)

var colors = []string{"#222222", "#c4553a", "#d19a2a", "#8a6bbf", "#3f8fbf", "#2f9a4a", "#7ac27a", "#1d5f33"}

// writeSVG draws one trigger's runs: attempts the server saw per second
// above, the share of arrivals that succeeded below, one line per
// strategy, the trigger shaded.
func writeSVG(path string, cfg Config, runs []Run) error {
	return chart.WriteFile(path, svg(cfg, runs))
}

func svg(cfg Config, runs []Run) string {
	width := marginL + plotW + 30
	height := marginT + 2*plotH + plotGap + 40 + 18*legendRows
	var d chart.Doc
	d.Begin(width, height, 11)
	d.Heading(marginL, fmt.Sprintf("Open-loop overload: %s", cfg.Trigger), describe(cfg))

	perSecond := float64(time.Second / cfg.Interval)
	tmax := cfg.span() + cfg.Deadline
	var peak float64
	series := make([][]float64, len(runs))
	shares := make([][]float64, len(runs))
	n := int(tmax / cfg.Interval)
	for i, r := range runs {
		for k := 0; k < n && k < len(r.Attempts); k++ {
			v := float64(r.Attempts[k]) * perSecond
			series[i] = append(series[i], v)
			peak = max(peak, v)
			share := 1.0
			if r.Arrivals[k] > 0 {
				share = float64(r.Goodput[k]) / float64(r.Arrivals[k])
			}
			if time.Duration(k)*cfg.Interval >= cfg.span() {
				share = -1 // no arrivals: not drawn
			}
			shares[i] = append(shares[i], share)
		}
	}
	ymax := chart.NiceCeil(min(peak, 8*cfg.Capacity()))
	top := marginT
	plot(&d, cfg, top, tmax, ymax, "attempts the server saw, per second (clipped at 8× capacity)", series, func(v float64) string { return fmt.Sprintf("%g", v) })
	capY := float64(top+plotH) - float64(plotH)*min(cfg.Capacity(), ymax)/ymax
	d.Printf(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-dasharray="5,3"/>`+"\n", marginL, capY, marginL+plotW, capY)
	plot(&d, cfg, top+plotH+plotGap, tmax, 1, "share of the interval's arrivals that succeeded within the deadline", shares, func(v float64) string { return fmt.Sprintf("%g%%", 100*v) })

	var items []chart.Item
	for i, r := range runs {
		items = append(items, chart.Item{Fill: colors[i%len(colors)], Label: r.Strategy})
	}
	y := height - 18*legendRows - 6
	per := (len(items) + legendRows - 1) / legendRows
	for row := 0; row < legendRows && row*per < len(items); row++ {
		d.Legend(marginL, y+18*row, items[row*per:min((row+1)*per, len(items))]...)
	}
	return d.End()
}

// plot draws one panel at y0: its frame, the trigger shaded, the axes,
// and a polyline per series (a negative value ends a line).
func plot(d *chart.Doc, cfg Config, y0 int, tmax time.Duration, ymax float64, title string, series [][]float64, label func(float64) string) {
	sx := func(t time.Duration) float64 { return float64(marginL) + float64(plotW)*float64(t)/float64(tmax) }
	sy := func(v float64) float64 { return float64(y0+plotH) - float64(plotH)*min(v, ymax)/ymax }
	d.Printf(`<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", marginL, y0-8, chart.Esc(title))
	d.Printf(`<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#bbb"/>`+"\n", marginL, y0, plotW, plotH)
	x0, x1 := sx(cfg.Warmup), sx(cfg.Warmup+cfg.Length)
	d.Printf(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f3d9d9"/>`+"\n", x0, y0, x1-x0, plotH)
	for _, v := range []float64{0, ymax / 2, ymax} {
		d.Printf(`<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", marginL-4, sy(v)+4, label(v))
	}
	for t := time.Duration(0); t <= tmax; t += 5 * time.Second {
		d.Printf(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%ds</text>`+"\n", sx(t), y0+plotH+14, int(t.Seconds()))
	}
	for i, vs := range series {
		var pts []string
		flush := func() {
			if len(pts) > 1 {
				d.Printf(`<polyline fill="none" stroke="%s" stroke-width="1.3" points="%s"/>`+"\n", colors[i%len(colors)], strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for k, v := range vs {
			if v < 0 {
				flush()
				continue
			}
			t := time.Duration(k)*cfg.Interval + cfg.Interval/2
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(t), sy(v)))
		}
		flush()
	}
}
