package redispace

import "github.com/redis/go-redis/v9"

// The state of a key is one Redis hash, changed only by these scripts, so
// that every change is atomic across the fleet. Times are Redis's own
// (TIME, in whole microseconds, exact in Lua's numbers): the processes'
// clocks never meet.
//
// Fields:
//   - rate: the rate in force, requests per second; 0 while the key is not
//     engaged (no pacing);
//   - the schedule, a queue of numbered turns drained at the rate in
//     force: tail, the number the next turn gets; head, how far the queue
//     was drained at headAt (a turn may go once head reaches its number);
//     headAt is in the future while the key is paused. As GCRA, a turn
//     of an idle key goes at once and the next one interval later, but a
//     turn taken at one rate is served at the rate in force when it comes:
//     a cut slows the whole queue, growth speeds it up;
//   - gen: the rate's generation, +1 on every cut or pause;
//   - wmax, cut, win: the rate cut from, which the cubic growth climbs
//     back to, when the cut was, and the seconds the growth takes back to
//     it;
//   - strike: when a lone throttle was let pass (0: none since the cut);
//   - slow start, as package pace's Pacer has it for a key new to it: ss
//     (1 while in it), ssEnd (when it ends at the latest), inflight (the
//     attempts holding a slot) and window (the slots);
//   - the measurement of the current one-second bucket: since, sent, ok,
//     the smoothed rates measured (sent) and accepted, and prevOk, the
//     rate accepted over the bucket before (-1: none), from which the
//     rate accepted over the last second is read at any time (a sliding
//     window, as sliding-window limiters count).

// common is the prologue of every script: it reads the hash and rolls the
// measurement bucket over when a second has passed.
const common = `
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', key, 'rate', 'head', 'gen', 'wmax', 'cut', 'since', 'sent', 'ok', 'measured', 'accepted',
  'ss', 'ssEnd', 'inflight', 'window', 'win', 'strike', 'prevOk', 'headAt', 'tail')
local fresh = h[1] == false
local rate = tonumber(h[1]) or 0
local head = tonumber(h[2]) or 0
local gen = tonumber(h[3]) or 0
local wmax = tonumber(h[4]) or 0
local cut = tonumber(h[5]) or 0
local since = tonumber(h[6]) or now
local sent = tonumber(h[7]) or 0
local ok = tonumber(h[8]) or 0
local measured = tonumber(h[9]) or 0
local accepted = tonumber(h[10]) or 0
local ss = tonumber(h[11]) or 0
local ssEnd = tonumber(h[12]) or 0
local inflight = tonumber(h[13]) or 0
local window = tonumber(h[14]) or 0
local win = tonumber(h[15]) or 0
local strike = tonumber(h[16]) or 0
local prevOk = tonumber(h[17]) or -1
local headAt = tonumber(h[18]) or now
local tail = tonumber(h[19]) or 0
if now - since >= 1000000 then
  local sec = (now - since) / 1000000
  prevOk = -1
  if sec < 2 then prevOk = ok / sec end
  if measured == 0 and accepted == 0 then
    measured, accepted = sent / sec, ok / sec
  else
    measured = 0.8 * sent / sec + 0.2 * measured
    accepted = 0.8 * ok / sec + 0.2 * accepted
  end
  since, sent, ok = now, 0, 0
end
if ss == 1 and now >= ssEnd then ss = 0 end
local function save()
  redis.call('HSET', key, 'rate', rate, 'head', head, 'headAt', headAt, 'tail', tail, 'gen', gen, 'wmax', wmax, 'cut', cut, 'since', since,
    'sent', sent, 'ok', ok, 'measured', measured, 'accepted', accepted, 'ss', ss, 'ssEnd', ssEnd,
    'inflight', inflight, 'window', window, 'win', win, 'strike', strike, 'prevOk', prevOk)
end
-- drain moves the head on at the rate in force up to now, never past the
-- tail: an idle key saves up no turns.
local function drain()
  if rate > 0 and now > headAt then
    head = math.min(tail, head + rate * (now - headAt) / 1000000)
    headAt = now
  end
end
-- waitFor is how long turn n waits, in microseconds, the pause included.
local function waitFor(n)
  local w = math.max(headAt - now, 0)
  if n - head > 1e-6 then w = w + (n - head) / rate * 1000000 end
  return math.floor(w)
end
-- engage starts the schedule: every earlier turn counts as served.
local function engage()
  head, headAt = tail, now
end
`

// reserveScript takes a turn: ARGV[1] is the key's time to live in
// milliseconds, ARGV[2] the initial window of slow start (0: none). It
// returns the wait in microseconds (-1: no slot of slow start is free,
// ask again shortly), the generation, whether the turn holds a slot of
// slow start, and the turn's number in the schedule (-1: none; for
// checkScript and cancelScript).
var reserveScript = redis.NewScript(common + `
local initial = tonumber(ARGV[2])
if fresh and initial > 0 then
  ss, ssEnd, inflight, window = 1, now + 1000000, 0, initial
end
local wait, slot, n = 0, 0, -1
if ss == 1 and rate == 0 then
  if inflight >= window then
    save()
    redis.call('PEXPIRE', key, ARGV[1])
    return {-1, gen, 0, -1}
  end
  inflight, slot = inflight + 1, 1
elseif rate > 0 then
  drain()
  n, tail = tail, tail + 1
  wait = waitFor(n)
end
sent = sent + 1
save()
redis.call('PEXPIRE', key, ARGV[1])
return {wait, gen, slot, n}
`)

