package pace

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"hash"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

// The golden traces pin what the Pacer decides, step by step, in every
// simulation the tests run (TestSimReport's scenarios and the unit
// simulations, on fewer seeds): each turn asked for (its time, the wait
// given and the turn's generation) and each answer (its class) with the
// state it leaves (the rate in force to the bit, engaged or not, the
// turns' generation, the pause). A restructuring must reproduce them
// exactly; a change of behaviour shows as the scenarios whose trace
// moved, and is recorded with
//
//	go test ./pace -run TestGoldenTraces -update
//
// -trace=name writes the full trace of the scenario called name to
// testdata/traces/, to compare two builds line by line.
var (
	updateGolden = flag.Bool("update", false, "rewrite testdata/golden.txt from the current build")
	traceName    = flag.String("trace", "", "write the full trace of this golden scenario to testdata/traces/")
)

// simTrace hashes the steps of one simulation, and may keep them.
type simTrace struct {
	h     hash.Hash
	steps int
	lines *strings.Builder // nil unless kept
}

func newSimTrace(keep bool) *simTrace {
	tr := &simTrace{h: sha256.New()}
	if keep {
		tr.lines = &strings.Builder{}
	}
	return tr
}

func (tr *simTrace) add(line string) {
	tr.steps++
	tr.h.Write([]byte(line))
	tr.h.Write([]byte{'\n'})
	if tr.lines != nil {
		tr.lines.WriteString(line)
		tr.lines.WriteByte('\n')
	}
}

// turn records a turn asked for at at: the wait d, and its generation.
func (tr *simTrace) turn(at time.Time, d time.Duration, res *reservation) {
	if tr == nil {
		return
	}
	tr.add(fmt.Sprintf("T %d %d %d", at.Sub(pacerEpoch), d, res.generation()))
}

// answer records an answer of class at at, to an attempt paced at gen,
// and the state it left s in.
func (tr *simTrace) answer(e *entry, at time.Time, class retry.Class, gen uint64) {
	if tr == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.st
	var paused int64
	if !s.sched.paused.IsZero() {
		paused = int64(s.sched.paused.Sub(pacerEpoch))
	}
	tr.add(fmt.Sprintf("A %d %d %d %x %t %d %d %t", at.Sub(pacerEpoch), class, gen,
		math.Float64bits(s.rate.fill), s.engaged(), s.sched.gen, paused, s.mode == modeHeld))
}

func (tr *simTrace) sum() string { return fmt.Sprintf("%x", tr.h.Sum(nil)[:12]) }

// goldenScenario is one simulation of a test, on one seed.
type goldenScenario struct {
	name string
	run  func(t *testing.T, trace *simTrace)
}

