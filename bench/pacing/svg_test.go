package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// ms is n milliseconds.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestBinEvents bins a hand-made run: edges, an empty interval, an event
// timed just before the start, and a status counted in neither column.
func TestBinEvents(t *testing.T) {
	evs := []event{
		{ms(-1), 429},  // a clock a millisecond apart: the first interval
		{ms(0), 200},   // the first interval starts at 0
		{ms(99), 429},  // ... and ends before 100
		{ms(100), 200}, // the second starts at 100
		{ms(150), 429},
		{ms(160), 429},
		{ms(199), 499}, // neither accepted nor refused
		{ms(310), 200}, // after an empty third interval
	}
	want := []bin{{1, 2}, {1, 2}, {0, 0}, {1, 0}}
	if got := binEvents(evs, ms(100)); !reflect.DeepEqual(got, want) {
		t.Errorf("binEvents = %v; want %v", got, want)
	}
	if got := binEvents(nil, ms(100)); got != nil {
		t.Errorf("binEvents(nil) = %v; want nil", got)
	}
	if got := binEvents(evs, 0); got != nil {
		t.Errorf("binEvents(width 0) = %v; want nil", got)
	}
	if c := countEvents(evs); c != (counts{attempts: 8, refused: 4}) {
		t.Errorf("countEvents = %+v; want 8 attempts, 4 refused", c)
	}
}

// TestSeriesRows checks the -series rows of two runs.
func TestSeriesRows(t *testing.T) {
	rs := []result{
		{strategy: "A", round: 1, events: []event{{ms(10), 200}, {ms(20), 429}, {ms(260), 200}}},
		{strategy: "B", round: 2, events: []event{{ms(5), 429}}},
		{strategy: "C", round: 1}, // no attempts: no rows
	}
	want := [][]string{
		{"strategy", "round", "interval_ms", "accepted", "refused"},
		{"A", "1", "0", "1", "1"},
		{"A", "1", "100", "0", "0"},
		{"A", "1", "200", "1", "0"},
		{"B", "2", "0", "0", "1"},
	}
	if got := seriesRows(rs, ms(100)); !reflect.DeepEqual(got, want) {
		t.Errorf("seriesRows = %q; want %q", got, want)
	}
}

// fakeResults are one round of every strategy, with hand-made attempts
// over span: a burst at the start, then some each interval.
func fakeResults(span, every time.Duration) []result {
	var rs []result
	for i, s := range strategies {
		r := result{strategy: s.name, round: 1, requests: 300, elapsed: span}
		for k := 0; k < 200; k++ {
			r.events = append(r.events, event{0, 429})
		}
		for at := time.Duration(0); at < span; at += every {
			status := 200
			if int(at/every)%(i+2) == 0 {
				status = 429
			}
			r.events = append(r.events, event{at, status})
		}
		n := countEvents(r.events)
		r.attempts, r.refused = n.attempts, n.refused
		rs = append(rs, r, result{strategy: s.name, round: 2, requests: 300, elapsed: span})
	}
	return rs
}

// TestSVG checks that the chart is well-formed XML, small, and has one
// series per strategy, each with its accepted and refused paths.
func TestSVG(t *testing.T) {
	for _, tt := range []struct {
		name            string
		span, every     time.Duration
		interval        time.Duration
		wantBarInterval string
	}{
		{"short", 3 * time.Second, ms(7), ms(100), "100ms"},
		{"long", 60 * time.Second, ms(3), ms(10), "300ms"}, // 6000 intervals: drawn 30 to a bar
		{"none", 0, time.Second, ms(100), "100ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := config{server: "fake", clients: 100, requests: 3, rate: 100, interval: tt.interval}
			svg := figureOf(c, "a <test> server", fakeResults(tt.span, tt.every)).svg()
			if limit := len(strategies) * 15 << 10; len(svg) > limit {
				t.Errorf("the SVG is %d bytes; want at most 15 KB per strategy, %d", len(svg), limit)
			}
			if !strings.Contains(svg, "attempts per "+tt.wantBarInterval) {
				t.Errorf("the SVG does not say %q", "attempts per "+tt.wantBarInterval)
			}
			series, err := svgSeries(svg)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, s := range strategies {
				want = append(want, s.name)
			}
			if !reflect.DeepEqual(series, want) {
				t.Errorf("series %q; want %q", series, want)
			}
		})
	}
}

// svgSeries walks an SVG document with an XML decoder and returns the
// strategies of its series (<g class="series">), checking that each holds
// an accepted and a refused path.
func svgSeries(svg string) ([]string, error) {
	d := xml.NewDecoder(strings.NewReader(svg))
	var series []string
	var paths []string // classes of the paths in the current series
	depth, inSeries := 0, -1
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("the SVG is not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case tok.Name.Local == "g" && attr(tok, "class") == "series":
				series = append(series, attr(tok, "data-strategy"))
				inSeries, paths = depth, nil
			case tok.Name.Local == "path" && inSeries >= 0:
				paths = append(paths, attr(tok, "class"))
			}
		case xml.EndElement:
			if depth == inSeries {
				if !reflect.DeepEqual(paths, []string{"accepted", "refused"}) {
					return nil, fmt.Errorf("series %s has paths %q", series[len(series)-1], paths)
				}
				inSeries = -1
			}
			depth--
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("the SVG ends at depth %d", depth)
	}
	return series, nil
}

// attr is the value of the attribute name of e, or "".
func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// TestYMax checks the common scale: above the capacity and nine in ten of
// the bars, whatever the outliers.
func TestYMax(t *testing.T) {
	bins := func(totals ...int) []bin {
		var bs []bin
		for _, n := range totals {
			bs = append(bs, bin{accepted: min(n, 8), refused: n - min(n, 8)})
		}
		return bs
	}
	// repeat is n times v.
	repeat := func(n, v int) []int {
		vs := make([]int, n)
		for i := range vs {
			vs[i] = v
		}
		return vs
	}
	steady := bins(repeat(30, 9)...) // three seconds at the capacity
	for _, tt := range []struct {
		name   string
		panels [][]bin
		want   float64
	}{
		{"empty", nil, 20},
		{"steady", [][]bin{steady, steady}, 20},
		{"a storm", [][]bin{bins(append([]int{500, 160, 100, 75, 60, 45, 40, 30, 30, 20, 0}, repeat(20, 10)...)...), steady, steady}, 50},
		{"every panel's burst", [][]bin{bins(append([]int{500}, repeat(29, 30)...)...), bins(append([]int{500}, repeat(29, 9)...)...), bins(append([]int{500}, repeat(29, 9)...)...)}, 50},
		{"all high", [][]bin{bins(300, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100)}, 200},
	} {
		f := figure{capacity: 10}
		for _, bs := range tt.panels {
			f.panels = append(f.panels, panel{bins: bs})
		}
		if got := f.yMax(); got != tt.want {
			t.Errorf("%s: yMax = %v; want %v", tt.name, got, tt.want)
		}
	}
}
