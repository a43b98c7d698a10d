package pacesim

import (
	"bufio"
	"crypto/sha256"
	_ "embed"
	"fmt"
	"hash"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The golden traces pin what the decision core decides, step by step, in
// every scenario of Scenarios: each turn asked for (its time, the wait
// given and the turn's generation) and each answer (its class) with the
// state it leaves (the rate in force to the bit, engaged or not, the
// turns' generation, the pause, the hold). A restructuring must reproduce
// them exactly; a change of behaviour shows as the scenarios whose trace
// moved, and is recorded with
//
//	go test ./internal/pacecore -run TestGoldenTraces -update
//
// -trace=name writes the full trace of the scenario called name to
// testdata/traces/ of the package under test, to compare two builds line
// by line.
//
//go:embed golden.txt
var golden string

// Trace hashes the steps of one simulation, and may keep them.
type Trace struct {
	h     hash.Hash
	steps int
	lines *strings.Builder // nil unless kept
}

// NewTrace returns a trace that keeps its lines if keep.
func NewTrace(keep bool) *Trace {
	tr := &Trace{h: sha256.New()}
	if keep {
		tr.lines = &strings.Builder{}
	}
	return tr
}

func (tr *Trace) add(line string) {
	tr.steps++
	tr.h.Write([]byte(line))
	tr.h.Write([]byte{'\n'})
	if tr.lines != nil {
		tr.lines.WriteString(line)
		tr.lines.WriteByte('\n')
	}
}

// turn records a turn asked for at at: the wait d, and its generation.
func (tr *Trace) turn(at time.Time, d time.Duration, gen uint64) {
	if tr == nil {
		return
	}
	tr.add(fmt.Sprintf("T %d %d %d", at.Sub(Epoch), d, gen))
}

// answer records an answer at at, refused or not, to an attempt paced at
// gen, and the state st it left.
func (tr *Trace) answer(at time.Time, refused bool, gen uint64, st State) {
	if tr == nil {
		return
	}
	tr.add(fmt.Sprintf("A %d %v %d %016x %v %d %d", at.Sub(Epoch), refused, gen,
		math.Float64bits(st.Rate), st.Engaged, st.Mode, st.Gen))
}

// Sum is the trace's steps and hash, as golden.txt records them.
func (tr *Trace) Sum() string { return fmt.Sprintf("%d %x", tr.steps, tr.h.Sum(nil)[:12]) }

// Scenario is one simulation of a test, on one seed: Run drives keys
// that newKey makes.
type Scenario struct {
	Name string
	Run  func(t testing.TB, newKey func(Setup) Key, tr *Trace)
}

// Golden returns the recorded sum of each scenario's trace, by name.
func Golden() map[string]string {
	want := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(golden))
	for sc.Scan() {
		if name, rest, ok := strings.Cut(sc.Text(), " "); ok && !strings.HasPrefix(name, "#") {
			want[name] = rest
		}
	}
	return want
}

// Check runs the scenarios that pick selects (every one if nil) with keys
// of newKey, and fails t for each whose trace is not the golden one. With
// update, it rewrites golden.txt from the traces instead (pick must be
// nil). The scenario called trace, if any, writes its whole trace to
// testdata/traces/.
func Check(t *testing.T, newKey func(Setup) Key, pick func(name string) bool, update bool, trace string) {
	t.Helper()
	if update && pick != nil {
		t.Fatal("pacesim: golden.txt is written from every scenario")
	}
	want := Golden()
	var out strings.Builder
	out.WriteString("# scenario steps sha256[:12] of the trace; see internal/pacesim/golden.go\n")
	moved, ran := 0, 0
	for _, sc := range Scenarios() {
		if pick != nil && !pick(sc.Name) {
			continue
		}
		ran++
		tr := NewTrace(sc.Name == trace)
		sc.Run(t, newKey, tr)
		got := tr.Sum()
		fmt.Fprintf(&out, "%s %s\n", sc.Name, got)
		if tr.lines != nil {
			path := filepath.Join("testdata", "traces", strings.ReplaceAll(sc.Name, "/", "_")+".txt")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tr.lines.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", path)
		}
		if update {
			delete(want, sc.Name)
			continue
		}
		if w, ok := want[sc.Name]; !ok {
			t.Errorf("%s: no golden trace (record it with -update)", sc.Name)
		} else if w != got {
			moved++
			t.Errorf("%s: trace %s; golden %s", sc.Name, got, w)
		}
		delete(want, sc.Name)
	}
	if ran == 0 {
		t.Fatal("pacesim: no scenario picked")
	}
	if pick == nil && !update {
		for name := range want {
			t.Errorf("%s: golden trace of no scenario", name)
		}
	}
	if moved > 0 {
		t.Logf("%d scenarios moved: the core decides differently (record the new behaviour with -update once it passes its gates)", moved)
	}
	if update {
		_, src, _, _ := runtime.Caller(0)
		file := filepath.Join(filepath.Dir(src), "golden.txt")
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", file)
	}
}
