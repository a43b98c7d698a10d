package main

import (
	"fmt"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// Chart geometry, in SVG user units (pixels).
const (
	panelW, panelH = 300, 150 // one strategy's plot area
	padL, padR     = 46, 14   // around each plot: room for the y labels
	padT, padB     = 34, 26   // room for the title and the x labels
	columns        = 3
	headerH        = 56
	legendH        = 26
)

// writeSVG draws the requests the server saw per interval over time, one
// panel per strategy, on one scale: the outage shaded, the server's
// capacity per interval dashed, the requests it answered 200 in green. A
// panel whose peak is off the scale is clipped and says so.
func writeSVG(path string, cfg Config, rs []Result) error {
	return chart.WriteFile(path, svg(cfg, rs))
}

func svg(cfg Config, rs []Result) string {
	capacity := cfg.Rate * cfg.Interval.Seconds()
	ymax := yScale(rs, capacity)
	tmax := cfg.Deadline + cfg.Interval
	for _, r := range rs {
		tmax = max(tmax, time.Duration(len(r.Series))*cfg.Interval)
	}
	rows := (len(rs) + columns - 1) / columns
	cellW, cellH := padL+panelW+padR, padT+panelH+padB
	width, height := columns*cellW, headerH+rows*cellH+legendH

	var d chart.Doc
	d.Begin(width, height, 11)
	d.Heading(padL,
		fmt.Sprintf("Requests per %v seen by a server of %g req/s: %d clients after a %v outage", cfg.Interval, cfg.Rate, cfg.Clients, cfg.Outage),
		fmt.Sprintf("over capacity: %s; deadline %v; retry's curves: base %v, cap %v. One scale for every panel.", cfg.Reject, cfg.Deadline, cfg.Base, cfg.Cap))
	for i, r := range rs {
		x0 := (i%columns)*cellW + padL
		y0 := headerH + (i/columns)*cellH + padT
		panel(&d, cfg, r, x0, y0, ymax, tmax, capacity)
	}
	d.Legend(padL, height-legendH+6,
		chart.Item{Fill: "#4a78b5", Label: "requests seen"},
		chart.Item{Fill: "#3a9a4a", Label: "answered 200"},
		chart.Item{Fill: "#f3d9d9", Label: "outage: everything fails"},
		chart.Item{Dashed: true, Label: fmt.Sprintf("capacity: %g per %v", cfg.Rate*cfg.Interval.Seconds(), cfg.Interval)})
	return d.End()
}

// yScale is the panels' common scale: a round number above every peak but
// those more than twice the next highest (no backoff, typically), which
// would flatten all the others.
func yScale(rs []Result, capacity float64) float64 {
	var peaks []float64
	for _, r := range rs {
		peaks = append(peaks, float64(r.Peak()))
	}
	top := capacity
	for _, p := range peaks {
		others := capacity
		for _, q := range peaks {
			if q < p {
				others = max(others, q)
			}
		}
		if p <= 2*others {
			top = max(top, p)
		}
	}
	return chart.NiceCeil(top * 1.05)
}

func panel(b *chart.Doc, cfg Config, r Result, x0, y0 int, ymax float64, tmax time.Duration, capacity float64) {
	sx := func(t time.Duration) float64 { return float64(x0) + float64(panelW)*float64(t)/float64(tmax) }
	sy := func(v float64) float64 { return float64(y0+panelH) - float64(panelH)*min(v, ymax)/ymax }

	// Title: the strategy and its numbers.
	status := "all finished"
	if n := r.Unfinished(); n > 0 {
		status = fmt.Sprintf("%d unfinished", n)
	}
	p99 := "-"
	if d, ok := r.Quantile(0.99); ok {
		p99 = fmtDur(d)
	}
	perSuccess := "-"
	if r.Successes > 0 {
		perSuccess = fmt.Sprintf("%.1f", r.PerSuccess())
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12.5" font-weight="bold">%s</text>`+"\n", x0, y0-18, r.Strategy)
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#333">%d attempts, %s per success, p99 %s, %s</text>`+"\n", x0, y0-5, r.Attempts, perSuccess, p99, status)

	// Frame, outage and capacity.
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#bbb"/>`+"\n", x0, y0, panelW, panelH)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#f3d9d9"/>`+"\n", x0, y0, sx(cfg.Outage)-float64(x0), panelH)

	// Bars: requests seen, and those answered 200 over them.
	bw := float64(panelW) * float64(cfg.Interval) / float64(tmax)
	for k, v := range r.Series {
		if v == 0 {
			continue
		}
		x := sx(time.Duration(k) * cfg.Interval)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4a78b5"/>`+"\n", x, sy(float64(v)), bw*0.92, sy(0)-sy(float64(v)))
		if ok := r.OK[k]; ok > 0 {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3a9a4a"/>`+"\n", x, sy(float64(ok)), bw*0.92, sy(0)-sy(float64(ok)))
		}
	}
	if peak := float64(r.Peak()); peak > ymax {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" fill="#a00" font-weight="bold">clipped: peak %d</text>`+"\n", x0+panelW-4, y0+13, r.Peak())
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-dasharray="5,3"/>`+"\n", x0, sy(capacity), x0+panelW, sy(capacity))

	// Axes: y at 0, half and full scale; x every second.
	for _, v := range []float64{0, ymax / 2, ymax} {
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%g</text>`+"\n", x0-4, sy(v)+4, v)
	}
	for t := time.Duration(0); t <= tmax; t += time.Second {
		x := sx(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#bbb"/>`+"\n", x, y0+panelH, x, y0+panelH+3)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%ds</text>`+"\n", x, y0+panelH+15, int(t.Seconds()))
	}
}
