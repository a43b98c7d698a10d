package redispace

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A key's state in Redis is one hash, whose fields are:
//
//   - s: the decision core's state (package pace's, encoded), and v its
//     version, one more with every write of s;
//   - m, g, i, l and x: mirrors of the state, written with it: its mode
//     (0 idle, 1 slow start, 2 paced, 3 held, or paced with no success
//     yet: their waits past a deadline are held), its turns' generation,
//     slow start's attempts holding a slot, its slots, and when it ends
//     at the latest (µs on Redis's clock; 0: not begun). An attempt of an
//     idle key goes without a step, as in package pace's Pacer; one
//     waiting for a turn learns from g alone whether the turn is void,
//     and one waiting for a slot or for a hold to end, from the others,
//     whether to look again (see readyScript);
//   - n and k: the attempts sent and the successes counted without a step
//     since the last one, carried into the next step (as pace's Pacer
//     counts them without its lock).
//
// Go steps the core; Lua only counts, reads and writes. A step reads the
// state with its version (load), steps it, and writes it back if no other
// process wrote it meanwhile (save, a compare-and-set); else save returns
// the state as it is now, and the step is made again from it. The hash
// expires keyTTL after its last use. The steps' time is Redis's clock
// (TIME), which load and save read: the processes' clocks never meet.

// stateReply is the tail of load and save's replies when the caller must
// step: {1, version, state, sent, ok, now in µs on Redis's clock, leased}
// (leased: 1 when the caller holds the key's lease; see commit). It also
// reads the lease: field L, "token until" (µs on Redis's clock).
const stateReply = `
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function state(leased)
  local h = redis.call('HMGET', KEYS[1], 'v', 's', 'n', 'k')
  return {1, tonumber(h[1]) or 0, h[2] or '', tonumber(h[3]) or 0, tonumber(h[4]) or 0, clock(), leased or 0}
end
local function leasedToOther(token)
  local l = redis.call('HGET', KEYS[1], 'L')
  if not l then return false end
  local holder, till = string.match(l, '^(%S+) (%d+)$')
  return holder ~= token and tonumber(till) > clock()
end
`

// loadScript reads a key's state for a step, or counts an attempt that
// needs none. ARGV[1] is what the caller does: "send", an attempt that
// goes at once, unpaced and counted, if the key is idle (it returns {0});
// "ok", a success, counted before its step (which the caller may then
// find it need not make: see Turn.Done); "read", a step; "lease", a step
// that takes the key's lease for ARGV[3] (a token) for ARGV[4]
// microseconds, unless another holds it. ARGV[2] is the key's time to
// live in milliseconds.
var loadScript = redis.NewScript(stateReply + `
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[1] == 'send' and redis.call('HGET', KEYS[1], 'm') == '0' then
  redis.call('HINCRBY', KEYS[1], 'n', 1)
  return {0}
end
if ARGV[1] == 'ok' then redis.call('HINCRBY', KEYS[1], 'k', 1) end
if ARGV[1] == 'lease' then
  if leasedToOther(ARGV[3]) then return state(0) end
  redis.call('HSET', KEYS[1], 'L', string.format('%s %.0f', ARGV[3], clock() + tonumber(ARGV[4])))
  return state(1)
end
return state()
`)

// saveScript writes a stepped state if its version is still ARGV[1]:
// ARGV[2] the state, ARGV[3] and ARGV[4] its mode and generation,
// ARGV[5] and ARGV[6] the counts n and k the step carried in (taken off
// them), ARGV[7] attempts the step sent (added to n), ARGV[8] the time to
// live, ARGV[9], ARGV[10] and ARGV[11] slow start's slots held, slots and
// end, ARGV[12] the writer's lease token (empty: none). It returns {0},
// or, when another process wrote first or holds the lease, the state now.
// A write releases the writer's lease.
var saveScript = redis.NewScript(stateReply + `
if leasedToOther(ARGV[12]) then return state() end
local v = tonumber(redis.call('HGET', KEYS[1], 'v')) or 0
if v ~= tonumber(ARGV[1]) then return state() end
if ARGV[12] ~= '' then redis.call('HDEL', KEYS[1], 'L') end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'v', v + 1, 'm', ARGV[3], 'g', ARGV[4], 'i', ARGV[9], 'l', ARGV[10], 'x', ARGV[11])
local dn = tonumber(ARGV[7]) - tonumber(ARGV[5])
if dn ~= 0 then redis.call('HINCRBY', KEYS[1], 'n', dn) end
if tonumber(ARGV[6]) ~= 0 then redis.call('HINCRBY', KEYS[1], 'k', -tonumber(ARGV[6])) end
redis.call('PEXPIRE', KEYS[1], ARGV[8])
return {0}
`)