func goldenScenarios() []goldenScenario {
	var all []goldenScenario
	add := func(name string, run func(t *testing.T, trace *simTrace)) {
		all = append(all, goldenScenario{name, run})
	}
	adapts := []Adapt{AdaptCubic, AdaptAIMD}
	ms := time.Millisecond
	const seeds = 6
	for _, adapt := range adapts {
		// TestSimReport's queue, TestPacerRandomSheddingIsNoLimit,
		// TestPacerSheddingWithoutSlowStartTail, and 40 % shedding.
		for _, shed := range []float64{0.05, 0.1, 0.25, 0.4} {
			for seed := range uint64(seeds) {
				add(fmt.Sprintf("queue/a%d/shed%.2f/seed%d", adapt, shed, seed), func(t *testing.T, tr *simTrace) {
					p := &Pacer{InitialWindow: -1, Adapt: adapt}
					srv := &simServer{shed: shed, rnd: rand.New(rand.NewPCG(seed, 77)), trace: tr}
					simRun(t, p, srv, pacerEpoch, 1000, 6000)
				})
			}
		}
		// TestSimReport's 40 clients, and TestPacerSheddingBurstAnsweredAtOnce.
		for _, shed := range []float64{0.05, 0.1, 0.25, 0.4} {
			for seed := range uint64(seeds) {
				add(fmt.Sprintf("clients40/a%d/shed%.2f/seed%d", adapt, shed, seed), func(t *testing.T, tr *simTrace) {
					p := &Pacer{InitialWindow: -1, Adapt: adapt}
					srv := &simServer{shed: shed, rnd: rand.New(rand.NewPCG(seed, 78)), trace: tr}
					simClients(t, p, srv, 40, 600, ms, rand.New(rand.NewPCG(seed, 79)))
				})
			}
		}
		// TestSimReport's limits, TestPacerBurstLimitIsNoShedding and
		// TestPacerColdStartAgainstABurst.
		for _, l := range []struct {
			rate, burst, shed float64
			clients, n        int
			rtts              []time.Duration
		}{
			{100, 0, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}},
			{100, 10, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}},
			{100, 20, 0, 10, 300, []time.Duration{ms, 5 * ms, 20 * ms}},
			{100, 100, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}},
			{100, 10, 0.1, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}},
			{5, 5, 0, 10, 200, []time.Duration{20 * ms, 50 * ms}},
			{5, 0, 0, 10, 200, []time.Duration{20 * ms, 50 * ms}},
		} {
			for seed := range uint64(seeds) {
				add(fmt.Sprintf("limit/a%d/%v+%v/shed%v/c%d/seed%d", adapt, l.rate, l.burst, l.shed, l.clients, seed), func(t *testing.T, tr *simTrace) {
					p := &Pacer{InitialWindow: -1, Adapt: adapt}
					rtt := l.rtts[int(seed)%len(l.rtts)]
					srv := &simServer{rate: l.rate, burst: l.burst, shed: l.shed, lag: rtt / 2, rnd: rand.New(rand.NewPCG(seed, 80)), trace: tr}
					simClients(t, p, srv, l.clients, l.n, rtt, rand.New(rand.NewPCG(seed, 81)))
				})
			}
		}
		// TestSimReport's limit after shedding, and
		// TestPacerEngagesAgainAfterShedding.
		for _, shed := range []float64{0.1, 0.3} {
			for seed := range uint64(seeds) {
				add(fmt.Sprintf("after-shedding/a%d/shed%v/seed%d", adapt, shed, seed), func(t *testing.T, tr *simTrace) {
					p := &Pacer{InitialWindow: -1, Adapt: adapt}
					srv := &simServer{shed: shed, rnd: rand.New(rand.NewPCG(seed, 5)), trace: tr}
					end, _, _ := simRun(t, p, srv, pacerEpoch, 1000, 3000)
					srv.shed, srv.rate = 0.1, 100
					simRun(t, p, srv, end, 1000, 1000)
				})
			}
		}
		// TestPacerRateLimitIsNoShedding.
		add(fmt.Sprintf("limit-queue/a%d", adapt), func(t *testing.T, tr *simTrace) {
			p := &Pacer{Adapt: adapt, InitialWindow: -1}
			srv := &simServer{rate: 100, rnd: rand.New(rand.NewPCG(2, 3)), trace: tr}
			simRun(t, p, srv, pacerEpoch, 1000, 3000)
		})
		// TestPacerHoldsBelowASteadyLimit, with slow start's state.
		add(fmt.Sprintf("steady/a%d", adapt), func(t *testing.T, tr *simTrace) {
			p := &Pacer{Adapt: adapt}
			srv := &simServer{rate: 5, lag: 15 * ms, rnd: rand.New(rand.NewPCG(6, 7)), trace: tr}
			warm, _, _ := simRun(t, p, srv, pacerEpoch, 50, 100)
			simRun(t, p, srv, warm, 50, 1000)
		})
		// TestPacerFixedWindowLimit.
		for _, quota := range []int{10, 20, 100} {
			for _, rtt := range []time.Duration{ms, 20 * ms} {
				add(fmt.Sprintf("window/a%d/q%d/rtt%v", adapt, quota, rtt), func(t *testing.T, tr *simTrace) {
					p := &Pacer{Adapt: adapt, InitialWindow: -1}
					srv := &simServer{window: time.Second, quota: quota, lag: rtt / 2, rnd: rand.New(rand.NewPCG(1, 2)), trace: tr}
					simClients(t, p, srv, 8, 8*quota, rtt, rand.New(rand.NewPCG(3, 4)))
				})
			}
		}
	}
	// TestQuietSpellIsMeasuredAfresh.
	for _, adapt := range []Adapt{AdaptCubic, AdaptAIMD} {
		for _, gap := range []time.Duration{0, 10 * time.Second} {
			add(fmt.Sprintf("quiet/a%d/gap%v", adapt, gap), func(t *testing.T, tr *simTrace) {
				p := &Pacer{InitialWindow: -1, Adapt: adapt}
				srv := &simServer{rnd: rand.New(rand.NewPCG(1, 2)), trace: tr}
				busy, _, _ := simRun(t, p, srv, pacerEpoch, 50, 1000)
				srv.rate = 100
				simRun(t, p, srv, busy.Add(gap), 1000, 1000)
			})
		}
	}
	// Outages (TestPacerColdOutage, TestPacerOutageAfterSuccesses, as
	// simulations): every attempt refused for a while, from the first or
	// after a limit was learned, then the server back at its limit.
	for _, adapt := range []Adapt{AdaptCubic, AdaptAIMD} {
		for _, warm := range []bool{false, true} {
			add(fmt.Sprintf("outage/a%d/warm%v", adapt, warm), func(t *testing.T, tr *simTrace) {
				p := &Pacer{Adapt: adapt}
				srv := &simServer{rate: 100, lag: 5 * ms, rnd: rand.New(rand.NewPCG(4, 5)), trace: tr}
				at := pacerEpoch
				if warm {
					at, _, _ = simRun(t, p, srv, at, 1000, 1000)
				}
				srv.shed = 1
				at, _, _ = simRun(t, p, srv, at, 1000, 150)
				srv.shed = 0
				simRun(t, p, srv, at, 1000, 1000)
			})
		}
	}
	// TestPacerFollowsALimitThatMoves.
	for _, to := range []float64{2.5, 10} {
		for seed := range uint64(3) {
			add(fmt.Sprintf("moves/to%v/seed%d", to, seed), func(t *testing.T, tr *simTrace) {
				p := &Pacer{}
				srv := &simServer{rate: 5, lag: 15 * ms, rnd: rand.New(rand.NewPCG(seed, 7)), trace: tr}
				warm, _, _ := simRun(t, p, srv, pacerEpoch, 50, 600)
				srv.rate = to
				simRun(t, p, srv, warm, 50, int(to*60))
			})
		}
	}
	return all
}

