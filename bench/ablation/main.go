// Ablation finds what each of the Pacer's mechanisms buys: for each, a
// copy of the repository at HEAD with that mechanism turned off (one
// condition made false in internal/pacecore), the tests of the core and
// of package pace and the simulation report run on it, against the same
// copy unchanged. It prints, per
// mechanism, the tests that fail, the report's assertions that fail and
// how many of the report's lines move, and with -diff the lines that
// moved.
//
//	cd bench && go run ./ablation              # every mechanism, ~10 s each
//	go run ./ablation -only steady,resume -diff
//
// A mechanism whose removal fails no test and moves no line is a
// candidate for removal against the real-server gates (the commands
// head bench/results/pacing/first-bucket.txt). An edit that no longer matches the
// source is an error: the list must follow the code.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
)

// edit replaces old, which must occur once in internal/pacecore/file,
// by new.
type edit struct{ file, old, new string }

// mechanism is one rule of the Pacer and the edits that turn it off.
type mechanism struct {
	name, rule string
	edits      []edit
}

var mechanisms = []mechanism{
	{"drained", "a throttle that finds the bucket empty bounds the accepted rate by the successes since", []edit{
		{"meter.go", "if e := now.Sub(m.drained); !m.drained.IsZero()", "if e := now.Sub(m.drained); false && !m.drained.IsZero()"}}},
	{"regrant", "growth past regrant times the turns' rate voids them", []edit{
		{"ratecurve.go", "if s.sched.next.After(now) && s.rate.fill >= regrant*s.sched.granted {", "if false && s.sched.next.After(now) && s.rate.fill >= regrant*s.sched.granted {"}}},
	{"growthlimit", "the rate grows to at most growthLimit times the measured sending rate", []edit{
		{"ratecurve.go", "\tif next > s.rate.fill {\n\t\tnext = min(next, max(s.rate.fill, growthLimit*s.meter.measured))", "\tif false && next > s.rate.fill {\n\t\tnext = min(next, max(s.rate.fill, growthLimit*s.meter.measured))"}}},
	{"steady", "throttles within steadyBand find a steady limit, held below", []edit{
		{"ratecurve.go", "func (r *rateCurve) hold() time.Duration {\n\tif r.steady == 0 {", "func (r *rateCurve) hold() time.Duration {\n\tif true || r.steady == 0 {"}}},
	{"resume", "the success after a silence resumes from the window's accepted rate", []edit{
		{"outage.go", "return s.outage.cutsSinceOK >= silenceCuts", "return false && s.outage.cutsSinceOK >= silenceCuts"}}},
	{"restart", "a success after an outage restarts the key in slow start", []edit{
		{"outage.go", "\tgap := now.Sub(s.outage.lastOK)\n", "\tgap := now.Sub(s.outage.lastOK)\n\tif true {\n\t\treturn false\n\t}\n"}}},
	{"hold", "before any success, cuts stop at outageShare of the first and hold", []edit{
		{"ratecurve.go", "\tcase next < outageShare*s.outage.base:", "\tcase false && next < outageShare*s.outage.base:"}}},
	{"coldwait", "before any success, a wait past the deadline is a probe's, not refused", []edit{
		{"core.go", "return s.mode == ModeHeld || s.Engaged() && !s.meter.okOnce", "return s.mode == ModeHeld || false && s.Engaged() && !s.meter.okOnce"}}},
	{"firstbucket", "a new key's first bucket begins when its first attempt asks for a slot", []edit{
		{"core.go", "if ev.Kind == Admit {\n\t\ts.meter.open(now)", "if false && ev.Kind == Admit {\n\t\ts.meter.open(now)"}}},
	{"quiet", "a quiet spell of an idle key forgets the rates measured before", []edit{
		{"meter.go", "case elapsed >= quietTime && !s.Engaged():", "case false && elapsed >= quietTime && !s.Engaged():"}}},
	{"tooearly", "a throttle too early in its bucket to read a share waits for one", []edit{
		{"engage.go", "return !read && share <= shedMaxShare", "return false && !read && share <= shedMaxShare"}}},
	{"coldsuspicion", "a new key's CUSUM starts three refusals from the alarm", []edit{
		{"core.go", "s.meter.suspicion = coldSuspicion", "s.meter.suspicion = 0"}}},
	{"paceholds", "a stage of the test counts only while the rate holds the client back", []edit{
		{"shedtest.go", "\tfill := s.rate.fill\n\tif fill <= 0 {", "\tfill := s.rate.fill\n\tif true || fill <= 0 {"}}},
	{"collapse", "far below the engaging rate, a share up to collapseShare may be shedding", []edit{
		{"shedtest.go", "if sh.origin > 0 && s.rate.fill < collapseDepth*sh.origin {", "if false && sh.origin > 0 && s.rate.fill < collapseDepth*sh.origin {"}}},
	{"idleshare", "the refusal share of an idle key's buckets is remembered", []edit{
		{"shedding.go", "func (sh *shedding) idleBucket(okN, refused int64) {\n", "func (sh *shedding) idleBucket(okN, refused int64) {\n\tif true {\n\t\treturn\n\t}\n"}}},
	{"moderatecut", "a moderate first cut measures over minElapsedModerate", []edit{
		{"ratecurve.go", "\tcase !s.Engaged() && share <= shedMaxShare:", "\tcase false && !s.Engaged() && share <= shedMaxShare:"}}},
	{"deepen", "an undecided test is tried again at a lower rate", []edit{
		{"observe.go", "\t\t\tif !s.shed.deep {", "\t\t\tif false && !s.shed.deep {"}}},
	{"shedtest", "the test of shedding: refusals that do not depend on the rate", []edit{
		{"shedtest.go", "\tif !sh.testing(s) || sh.loN == 0 || !s.paceHolds(now) {", "\tif true || !sh.testing(s) || sh.loN == 0 || !s.paceHolds(now) {"}}},
	{"noise", "a throttle at the share already found independent is noise", []edit{
		{"shedding.go", "func (sh *shedding) noise(s *State) bool {\n\tif sh.share == 0 {", "func (sh *shedding) noise(s *State) bool {\n\tif true || sh.share == 0 {"}}},
	{"capacity", "cuts are floored at acceptedShare of the accepted rate", []edit{
		{"ratecurve.go", "\tcase !s.Engaged() && c > 0:", "\tcase false && !s.Engaged() && c > 0:"},
		{"ratecurve.go", "\tcase c > 0:\n", "\tcase false && c > 0:\n"}}},
	{"testsuccess", "successes end a test's stage early when the share fell", []edit{
		{"shedtest.go", "\tsh := &s.shed\n\tif !sh.testing(s) {\n\t\treturn\n\t}\n\thi := stoppedShare", "\tsh := &s.shed\n\tif true || !sh.testing(s) {\n\t\treturn\n\t}\n\thi := stoppedShare"}}},
}

