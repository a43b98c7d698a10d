package redispace

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/backoff-jitter/retry/internal/pacecore"
)

// A step of a key's state (an attempt asking for a turn, an answer) is a
// read of the state and a compare-and-set of the stepped state. A
// process's steps of one key are applied in rounds: the steps that come
// while a round is under way wait for the next, and a round reads the
// state once, steps it with each of them in turn (at one time, Redis's
// at the read), and writes it back once (a group commit). So the
// goroutines of one process never refuse each other's writes, only the
// fleet's processes meet in the compare-and-set, and a round's two calls
// to Redis serve every step that waited for it. Stepping one at a time,
// a hundred workers of ten processes needed more writes than the
// compare-and-set let through: half of them were refused, and the
// processes fell back to their own Pacers.

// stepFunc steps a key's state for one caller, at now, carrying sent and
// ok (the counts made without a step) into its first event, and returns
// its effects and the attempts it sent (added to the count of sends).
type stepFunc func(st *pacecore.State, now time.Time, sent, ok int64) (pacecore.Effects, int64)

// pending is a caller's step waiting for its round.
type pending struct {
	step stepFunc
	late func(pacecore.Effects)
	snap *snapshot // the state the caller read just before, if any
	fx   pacecore.Effects
	read time.Time // when the state its step was made from was read
	err  error
	// wake tells the caller its step is done (false), or that it leads
	// the next round (true).
	wake chan bool
}

// queue is a key's steps waiting for a round.
type queue struct {
	steps []*pending
}

// rounds holds the queues of the keys whose steps are under way: a key's
// queue is dropped as its last round ends, so that it holds the keys in
// use only.
type rounds struct {
	mu sync.Mutex
	m  map[string]*queue
}

// A round whose write was refused steps again at once from the state the
// refusal returned. After leaseAfter refusals it takes the key's lease
// (a field of the hash, "token until", which every write honours) before
// it steps again, so that its next write cannot be refused, and the
// writes of the other processes wait until it has written; a lease whose
// holder died ends by itself after Timeout. Optimistic alone, most rounds
// wrote at once, but some process's rounds lost again and again: ten
// Pacers of one process, on two cores, lost one round of a few hundred
// 16 times in a row, its steps failing with it. A round that finds the
// lease held by another waits leaseWait or so and looks again; it fails
// after maxConflicts tries in all.
const (
	leaseAfter   = 3
	leaseWait    = 500 * time.Microsecond
	maxConflicts = 32
)

// errContended is a round's error after maxConflicts.
var errContended = errors.New("redispace: the key's state kept changing under the step (32 writes refused in a row)")

// update steps key's state with step, in the next round of key's steps
// in this process, and returns its effects, and when (on the process's
// clock) the state it stepped was read: its time is Redis's then. A round
// serves several callers, so it heeds none's context: each of its calls
// is bounded by Timeout. snap,
// if not nil, is the state as the caller just read it, from which its
// round may start. late, if not nil, gets the effects of a write that
// succeeded after Timeout, when the caller has gone on without it (see
// giveBack).
func (p *Pacer) update(key string, snap *snapshot, step stepFunc, late func(pacecore.Effects)) (pacecore.Effects, time.Time, error) {
	op := &pending{step: step, late: late, snap: snap, wake: make(chan bool, 1)}
	r := &p.rounds
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*queue{}
	}
	q, running := r.m[key]
	if !running {
		q = &queue{}
		r.m[key] = q
	}
	q.steps = append(q.steps, op)
	r.mu.Unlock()
	if !running {
		p.round(key, q)
	}
	for <-op.wake {
		p.round(key, q)
	}
	return op.fx, op.read, op.err
}