// TestGoldenTraces runs every golden scenario and compares its trace's
// hash and length with testdata/golden.txt.
func TestGoldenTraces(t *testing.T) {
	const file = "testdata/golden.txt"
	want := map[string]string{}
	if !*updateGolden {
		f, err := os.Open(file)
		if err != nil {
			t.Fatalf("%v (record it with -update)", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, rest, ok := strings.Cut(sc.Text(), " "); ok && !strings.HasPrefix(name, "#") {
				want[name] = rest
			}
		}
		f.Close()
	}
	var out strings.Builder
	out.WriteString("# scenario steps sha256[:12] of the trace; see golden_test.go\n")
	moved := 0
	for _, sc := range goldenScenarios() {
		tr := newSimTrace(sc.name == *traceName)
		sc.run(t, tr)
		got := fmt.Sprintf("%d %s", tr.steps, tr.sum())
		fmt.Fprintf(&out, "%s %s\n", sc.name, got)
		if tr.lines != nil {
			path := filepath.Join("testdata", "traces", strings.ReplaceAll(sc.name, "/", "_")+".txt")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tr.lines.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", path)
		}
		if *updateGolden {
			continue
		}
		if w, ok := want[sc.name]; !ok {
			t.Errorf("%s: no golden trace (record it with -update)", sc.name)
		} else if w != got {
			moved++
			t.Errorf("%s: trace %s; golden %s", sc.name, got, w)
		}
		delete(want, sc.name)
	}
	for name := range want {
		t.Errorf("%s: golden trace of no scenario", name)
	}
	if moved > 0 {
		t.Logf("%d scenarios moved: the Pacer decides differently (record the new behaviour with -update once it passes its gates)", moved)
	}
	if *updateGolden {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
