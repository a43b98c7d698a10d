package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRunSmall runs every strategy once against the in-process server, with
// few clients, and checks that each finished every request, that the
// table names each strategy, and that the series and the chart account
// for every attempt.
func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	c := config{server: "fake", clients: 10, requests: 2, rate: 400, rounds: 1, limit: 20 * time.Second,
		interval: 10 * time.Millisecond, series: filepath.Join(dir, "series.csv"), svg: filepath.Join(dir, "pacing.svg")}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(c, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, s := range strategies {
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, s.name+" ") {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("no row for %s in:\n%s", s.name, out.String())
		}
		// The "failed" column is the third number on the row.
		if f := strings.Fields(line); len(f) < 4 || f[3] != "0" {
			t.Errorf("%s: requests failed: %q", s.name, line)
		}
	}
	checkSeriesFile(t, c.series)
	svg, err := os.ReadFile(c.svg)
	if err != nil {
		t.Fatal(err)
	}
	if series, err := svgSeries(string(svg)); err != nil {
		t.Error(err)
	} else if len(series) != len(strategies) {
		t.Errorf("the chart has series %q; want one per strategy", series)
	}
}

// checkSeriesFile checks that the -series file parses and has every
// strategy's 20 requests accepted, once each.
func checkSeriesFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	accepted := map[string]int{}
	for _, row := range rows[1:] {
		n, err := strconv.Atoi(row[3])
		if err != nil {
			t.Fatalf("row %q: %v", row, err)
		}
		accepted[row[0]] += n
	}
	for _, s := range strategies {
		if accepted[s.name] != 20 {
			t.Errorf("%s: %d attempts accepted in the series; want 20", s.name, accepted[s.name])
		}
	}
}

func TestValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []config{
		{server: "apache", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second},
		{server: "fake", clients: 0, requests: 1, rate: 1, rounds: 1, limit: time.Second},
		{server: "fake", clients: 1, requests: 1, rate: -1, rounds: 1, limit: time.Second, interval: time.Second},
		{server: "nginx", clients: 1, requests: 1, rate: 0, rounds: 1, limit: time.Second, interval: time.Second},
		{server: "nginx", clients: 1, requests: 1, rate: 5, rounds: 1, limit: time.Second, interval: time.Second, shed: 0.1},
		{server: "fake", clients: 1, requests: 1, rate: 5, rounds: 1, limit: time.Second, interval: time.Second, shed: 0.95},
		{server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: 0},
		{server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: 0},
		{server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Millisecond},
		{server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: 15500 * time.Microsecond},
		{server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Minute},
		{server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second, svg: "/no/such/dir/pacing.svg"},
		{server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second, series: filepath.Join(file, "series.csv")},
	} {
		if err := c.validate(); err == nil {
			t.Errorf("validate(%+v) = nil; want an error", c)
		}
	}
}
