package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runMain runs the program with args and returns its exit status and output.
func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// blogExperiment returns the blog's experiment at the given client levels.
func blogExperiment(runs, workers int, clients ...int) experiment {
	return experiment{
		strategies: strategies(5*ms, 2000*ms),
		clients:    clients,
		runs:       runs,
		seed:       1,
		latency:    10 * ms,
		latencySD:  2 * ms,
		limit:      24 * time.Hour,
		workers:    workers,
	}
}

// TestBlogFindings checks the findings of the AWS Architecture Blog's
// "Exponential Backoff And Jitter" at 100 clients. It takes 100 runs: with
// 20, the mean completion times of Decorrelated and FullJitter (5% apart)
// are within each other's noise for some seeds.
func TestBlogFindings(t *testing.T) {
	res, err := blogExperiment(100, 4, 100).run()
	require.NoError(t, err)
	c := map[string]cell{}
	for _, x := range res.cells {
		c[x.strategy] = x
	}
	none, exp, full, equal, dec := c[nameNone], c[nameExponential], c[nameFullJitter], c[nameEqualJitter], c[nameDecorrelated]

	// "Full jitter cut the number of calls by more than half" compared to
	// exponential backoff without jitter, which itself helps "a little".
	assert.Less(t, full.calls, exp.calls/2, "calls: FullJitter vs Exponential")
	assert.Less(t, exp.calls, none.calls, "calls: Exponential vs None")
	// "The no-jitter exponential backoff approach is the clear loser":
	// more work and far more time than any jittered strategy.
	for _, j := range []cell{full, equal, dec} {
		assert.Greater(t, exp.calls, j.calls, "calls: Exponential vs %s", j.strategy)
		assert.Greater(t, exp.timeMS, 5*j.timeMS, "time: Exponential vs %s", j.strategy)
	}
	// "Equal Jitter is the loser. It does slightly more work than Full
	// Jitter, and takes much longer."
	assert.Greater(t, equal.calls, full.calls, "calls: EqualJitter vs FullJitter")
	assert.Less(t, equal.calls, 1.1*full.calls, "calls: EqualJitter vs FullJitter, 'slightly'")
	assert.Greater(t, equal.timeMS, 1.15*full.timeMS, "time: EqualJitter vs FullJitter")
	// "The Full Jitter approach uses less work, but slightly more time"
	// than Decorrelated Jitter.
	assert.Greater(t, dec.calls, full.calls, "calls: Decorrelated vs FullJitter")
	assert.Less(t, dec.timeMS, full.timeMS, "time: Decorrelated vs FullJitter")
}

func TestSameSeedSameOutput(t *testing.T) {
	dir := t.TempDir()
	args := func(name string) []string {
		return []string{"-runs", "5", "-clients", "5,20", "-seed", "7", "-csv", filepath.Join(dir, name), "-svg", filepath.Join(dir, name+".svg"), "-series", "20"}
	}
	code, out1, errOut := runMain(args("a.csv")...)
	require.Equal(t, 0, code, errOut)
	code, out2, errOut := runMain(append(args("b.csv"), "-workers", "1")...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, table(out1), table(out2), "stdout")
	a, b := readFile(t, filepath.Join(dir, "a.csv")), readFile(t, filepath.Join(dir, "b.csv"))
	assert.Equal(t, a, b, "CSV")
	for _, f := range []string{callsFile, timeFile, seriesFile} {
		assert.Equal(t, readFile(t, filepath.Join(dir, "a.csv.svg", f)), readFile(t, filepath.Join(dir, "b.csv.svg", f)), f)
	}

	code, _, errOut = runMain("-runs", "5", "-clients", "5,20", "-seed", "8", "-csv", filepath.Join(dir, "c.csv"))
	require.Equal(t, 0, code, errOut)
	assert.NotEqual(t, a, readFile(t, filepath.Join(dir, "c.csv")), "CSV of another seed")
}

// table returns the output of the program up to its list of files written.
func table(out string) string {
	i := strings.Index(out, "Wrote ")
	if i < 0 {
		return out
	}
	return out[:i]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestWorkersDoNotChangeResults(t *testing.T) {
	var want results
	for i, workers := range []int{1, 2, 3, 8} {
		x := blogExperiment(6, workers, 10, 30)
		x.seriesClients = 20 // not a level: simulated for the series only
		got, err := x.run()
		require.NoError(t, err)
		if i == 0 {
			want = got
			require.Len(t, want.cells, 10)
			require.Len(t, want.series, 5)
			continue
		}
		assert.Equal(t, want, got, "%d workers", workers)
	}
}

func TestCSVFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "results.csv")
	code, _, errOut := runMain("-runs", "3", "-clients", "30,10", "-csv", path)
	require.Equal(t, 0, code, errOut)
	data := readFile(t, path)
	rows, err := csv.NewReader(strings.NewReader(data)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+2*5)
	assert.Equal(t, []string{"clients", "time", "calls", "algorithm"}, rows[0])
	names := []string{"None", "Exponential", "FullJitter", "EqualJitter", "Decorrelated"}
	for i, row := range rows[1:] {
		wantClients := []string{"10", "30"}[i/5]
		assert.Equal(t, wantClients, row[0], "row %d: clients", i+1)
		assert.Equal(t, names[i%5], row[3], "row %d: algorithm", i+1)
		tm, err := strconv.ParseFloat(row[1], 64)
		assert.NoError(t, err, "row %d: time", i+1)
		assert.Greater(t, tm, 40.0, "row %d: time in ms, at least one round trip of each kind", i+1)
		calls, err := strconv.ParseFloat(row[2], 64)
		assert.NoError(t, err, "row %d: calls", i+1)
		n, _ := strconv.ParseFloat(row[0], 64)
		assert.GreaterOrEqual(t, calls, n, "row %d: at least one call a client", i+1)
	}
	assert.True(t, strings.HasSuffix(data, "\n"), "CSV ends with a newline")
}

