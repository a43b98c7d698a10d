package main

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
	"github.com/backoff-jitter/retry/bench/internal/nginx"
)

// width is the interval of the series and the chart.
const width = 100 * time.Millisecond

// bins counts a run's attempts per interval: accepted and refused.
func bins(evs []nginx.Event) (accepted, refused []int) {
	for _, e := range evs {
		k := int(max(e.At, 0) / width)
		for len(accepted) <= k {
			accepted, refused = append(accepted, 0), append(refused, 0)
		}
		switch e.Status {
		case http.StatusOK:
			accepted[k]++
		case http.StatusTooManyRequests:
			refused[k]++
		}
	}
	return accepted, refused
}

// writeFiles writes the series and the chart the flags ask for.
func writeFiles(c config, results []result) error {
	if c.series != "" {
		rows := [][]string{{"k", "strategy", "round", "interval_ms", "accepted", "refused"}}
		for _, r := range results {
			acc, ref := bins(r.events)
			for i := range acc {
				rows = append(rows, []string{strconv.Itoa(r.k), r.strategy, strconv.Itoa(r.round),
					strconv.FormatInt((time.Duration(i) * width).Milliseconds(), 10), strconv.Itoa(acc[i]), strconv.Itoa(ref[i])})
			}
		}
		if err := chart.WriteCSV(c.series, rows); err != nil {
			return err
		}
	}
	if c.svg == "" {
		return nil
	}
	k := c.ks[0]
	for _, x := range c.ks {
		k = max(k, x)
	}
	var panels []result
	for _, r := range results {
		if r.k == k && r.round == 1 {
			panels = append(panels, r)
		}
	}
	return chart.WriteFile(c.svg, svg(c, k, panels))
}

// Geometry of the chart, in pixels.
const (
	chartW, padL, padR = 760, 64, 20
	plotW              = chartW - padL - padR
	headerH, titleH    = 58, 22
	plotH, ticksH      = 120, 28
	footerH            = 44
)

// svg draws, for each panel (one run), the attempts nginx saw per 100ms,
// accepted and refused stacked, on one scale and one time axis, with the
// limit dashed.
func svg(c config, k int, panels []result) string {
	capacity := c.rate * width.Seconds()
	var span time.Duration
	ymax := capacity
	for _, p := range panels {
		span = max(span, p.elapsed)
		acc, ref := bins(p.events)
		for i := range acc {
			ymax = max(ymax, float64(acc[i]+ref[i]))
		}
	}
	ymax = chart.NiceCeil(ymax * 1.05)
	step := time.Duration(chart.NiceCeil(span.Seconds()/8) * float64(time.Second))
	tmax := (span + step - 1) / step * step
	cellH := titleH + plotH + ticksH
	height := headerH + len(panels)*cellH + footerH
	var d chart.Doc
	d.Begin(chartW, height, 11)
	d.Heading(padL,
		fmt.Sprintf("%d clients × %d requests from %d processes against nginx at %g requests/s", c.clients, c.requests, k, c.rate),
		fmt.Sprintf("Attempts per %v nginx saw: each process with a Pacer of its own (local), or one Pacer shared through Redis (shared).", width))
	for i, p := range panels {
		x0, y0 := padL, headerH+i*cellH+titleH
		bottom := float64(y0 + plotH)
		sx := func(t time.Duration) float64 { return float64(x0) + float64(plotW)*float64(t)/float64(tmax) }
		sy := func(v float64) float64 { return bottom - float64(plotH)*min(v, ymax)/ymax }
		note := fmt.Sprintf("%.2f attempts per request, %d refused, %v", float64(p.attempts())/float64(max(p.requests, 1)), p.refused(), p.elapsed.Round(time.Millisecond))
		d.Printf(`<text x="%d" y="%d"><tspan font-size="12.5" font-weight="bold">%s</tspan><tspan dx="10" fill="#333">%s</tspan></text>`+"\n", x0, y0-7, chart.Esc(p.strategy), chart.Esc(note))
		d.Printf(`<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#bbb"/>`+"\n", x0, y0, plotW, plotH)
		acc, ref := bins(p.events)
		bw := max(float64(plotW)*float64(width)/float64(tmax)*0.85, 0.5)
		for j := range acc {
			x := sx(time.Duration(j) * width)
			if acc[j] > 0 {
				d.Printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3a9a4a"/>`+"\n", x, sy(float64(acc[j])), bw, bottom-sy(float64(acc[j])))
			}
			if ref[j] > 0 {
				top := sy(float64(acc[j] + ref[j]))
				d.Printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f0a03c"/>`+"\n", x, top, bw, sy(float64(acc[j]))-top)
			}
		}
		d.Printf(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-dasharray="5,3"/>`+"\n", x0, sy(capacity), x0+plotW, sy(capacity))
		for _, v := range []float64{0, ymax / 2, ymax} {
			d.Printf(`<text x="%d" y="%.1f" text-anchor="end" fill="#555">%g</text>`+"\n", x0-5, sy(v)+4, v)
		}
		for t := time.Duration(0); t <= tmax; t += step {
			d.Printf(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%gs</text>`+"\n", sx(t), y0+plotH+16, t.Seconds())
		}
	}
	y := headerH + len(panels)*cellH
	d.Legend(padL, y+14,
		chart.Item{Fill: "#3a9a4a", Label: "accepted (200)"},
		chart.Item{Fill: "#f0a03c", Label: "refused (429)"},
		chart.Item{Dashed: true, Label: fmt.Sprintf("nginx's limit: %g per %v", capacity, width)})
	return d.End()
}
