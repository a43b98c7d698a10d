package main

import (
	"encoding/xml"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wellFormed reports whether doc is well-formed XML with an svg root.
func wellFormed(doc string) error {
	d := xml.NewDecoder(strings.NewReader(doc))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		return errors.New("root element " + root + ", not svg")
	}
	return nil
}

func TestCharts(t *testing.T) {
	x := blogExperiment(4, 2, 10, 40)
	x.seriesClients = 40
	res, err := x.run()
	require.NoError(t, err)
	cfg := config{runs: 4, base: 5 * ms, cap: 2000 * ms, latency: 10 * ms, latencySD: 2 * ms}
	dir := filepath.Join(t.TempDir(), "charts")
	paths, err := writeCharts(dir, cfg, res)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, callsFile), filepath.Join(dir, timeFile), filepath.Join(dir, seriesFile)}, paths)
	for _, p := range paths {
		doc := readFile(t, p)
		require.NoError(t, wellFormed(doc), p)
		for _, name := range strategyNames(res) {
			assert.Contains(t, doc, ">"+name+"<", "%s names %s", p, name)
			assert.Contains(t, doc, styles[name].color, "%s draws %s in its colour", p, name)
		}
	}
	assert.Contains(t, readFile(t, paths[1]), "Exponential runs off the top of the chart", "time chart")
	assert.Contains(t, readFile(t, paths[2]), "When the calls happen: 40 clients", "series chart")
}

func TestStylesAreDistinct(t *testing.T) {
	colors, markers := map[string]string{}, map[string]string{}
	for name, s := range styles {
		assert.NotContains(t, colors, s.color, "%s has the colour of %s", name, colors[s.color])
		assert.NotContains(t, markers, s.marker, "%s has the marker of %s", name, markers[s.marker])
		colors[s.color], markers[s.marker] = name, name
	}
	assert.Len(t, styles, 5)
}

func TestNiceAxis(t *testing.T) {
	for _, tc := range []struct {
		hi        float64
		n         int
		max, step float64
	}{
		{8009, 8, 10000, 2000},
		{9.36, 8, 10, 2},
		{190, 10, 200, 20},
		{8.9, 10, 9, 1},
		{0, 5, 1, 1},
	} {
		a := niceAxis(tc.hi, tc.n, grouped)
		if a.max != tc.max || a.step != tc.step {
			t.Errorf("niceAxis(%v, %d) = max %v, step %v; want %v, %v", tc.hi, tc.n, a.max, a.step, tc.max, tc.step)
		}
	}
	assert.Equal(t, []float64{0, 0.5, 1}, axis{min: 0, max: 1, step: 0.5}.ticks())
	assert.Equal(t, []float64{1, 10, 100, 1000}, axis{min: 0.5, max: 1000, step: 10, log: true}.ticks())
}

func TestGrouped(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -12345: "-12,345"} {
		assert.Equal(t, want, grouped(v), "grouped(%v)", v)
	}
}