func TestTableOutput(t *testing.T) {
	code, out, errOut := runMain("-runs", "2", "-clients", "10")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	for _, want := range []string{"calls/FullJitter", "time/FullJitter", "base 5ms, cap 2s", "|Normal(10ms, 2ms)|"} {
		assert.Contains(t, out, want)
	}
	for _, name := range []string{"None", "Exponential", "FullJitter", "EqualJitter", "Decorrelated"} {
		assert.Regexp(t, `(?m)^\s+10\s+`+name+`\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$`, out)
	}
	assert.Regexp(t, `(?m)^\s+10\s+FullJitter\s+[0-9.]+\s+[0-9.]+\s+1\.00\s+1\.00$`, out)
	for line := range strings.Lines(out) {
		assert.Equal(t, strings.TrimRight(line, " \n"), strings.TrimSuffix(line, "\n"), "trailing spaces")
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-runs", "0"}, "-runs 0 is not within 1 to 10000"},
		{[]string{"-clients", "10,x"}, `"x" is not a whole number`},
		{[]string{"-clients", "0"}, "0 is not within 1 to 1000"},
		{[]string{"-clients", "10,10"}, "10 is listed twice"},
		{[]string{"-clients", ""}, `"" is not a whole number`},
		{[]string{"-base", "-1ms"}, "-base -1ms is not within 0 to 1h0m0s"},
		{[]string{"-base", "0"}, "retry: Decorrelated.Base 0s is not positive"},
		{[]string{"-cap", "1ms"}, "retry: Decorrelated.Cap 1ms is less than Base 5ms"},
		{[]string{"-cap", "2h"}, "-cap 2h0m0s is not within 0 to 1h0m0s"},
		{[]string{"-latency", "-1ms"}, "-latency -1ms is not within 0 to 1h0m0s"},
		{[]string{"-latency-sd", "-1ms"}, "-latency-sd -1ms is not within 0 to 1h0m0s"},
		{[]string{"-max-time", "0"}, "-max-time 0s is not within"},
		{[]string{"-workers", "0"}, "-workers 0 is not within 1 to 1024"},
		{[]string{"-series", "50"}, "-series needs -svg"},
		{[]string{"-svg", "x", "-series", "0"}, "-series 0 is not within 1 to 1000"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runMain(tc.args...)
			assert.Equal(t, 2, code, "exit status")
			assert.Empty(t, out, "stdout")
			assert.Contains(t, errOut, tc.want)
		})
	}
}

func TestHelp(t *testing.T) {
	code, out, errOut := runMain("-h")
	assert.Equal(t, 0, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "Usage: simulate")
}

func TestTimeLimitReported(t *testing.T) {
	code, _, errOut := runMain("-runs", "2", "-clients", "100", "-cap", "0")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "simulate: Exponential, 100 clients, run 1: the simulated clock passed the time limit of 24h0m0s")
	assert.Contains(t, errOut, "A -cap of 0 means no cap")
}

func TestParseClients(t *testing.T) {
	got, err := parseClients(" 30, 10,20 ")
	require.NoError(t, err)
	assert.Equal(t, []int{10, 20, 30}, got)
	assert.Equal(t, 19, len(defaultClients()))
	assert.True(t, slices.IsSorted(defaultClients()))
	assert.Equal(t, []int{10, 190}, []int{defaultClients()[0], defaultClients()[18]})
}

// TestWorkBound bounds the work of the README's command, -runs 100 -clients
// 10,50,100, instead of timing it: no run delivers more than maxEvents
// messages, which makes it at most 25.2 million messages, and a sample of
// its runs stays well under the bound. BenchmarkReadmeCommand measures it.
func TestWorkBound(t *testing.T) {
	levels := []int{10, 50, 100}
	var bound int64
	for _, n := range levels {
		bound += 100 * 5 * maxEvents(n)
	}
	assert.Equal(t, int64(25_200_000), bound)

	res, err := blogExperiment(10, 4, levels...).run()
	require.NoError(t, err)
	var events int64
	for _, c := range res.cells {
		assert.LessOrEqual(t, c.events, int64(c.runs)*maxEvents(c.clients), "%s, %d clients", c.strategy, c.clients)
		events += c.events
	}
	// Ten times the sample estimates the whole: under 5 million messages.
	assert.Less(t, 10*events, int64(5_000_000))
}

// BenchmarkReadmeCommand runs the experiment of the README's command,
// -runs 100 -clients 10,50,100, and reports the messages simulated per
// second.
func BenchmarkReadmeCommand(b *testing.B) {
	x := blogExperiment(100, runtime.GOMAXPROCS(0), 10, 50, 100)
	var events int64
	for b.Loop() {
		res, err := x.run()
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range res.cells {
			events += c.events
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "messages/s")
}