// checkScript tells a turn that waited how much longer it waits, at the
// rate in force now (0: go): ARGV[1] is its number, ARGV[2] the key's time
// to live. It returns that wait in microseconds and the generation.
var checkScript = redis.NewScript(common + `
if rate == 0 then return {0, gen} end
drain()
save()
redis.call('PEXPIRE', key, ARGV[2])
return {waitFor(tonumber(ARGV[1])), gen}
`)

// feedbackScript learns from an outcome: ARGV[1] is "ok", "throttled" or
// "other", ARGV[2] the generation the attempt was paced at, ARGV[3] the
// wait the server asked for in microseconds (-1: none), ARGV[4] the
// lowest rate, ARGV[5] the time to live, ARGV[6] 1 if the attempt held a
// slot of slow start. It returns the rate in force.
//
// The first throttle of a key not engaged engages it, at 0.7 times the
// rate the fleet was sending at (over a tenth of a second at least, so
// that slow start's first burst does not read as a huge rate) or 0.9
// times the rate it is accepted at, whichever is lower. Once it is
// engaged, a throttle of an attempt paced at the rate in force cuts if it
// is the second within a strike window (a second, or 20 intervals at
// slow rates): a lone one is taken for jitter, two turns the schedule
// spaced by the interval that reached the server closer together after
// the processes' timers and the network (a limiter without burst, such as
// nginx's limit_req, refuses those), and a cut for it costs seconds of
// growth. Such a cut takes the rate to 0.9 times it, or, when the fleet
// is accepted at a rate below that (over the last second), down to that
// rate but by half at most. A
// throttle of an attempt paced before the last cut cuts nothing: one cut
// answers one burst, whichever process saw it. Successes grow the rate
// back along CUBIC's curve, scaled to the rate: it returns to the rate
// cut from in (drop / (0.15 × that rate))^(1/3) seconds (1.26 s after a
// cut to 0.7 times, 0.87 s after one to 0.9), and never goes beyond 1.25
// times the rate the fleet is measured sending at (over the last whole
// second, or the current one once it counts 8 turns). In slow start an
// answer opens one slot more, and a throttle ends it.
var feedbackScript = redis.NewScript(common + `
local class, attemptGen, hint, minRate = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if ARGV[6] == '1' and inflight > 0 then
  inflight = inflight - 1
  if class == 'ok' then window = window + 1 end
end
local elapsed = math.max((now - since) / 1000000, 0.01)
-- acc: the rate accepted over the last second, the bucket before weighted
-- by the part of it still in that second; over the first bucket, the
-- bucket so far once it counts 8 successes, else the smoothed rate.
local acc = accepted
if prevOk >= 0 then
  acc = ok + prevOk * math.max(1 - elapsed, 0)
elseif ok >= 8 then
  acc = math.max(acc, ok / elapsed)
end
if class == 'ok' then
  ok = ok + 1
  if rate > 0 then
    local tt = (now - cut) / 1000000
    local cubic = 0.15 * wmax * (tt - win) ^ 3 + wmax
    local sending = measured
    if sent >= 8 then sending = math.max(sending, sent / elapsed) end
    local cap = math.max(rate, 1.25 * sending)
    if cubic > rate then
      drain()
      rate = math.min(cubic, cap)
    end
  end
elseif class == 'throttled' and rate > 0 and attemptGen == gen and now - strike > math.max(1000000, 20000000 / rate) then
  -- A lone throttle of a key engaged is taken for the jitter of the
  -- fleet's clocks (two turns sent closer than their interval); a second
  -- within the strike window cuts.
  strike = now
elseif class == 'throttled' and (rate == 0 or attemptGen == gen) then
  strike = 0
  local base = rate
  if rate == 0 then base = math.max(measured, sent / math.max(elapsed, 0.1)) end
  local new = base * 0.9
  if rate == 0 then new = base * 0.7 end
  if acc > 0 then
    if rate == 0 then
      new = math.min(new, 0.9 * acc)
    else
      new = math.min(new, math.max(acc, 0.5 * base))
    end
  end
  new = math.max(new, minRate)
  win = (math.max(base - new, 0) / (0.15 * base)) ^ (1 / 3)
  if rate == 0 then engage() else drain() end
  wmax, cut, gen, rate, ss = base, now, gen + 1, new, 0
end
if hint >= 0 then
  if rate == 0 then
    engage()
    rate = math.max(measured, minRate)
    -- Growth starts from here: with no cut yet, CUBIC's curve would
    -- otherwise be scaled to a rate of 0 and never rise.
    wmax, cut, win = rate, now, 0
  else
    drain()
  end
  if now + hint > headAt then headAt = now + math.floor(hint) end
  gen, ss = gen + 1, 0
end
save()
redis.call('PEXPIRE', key, ARGV[5])
return tostring(rate)
`)

// cancelScript gives back a turn that will not be used: its slot of slow
// start (ARGV[2] is 1 if it held one), or its place in the schedule if no
// later turn was taken since (ARGV[1] is its number, -1 for none).
var cancelScript = redis.NewScript(common + `
local n = tonumber(ARGV[1])
if ARGV[2] == '1' and inflight > 0 then
  inflight = inflight - 1
elseif rate > 0 and n >= 0 and tail == n + 1 then
  drain()
  tail = n
  head = math.min(head, tail)
else
  return 0
end
save()
return 0
`)
