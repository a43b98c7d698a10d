package redispace

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/redis/go-redis/v9"
)

// A key's state is one Redis hash:
//
//	s  the encoded state (pacecore.State.MarshalBinary)
//	v  its version, bumped by every write: the compare of compare-and-set
//	n  attempts sent and k successes counted without a step, carried
//	   into the next step's state
//	u  "1" while an attempt goes unpaced with no step (State.Unpaced)
//	c  until when, in microseconds on Redis's clock, a success is counted
//	   with no step (State.Calm); 0: not calm
//	g  the generation of the turns handed out, for the waits to watch
//
// Times in scripts are microseconds: a double holds them exactly.

// unpacedScript counts an attempt as sent and returns 1 when the key is
// unpaced; a key new to the fleet is when ARGV[1] is "1".
var unpacedScript = redis.NewScript(`
local u = redis.call('HGET', KEYS[1], 'u')
if u == false then u = ARGV[1] end
if u ~= '1' then return 0 end
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`)

// calmScript counts a success and returns 1 while the key is calm, by
// Redis's clock, or by ARGV[1] when set (the tests' fleet clock).
var calmScript = redis.NewScript(`
local c = tonumber(redis.call('HGET', KEYS[1], 'c') or '0')
if c == 0 then return 0 end
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1e6 + tonumber(t[2])
end
if now >= c then return 0 end
redis.call('HINCRBY', KEYS[1], 'k', 1)
return 1`)

// loadScript returns the state, its version, the counts, and Redis's
// time.
var loadScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 's', 'v', 'n', 'k')
local t = redis.call('TIME')
return {h[1] or '', h[2] or '0', h[3] or '0', h[4] or '0', t[1], t[2]}`)

// commitScript writes a stepped state if its version is still ARGV[1],
// taking the counts the step carried in, releases the lease ARGV[9]
// holds on KEYS[2], and returns 1; 0 when another process wrote first.
var commitScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) == ARGV[9] then redis.call('DEL', KEYS[2]) end
local v = redis.call('HGET', KEYS[1], 'v') or '0'
if v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'v', tostring(tonumber(v) + 1), 'u', ARGV[5], 'c', ARGV[6], 'g', ARGV[7])
if ARGV[3] ~= '0' then redis.call('HINCRBY', KEYS[1], 'n', -tonumber(ARGV[3])) end
if ARGV[4] ~= '0' then redis.call('HINCRBY', KEYS[1], 'k', -tonumber(ARGV[4])) end
redis.call('PEXPIRE', KEYS[1], ARGV[8])
return 1`)

// snapshot is a key's hash as load read it.
type snapshot struct {
	raw  []byte
	v    string
	n, k int64
	now  time.Time // Redis's clock, or the tests' fleet clock
	read time.Time // when the reply came, on the process's clock
}

// state returns the snapshot's state: a new key's when it holds none, or
// one this version cannot read (the fleet starts the key afresh).
func (s *snapshot) state(cfg *pacecore.Config) pacecore.State {
	st := pacecore.New(cfg)
	if len(s.raw) > 0 && st.UnmarshalBinary(s.raw) != nil {
		st = pacecore.New(cfg)
	}
	return st
}

// load reads key's hash, and samples the fleet's clock from the call.
func (p *Pacer) load(ctx context.Context, key string) (snapshot, error) {
	sent := p.clock()
	res, err := p.run(ctx, loadScript, key)
	if err != nil {
		return snapshot{}, err
	}
	r, ok := res.([]any)
	if !ok || len(r) != 6 {
		return snapshot{}, errors.New("redispace: unexpected reply to the load script")
	}
	str := func(i int) string { s, _ := r[i].(string); return s }
	num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
	snap := snapshot{raw: []byte(str(0)), v: str(1), n: num(2), k: num(3), read: p.clock()}
	snap.now = time.Unix(num(4), num(5)*1000)
	p.fleet.sample(sent, snap.read, snap.now)
	if p.redisNow != nil {
		snap.now = p.redisNow()
	}
	return snap, nil
}

// handle is one key, open for one attempt: it implements pacecore.Handle
// over Redis. err keeps the last call's failure, for trip.
type handle struct {
	p    *Pacer
	key  string
	last snapshot // the state's last step read it
	err  error
}

func (h *handle) fail(err error) error {
	if err != nil {
		h.err = err
	}
	return err
}

func (h *handle) Unpaced() bool {
	fresh := "0"
	if h.p.cfg.InitialWindow <= 0 {
		fresh = "1"
	}
	res, err := h.p.run(context.Background(), unpacedScript, h.key, fresh, keyTTL.Milliseconds())
	return h.fail(err) == nil && res == int64(1)
}

func (h *handle) Calm() bool {
	var now string
	if h.p.redisNow != nil {
		now = strconv.FormatInt(h.p.redisNow().UnixMicro(), 10)
	}
	res, err := h.p.run(context.Background(), calmScript, h.key, now)
	return h.fail(err) == nil && res == int64(1)
}