// readyScript tells an attempt that waits whether to look again, with a
// step (1), or to wait on (0): ARGV[1] = "slot", one waiting for a slot
// of slow start, while the key is in slow start with no slot free and
// its time limit to come; "hold", one waiting for a hold to end, while
// the key is held. A poll is one read, not a step, so that the waiters of
// a fleet do not contend for the key's state while nothing changed for
// them: stepping at each poll, a hundred waiters of ten processes
// refused each other's compare-and-set until the processes fell back.
var readyScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'm', 'i', 'l', 'x')
if ARGV[1] == 'slot' and h[1] == '1' and (tonumber(h[2]) or 0) >= (tonumber(h[3]) or 0) then
  local t = redis.call('TIME')
  local x = tonumber(h[4]) or 0
  if x == 0 or tonumber(t[1]) * 1000000 + tonumber(t[2]) < x then return 0 end
end
if ARGV[1] == 'hold' and h[1] == '3' then return 0 end
return 1
`)

// ready runs readyScript on key for a waiter of what ("slot" or "hold").
func (p *Pacer) ready(ctx context.Context, key, what string) (bool, error) {
	return p.runFlag(ctx, readyScript, key, what)
}

// runFlag runs a script whose reply is 1 or 0, and reports whether it
// was 1.
func (p *Pacer) runFlag(ctx context.Context, script *redis.Script, key string, args ...any) (bool, error) {
	res, err := p.run(ctx, script, key, args...)
	if err != nil {
		return false, err
	}
	n, ok := res.(int64)
	if !ok || n < 0 || n > 1 {
		return false, fmt.Errorf("redispace: unexpected reply %v", res)
	}
	return n == 1, nil
}

// snapshot is a key's state as load or save read it.
type snapshot struct {
	version  int64
	state    []byte
	sent, ok int64     // counted without a step since the last
	now      time.Time // the fleet's clock when it was read
	read     time.Time // the process's clock when the reply came
	leased   bool      // the reader took the key's lease (see commit)
}

// Operations of loadScript.
const (
	opSend  = "send"
	opOK    = "ok"
	opRead  = "read"
	opLease = "lease"
)

// load runs loadScript for op on key: done when the script made the
// step itself, else the state to step.
func (p *Pacer) load(ctx context.Context, key, op string) (snap snapshot, done bool, err error) {
	sent := time.Now()
	res, err := p.run(ctx, loadScript, key, op, keyTTL.Milliseconds())
	if err != nil {
		return snapshot{}, false, err
	}
	return p.readSnapshot(res, sent)
}

// readSnapshot reads load's or save's reply to a call sent at sent (on
// the process's clock; zero: not timed): done for {0}.
func (p *Pacer) readSnapshot(res any, sent time.Time) (snapshot, bool, error) {
	v, ok := res.([]any)
	if ok && len(v) == 1 && v[0] == int64(0) {
		return snapshot{}, true, nil
	}
	if !ok || len(v) != 7 || v[0] != int64(1) {
		return snapshot{}, false, fmt.Errorf("redispace: unexpected reply %v", res)
	}
	var s snapshot
	var now, leased int64
	for i, dst := range []*int64{&s.version, nil, &s.sent, &s.ok, &now, &leased} {
		if dst == nil {
			continue
		}
		n, ok := v[i+1].(int64)
		if !ok {
			return snapshot{}, false, fmt.Errorf("redispace: unexpected reply %v", res)
		}
		*dst = n
	}
	blob, ok := v[2].(string)
	if !ok {
		return snapshot{}, false, fmt.Errorf("redispace: unexpected reply %v", res)
	}
	s.state, s.now, s.read, s.leased = []byte(blob), time.UnixMicro(now), time.Now(), leased == 1
	if p.redisNow != nil {
		s.now = p.redisNow()
	} else if !sent.IsZero() {
		p.fleet.sample(sent, s.read, s.now)
	}
	return s, false, nil
}

// countSent counts an attempt sent without a step.
func (p *Pacer) countSent(ctx context.Context, key string) error {
	_, err := p.run(ctx, countScript, key)
	return err
}

// countScript counts an attempt sent without a step.
var countScript = redis.NewScript(`return redis.call('HINCRBY', KEYS[1], 'n', 1)`)

// turnScript looks at a turn of generation ARGV[1] (a decimal string) as
// its attempt waits: void (0) if the turns' generation changed since it
// was handed out, else 1; with ARGV[2] = "go", a turn that is not void
// is counted as sent.
var turnScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'g') ~= ARGV[1] then return 0 end
if ARGV[2] == 'go' then redis.call('HINCRBY', KEYS[1], 'n', 1) end
return 1
`)

// turnValid reports whether key's turns of generation gen are still
// valid; with send, a valid one is counted as sent (its attempt goes).
func (p *Pacer) turnValid(ctx context.Context, key string, gen uint64, send bool) (bool, error) {
	op := "look"
	if send {
		op = "go"
	}
	return p.runFlag(ctx, turnScript, key, strconv.FormatUint(gen, 10), op)
}
