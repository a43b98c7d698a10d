package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestComparisonExponentialTotals(t *testing.T) {
	// Seed 002's "total delay" figures for exponential backoff.
	want := map[int]int64{1: 1, 3: 7, 5: 31, 10: 1023, 20: 1048575} // seconds
	var exp *comparisonCurve
	for _, c := range comparisonCurves() {
		if c.name == "exponential" {
			exp = &c
		}
	}
	require.NotNil(t, exp, "comparisonCurves() has no exponential")
	require.Equal(t, []int{1, 3, 5, 10, 20}, comparisonRetries)
	for _, r := range comparisonRetries {
		if got, w := total(exp.b, r), time.Duration(want[r])*time.Second; got != w {
			t.Errorf("total(exponential, %d) = %v; want %v", r, got, w)
		}
	}

	// The same figures, as printed.
	var out bytes.Buffer
	require.NoError(t, writeComparison(&out))
	line := regexp.MustCompile(`(?m)^\s*exponential\s.*$`).FindString(out.String())
	require.NotEmpty(t, line, "writeComparison printed no exponential row:\n%s", out.String())
	cells := regexp.MustCompile(`(\d+) / (\d+)`).FindAllStringSubmatch(line, -1)
	require.Len(t, cells, len(comparisonRetries), "exponential row %q", line)
	for i, r := range comparisonRetries {
		w := strconv.FormatInt(want[r], 10)
		if cells[i][1] != w || cells[i][2] != w {
			t.Errorf("exponential cell for %d retries = %q; want %s / %s", r, cells[i][0], w, w)
		}
	}
}

// TestComparisonSeedFigures checks that the seed 002 column reproduces the
// article's whole table, so that the shift the note explains is real.
func TestComparisonSeedFigures(t *testing.T) {
	want := map[string][]int{ // for 1, 3, 5, 10 and 20 retries
		"constant":    {1, 3, 5, 10, 20},
		"linear":      {0, 3, 10, 45, 190},
		"fibonacci":   {0, 2, 7, 88, 10945},
		"quadratic":   {0, 5, 30, 285, 2470},
		"exponential": {1, 7, 31, 1023, 1048575},
		"polynomial":  {0, 9, 100, 2025, 36100},
	}
	ours := map[string][]time.Duration{ // this package counts retries from 1
		"constant":    {1, 3, 5, 10, 20},
		"linear":      {1, 6, 15, 55, 210},
		"fibonacci":   {1, 4, 12, 143, 17710},
		"quadratic":   {1, 14, 55, 385, 2870},
		"exponential": {1, 7, 31, 1023, 1048575},
		"polynomial":  {1, 36, 225, 3025, 44100},
	}
	curves := comparisonCurves()
	require.Len(t, curves, len(want))
	for _, c := range curves {
		require.Contains(t, want, c.name)
		for i, r := range comparisonRetries {
			if got := seedTotal(c.seed, r); got != want[c.name][i] {
				t.Errorf("seedTotal(%s, %d) = %d; want %d", c.name, r, got, want[c.name][i])
			}
			if got := total(c.b, r); got != ours[c.name][i]*time.Second {
				t.Errorf("total(%s, %d) = %v; want %v", c.name, r, got, ours[c.name][i]*time.Second)
			}
		}
	}
}

func TestRunNoFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(nil, &stdout, &stderr)
	require.Equal(t, 0, code, "run() exit status; stderr: %s", stderr.String())
	assert.Empty(t, stderr.String())
	for _, s := range []string{"1048575 / 1048575", "1023 / 1023", "210 / 190", "retry 0"} {
		assert.Contains(t, stdout.String(), s)
	}
}