// round applies the steps waiting in q, then hands the next round to the
// first step that came meanwhile, or drops the queue.
func (p *Pacer) round(key string, q *queue) {
	r := &p.rounds
	r.mu.Lock()
	steps := q.steps
	q.steps = nil
	r.mu.Unlock()
	p.commit(key, steps)
	for _, op := range steps {
		op.wake <- false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(q.steps) > 0 {
		q.steps[0].wake <- true
		return
	}
	delete(r.m, key)
}

// commit steps key's state with steps, in order, and writes it back,
// stepping again from the state another process wrote meanwhile; it sets
// each step's effects, or the round's error.
func (p *Pacer) commit(key string, steps []*pending) {
	fail := func(err error) {
		for _, op := range steps {
			op.err = err
		}
	}
	ctx := context.Background() // each call is bounded by Timeout
	var snap snapshot
	if s := steps[0].snap; s != nil {
		snap = *s
	} else {
		var err error
		if snap, _, err = p.load(ctx, key, opRead); err != nil {
			fail(err)
			return
		}
	}
	fxs := make([]pacecore.Effects, len(steps))
	token := ""
	for try := range maxConflicts {
		if try >= leaseAfter && !snap.leased {
			if try > leaseAfter {
				time.Sleep(leaseWait/2 + rand.N(leaseWait))
			}
			if token == "" {
				token = strconv.FormatUint(rand.Uint64(), 36)
			}
			next, _, err := p.lease(ctx, key, token)
			if err != nil {
				fail(err)
				return
			}
			if snap = next; !snap.leased {
				continue
			}
		}
		st := pacecore.New(p.config())
		// A state missing, or of another format (another version of the
		// library), starts the key afresh.
		_ = st.UnmarshalBinary(snap.state)
		// Each step carries in the counts its caller saw when it read
		// this very state (its version), less those carried before it:
		// the attempts sent and successes counted before it came, as
		// package pace's Pacer carries them into each step. A caller
		// that read an older version (another write came between), or
		// none, saw none of these: the first step carries what the
		// round read instead. Carried into no step, the counts of a
		// round that stepped again after a refused write waited for a
		// later one, and a step decided without them: a cold key shed
		// at random engaged on three refusals with no attempt or
		// success counted, at the minimum rate.
		var sends, carriedN, carriedK int64
		for i, op := range steps {
			var n, ok int64
			seen := op.snap
			if seen == nil || seen.version != snap.version {
				// Read before another write, or not at all: the first
				// step carries what the round read, made before it.
				seen = nil
				if i == 0 {
					seen = &snap
				}
			}
			if s := seen; s != nil {
				// The counts only grow while the version stands.
				n, ok = max(s.sent-carriedN, 0), max(s.ok-carriedK, 0)
			}
			carriedN, carriedK = carriedN+n, carriedK+ok
			fx, s := op.step(&st, snap.now, n, ok)
			fxs[i], sends = fx, sends+s
		}
		next, done, err := p.save(ctx, key, snap, &st, carriedN, carriedK, sends, token, func() {
			for i, op := range steps {
				if op.late != nil {
					op.late(fxs[i])
				}
			}
		})
		if err != nil {
			fail(err)
			return
		}
		if done {
			for i, op := range steps {
				op.fx, op.read = fxs[i], snap.read
			}
			return
		}
		snap = next
	}
	fail(errContended)
}

// save writes st, stepped from snap carrying in usedN and usedK of the
// counts and with sends more attempts sent, if no other process wrote
// key's state since snap was read nor holds its lease (token is the
// writer's, if any): done, or the state now. late is called if the write
// succeeds after Timeout.
func (p *Pacer) save(ctx context.Context, key string, snap snapshot, st *pacecore.State, usedN, usedK, sends int64, token string, late func()) (snapshot, bool, error) {
	blob, err := st.MarshalBinary()
	if err != nil {
		return snapshot{}, false, err
	}
	onLate := func(res any) {
		if _, done, err := p.readSnapshot(res, time.Time{}); err == nil && done {
			late()
		}
	}
	inflight, slots, _ := st.Window()
	var ends int64
	if e := st.SlowStartEnds(); !e.IsZero() {
		ends = e.UnixMicro()
	}
	mode := st.Mode()
	if st.WaitsHeld() {
		// Mirrored as held: its waiters past their deadlines wait on
		// without a step (see readyScript) until a success.
		mode = pacecore.ModeHeld
	}
	sent := time.Now()
	res, err := p.runLate(ctx, saveScript, key, onLate, snap.version, blob, int(mode), strconv.FormatUint(st.Gen(), 10),
		usedN, usedK, sends, keyTTL.Milliseconds(), inflight, slots, ends, token)
	if err != nil {
		return snapshot{}, false, err
	}
	return p.readSnapshot(res, sent)
}

// lease reads key's state for a step and takes its lease for token, for
// Timeout, unless another round holds it (snap.leased says which).
func (p *Pacer) lease(ctx context.Context, key, token string) (snapshot, bool, error) {
	sent := time.Now()
	res, err := p.run(ctx, loadScript, key, opLease, keyTTL.Milliseconds(), token, p.timeout().Microseconds())
	if err != nil {
		return snapshot{}, false, err
	}
	return p.readSnapshot(res, sent)
}