// result is what the tests said of one copy.
type result struct {
	failed  []string          // tests that failed
	asserts int               // the report's failed assertions
	report  map[string]string // the report's lines, by scenario
}

var (
	reportLine = regexp.MustCompile(`simreport_test\.go:\d+: (.*?): (.*)`)
	failLine   = regexp.MustCompile(`^--- FAIL: (\S+)`)
)

func main() {
	only := flag.String("only", "", "run only these mechanisms, comma-separated")
	diff := flag.Bool("diff", false, "print the report lines that moved")
	flag.Parse()
	if err := run(*only, *diff); err != nil {
		fmt.Fprintln(os.Stderr, "ablation:", err)
		os.Exit(1)
	}
}

func run(only string, diff bool) error {
	root, err := output("", false, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	root = strings.TrimSpace(root)
	list := mechanisms
	if only != "" {
		names := strings.Split(only, ",")
		list = slices.DeleteFunc(slices.Clone(list), func(m mechanism) bool { return !slices.Contains(names, m.name) })
		if len(list) != len(names) {
			return fmt.Errorf("-only %q names a mechanism not in the list", only)
		}
	}
	base, err := measure(root, mechanism{name: "base"})
	if err != nil {
		return err
	}
	if len(base.failed) > 0 || base.asserts > 0 {
		return fmt.Errorf("HEAD itself fails: %v", base.failed)
	}
	var moves strings.Builder
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "mechanism\ttests failed\treport asserts failed\treport lines moved\ttests")
	for _, m := range list {
		r, err := measure(root, m)
		if err != nil {
			return err
		}
		moved := movedLines(base.report, r.report)
		fmt.Fprintf(w, "%s\t%d\t%d\t%d/%d\t%s\n", m.name, len(r.failed), r.asserts, len(moved), len(base.report), strings.Join(r.failed, " "))
		if diff && len(moved) > 0 {
			fmt.Fprintf(&moves, "\n%s:\n", m.name)
			for _, k := range moved {
				fmt.Fprintf(&moves, "  %s\n      %s\n   -> %s\n", k, base.report[k], r.report[k])
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err = fmt.Print(moves.String())
	return err
}

// measure runs the tests on a copy of HEAD with m's edits.
func measure(root string, m mechanism) (result, error) {
	dir, err := os.MkdirTemp("", "ablation-"+m.name+"-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	archive := exec.Command("git", "-C", root, "archive", "HEAD")
	untar := exec.Command("tar", "-x", "-C", dir)
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		return result{}, err
	}
	if err := untar.Start(); err != nil {
		return result{}, err
	}
	if err := archive.Run(); err != nil {
		return result{}, fmt.Errorf("git archive: %w", err)
	}
	if err := untar.Wait(); err != nil {
		return result{}, fmt.Errorf("tar: %w", err)
	}
	for _, e := range m.edits {
		p := filepath.Join(dir, "internal", "pacecore", e.file)
		src, err := os.ReadFile(p)
		if err != nil {
			return result{}, err
		}
		if n := bytes.Count(src, []byte(e.old)); n != 1 {
			return result{}, fmt.Errorf("%s: %d matches in internal/pacecore/%s of %q", m.name, n, e.file, e.old)
		}
		if err := os.WriteFile(p, bytes.Replace(src, []byte(e.old), []byte(e.new), 1), 0o644); err != nil {
			return result{}, err
		}
	}
	// The tests fail by design here: their output is the measure.
	unit, _ := output(dir, false, "go", "test", "./internal/pacecore", "./pace", "-count=1")
	sim, _ := output(dir, true, "go", "test", "./internal/pacecore", "-count=1", "-run", "TestSimReport", "-v", "-timeout", "30m")
	r := result{report: map[string]string{}}
	for l := range strings.Lines(unit) {
		if f := failLine.FindStringSubmatch(l); f != nil {
			r.failed = append(r.failed, f[1])
		}
	}
	for l := range strings.Lines(sim) {
		if f := reportLine.FindStringSubmatch(l); f != nil {
			r.report[f[1]] = strings.TrimSpace(f[2])
		}
		if strings.Contains(l, "Error:") {
			r.asserts++
		}
	}
	if len(r.report) == 0 {
		return r, fmt.Errorf("%s: the simulation report printed nothing:\n%s", m.name, sim)
	}
	return r, nil
}

// movedLines lists the scenarios whose report line differs.
func movedLines(base, r map[string]string) []string {
	var moved []string
	for k, v := range base {
		if r[k] != v {
			moved = append(moved, k)
		}
	}
	slices.Sort(moved)
	return moved
}

// output runs a command in dir, with the simulation report on if report.
func output(dir string, report bool, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if report {
		cmd.Env = append(os.Environ(), "PACE_SIM_REPORT=1")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