func TestRunSchedule(t *testing.T) {
	tests := []struct {
		args []string
		want []string // substrings of stdout
	}{
		{[]string{"-curve", "exponential", "-base", "100ms", "-cap", "20s"}, []string{
			"retry  delay   total", "\n      1  100ms   100ms\n", "\n      9    20s   45.5s\n", "\n     10    20s  1m5.5s\n",
		}},
		{[]string{"-curve", "exponential", "-base", "1s", "-cap", "10s", "-jitter", "full", "-retries", "5"}, []string{
			"shortest", "longest", "full jitter", "\n      5        0s      10s              0s            25s\n",
		}},
		{[]string{"-curve", "linear", "-base", "1s", "-cap", "0", "-retries", "3"}, []string{
			"no cap", "\n      3     3s     6s\n",
		}},
		{[]string{"-curve", "exponential", "-base", "1s", "-cap", "0", "-retries", "70"}, []string{"max (292 years)"}},
		{[]string{"-curve", "decorrelated", "-base", "1s", "-cap", "10s", "-samples", "3", "-seed", "7"}, []string{"sample", "total"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			require.Equal(t, 0, code, "run(%q) exit status; stderr: %s", tt.args, stderr.String())
			for _, s := range tt.want {
				assert.Contains(t, stdout.String(), s, "run(%q)", tt.args)
			}
		})
	}
}

func TestRunSamplesAreReproducible(t *testing.T) {
	args := []string{"-curve", "exponential", "-jitter", "full", "-samples", "4", "-seed", "42"}
	var first, second, other, stderr bytes.Buffer
	require.Equal(t, 0, run(args, &first, &stderr), stderr.String())
	require.Equal(t, 0, run(args, &second, &stderr), stderr.String())
	args[len(args)-1] = "43"
	require.Equal(t, 0, run(args, &other, &stderr), stderr.String())
	assert.Equal(t, first.String(), second.String(), "the same -seed gave different samples")
	assert.NotEqual(t, first.String(), other.String(), "different -seeds gave the same samples")
	assert.Equal(t, 3+4, strings.Count(first.String(), "\n"), "4 samples, a header, a description and a blank line:\n%s", first.String())
}

func TestRunBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"-curve", "quadratic"}, `-curve "quadratic" is not one of`},
		{[]string{"-jitter", "half"}, `-jitter "half" is not one of`},
		{[]string{"-curve", "exponential", "-multiplier", "0.5"}, "retry: Exponential.Multiplier 0.5 is less than 1"},
		{[]string{"-curve", "exponential", "-base", "1s", "-cap", "100ms"}, "retry: Exponential.Cap 100ms is less than Base 1s"},
		{[]string{"-curve", "linear", "-base", "-1s"}, "retry: Linear.Base -1s is negative"},
		{[]string{"-curve", "polynomial", "-degree", "-2"}, "retry: Polynomial.Degree -2 is negative"},
		{[]string{"-curve", "decorrelated", "-base", "0"}, "retry: Decorrelated.Base 0s is not positive"},
		{[]string{"-curve", "decorrelated", "-jitter", "full"}, "-jitter does not apply to -curve decorrelated"},
		{[]string{"-curve", "constant", "-cap", "1s"}, "-cap does not apply to -curve constant"},
		{[]string{"-jitter", "spread", "-ratio", "-1"}, "-ratio -1 is not a finite number"},
		{[]string{"-jitter", "spread", "-ratio", "NaN"}, "-ratio NaN is not a finite number"},
		{[]string{"-ratio", "0.3"}, "-ratio needs -jitter spread"},
		{[]string{"-degree", "3"}, "-degree needs -curve polynomial"},
		{[]string{"-multiplier", "3", "-curve", "linear"}, "-multiplier needs -curve exponential"},
		{[]string{"-seed", "3"}, "-seed needs -samples"},
		{[]string{"-retries", "0"}, "-retries 0 is not within 1 to 10000"},
		{[]string{"-retries", "10001"}, "-retries 10001 is not within 1 to 10000"},
		{[]string{"-samples", "-1"}, "-samples -1 is not within 0 to 1000"},
		{[]string{"-compare", "-retries", "3"}, "-compare takes no other flag"},
		{[]string{"-base", "soon"}, `invalid value "soon" for flag -base`},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
		{[]string{"exponential"}, `unexpected argument "exponential"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			assert.Equal(t, 2, code, "run(%q) exit status", tt.args)
			assert.Contains(t, stderr.String(), tt.want, "run(%q) stderr", tt.args)
			assert.Empty(t, stdout.String(), "run(%q) stdout", tt.args)
		})
	}
}

func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-h"}, &stdout, &stderr)
	assert.Equal(t, 0, code, "run(-h) exit status")
	for _, s := range []string{"Usage: schedule", "-curve", "-jitter", "-ratio", "-samples", "-seed", "Examples:"} {
		assert.Contains(t, stderr.String(), s)
	}
}