func (h *handle) Sent() {
	_, err := bound(context.Background(), h.p.timeout(), func(ctx context.Context) (any, error) {
		return h.p.Client.HIncrBy(ctx, h.key, "n", 1).Result()
	})
	h.fail(err)
}

// lease takes key's lease, a short lock the fleet's processes take in
// turn around a step, so that their writes do not refuse each other; one
// whose holder died ends after the Pacer's Timeout. A process that finds
// it held looks again after leaseWait or so, for Timeout at most.
func (h *handle) lease(ctx context.Context) (string, error) {
	token := strconv.FormatUint(rand.Uint64(), 36)
	until := h.p.clock().Add(h.p.timeout())
	for {
		ok, err := bound(ctx, h.p.timeout(), func(ctx context.Context) (any, error) {
			// A call that outlives the bound runs on: it reads no
			// variable the loop writes.
			return h.p.Client.SetNX(ctx, h.key+leaseSuffix, token, h.p.timeout()).Result()
		})
		switch {
		case err != nil:
			return "", err
		case ok.(bool):
			return token, nil
		case h.p.clock().After(until):
			return "", errTimeout
		}
		if err := h.p.doSleep(ctx, time.Duration(float64(leaseWait)*(0.5+rand.Float64()))); err != nil {
			return "", err
		}
	}
}

// Step reads the state, steps it at Redis's time, and writes it back, with
// the key's lease held: one step at a time in the fleet (and in the
// process, which steps a key one step at a time under a lock of its own
// before it asks for the lease). The write still checks that no one wrote
// meanwhile, should a lease have run out, and steps again if one did.
func (h *handle) Step(ctx context.Context, ev pacecore.Event) (pacecore.Effects, error) {
	e := h.p.locks.Use(h.key)
	defer h.p.locks.Done(e)
	e.Value.Lock()
	defer e.Value.Unlock()
	dl := ev.Deadline
	for range commitRounds {
		token, err := h.lease(ctx)
		if err != nil {
			return pacecore.Effects{}, h.fail(err)
		}
		snap, err := h.p.load(ctx, h.key)
		if err != nil {
			return pacecore.Effects{}, h.fail(err)
		}
		st := snap.state(&h.p.cfg)
		ev.Sent, ev.OK = snap.n, snap.k
		if !dl.IsZero() {
			ev.Deadline = snap.now.Add(dl.Sub(snap.read)) // onto the fleet's clock
		}
		fx := st.Step(snap.now, ev)
		raw, _ := st.MarshalBinary()
		unpaced, calm := "0", int64(0)
		if st.Unpaced(snap.now) {
			unpaced = "1"
		}
		if st.Calm(snap.now) {
			calm = st.BucketEnd().UnixMicro()
		}
		res, err := h.p.runKeys(ctx, commitScript, []string{h.key, h.key + leaseSuffix}, snap.v, raw, snap.n, snap.k, unpaced, calm, st.Gen(), keyTTL.Milliseconds(), token)
		if err != nil {
			return pacecore.Effects{}, h.fail(err)
		}
		if res == int64(1) {
			h.last = snap
			return fx, nil
		}
	}
	return pacecore.Effects{}, h.fail(errors.New("redispace: the key's state kept changing under this process's steps"))
}

// Await waits for g: for a turn, until it is due on the process's clock
// (where the fleet's clock puts it), looking at the turns' generation
// halfway through a long wait and just before the turn; for a slot of
// slow start, a poll's interval, after which Wait asks again.
func (h *handle) Await(ctx context.Context, g pacecore.Grant) (bool, error) {
	if !g.Paced {
		return false, h.p.doSleep(ctx, time.Duration(float64(slotPoll)*(0.5+rand.Float64())))
	}
	due := h.last.read.Add(g.Wait) // g.Wait counts from the reply
	if at, ok := h.p.fleet.local(g.At); ok && h.p.redisNow == nil && h.p.now == nil {
		due = at
	}
	for {
		left := due.Sub(h.p.clock())
		if left > recheckAbove {
			left /= 2
		} else if left > goAhead {
			left -= goAhead
		}
		if left > 0 {
			if err := h.p.doSleep(ctx, left); err != nil {
				return false, err
			}
		}
		gen, err := bound(ctx, h.p.timeout(), func(ctx context.Context) (any, error) {
			return h.p.Client.HGet(ctx, h.key, "g").Uint64()
		})
		if err == nil && gen.(uint64) != g.Gen {
			return true, nil // void: take a new turn
		}
		if due.Sub(h.p.clock()) <= goAhead {
			// A failed look keeps to the wait it had.
			if rest := due.Sub(h.p.clock()); rest > 0 {
				return false, h.p.doSleep(ctx, rest)
			}
			return false, nil
		}
	}
}

func (h *handle) Close() {}
