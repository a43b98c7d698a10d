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
//   - tat: the theoretical arrival time of the next turn (GCRA);
//   - gen: the rate's generation, +1 on every cut or pause;
//   - wmax, cut: the rate cut from and when, for the cubic growth;
//   - slow start, as package pace's Pacer has it for a key new to it: ss
//     (1 while in it), ssEnd (when it ends at the latest), inflight (the
//     attempts holding a slot) and window (the slots);
//   - the measurement of the current one-second bucket: since, sent, ok,
//     and the smoothed rates measured (sent) and accepted.

// common is the prologue of every script: it reads the hash and rolls the
// measurement bucket over when a second has passed.
const common = `
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', key, 'rate', 'tat', 'gen', 'wmax', 'cut', 'since', 'sent', 'ok', 'measured', 'accepted',
  'ss', 'ssEnd', 'inflight', 'window')
local fresh = h[1] == false
local rate = tonumber(h[1]) or 0
local tat = tonumber(h[2]) or 0
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
if now - since >= 1000000 then
  local sec = (now - since) / 1000000
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
  redis.call('HSET', key, 'rate', rate, 'tat', tat, 'gen', gen, 'wmax', wmax, 'cut', cut, 'since', since,
    'sent', sent, 'ok', ok, 'measured', measured, 'accepted', accepted, 'ss', ss, 'ssEnd', ssEnd,
    'inflight', inflight, 'window', window)
end
`

// reserveScript takes a turn: ARGV[1] is the key's time to live in
// milliseconds, ARGV[2] the initial window of slow start (0: none). It
// returns the wait in microseconds (-1: no slot of slow start is free,
// ask again shortly), the generation, whether the turn holds a slot of
// slow start, and the theoretical arrival time it set (for cancelScript).
var reserveScript = redis.NewScript(common + `
local initial = tonumber(ARGV[2])
if fresh and initial > 0 then
  ss, ssEnd, inflight, window = 1, now + 1000000, 0, initial
end
local wait, slot = 0, 0
if ss == 1 and rate == 0 then
  if inflight >= window then
    save()
    redis.call('PEXPIRE', key, ARGV[1])
    return {-1, gen, 0, tat}
  end
  inflight, slot = inflight + 1, 1
elseif rate > 0 then
  local start = math.max(now, tat)
  wait = start - now
  tat = start + math.floor(1000000 / rate)
end
sent = sent + 1
save()
redis.call('PEXPIRE', key, ARGV[1])
return {wait, gen, slot, tat}
`)

// feedbackScript learns from an outcome: ARGV[1] is "ok", "throttled" or
// "other", ARGV[2] the generation the attempt was paced at, ARGV[3] the
// wait the server asked for in microseconds (-1: none), ARGV[4] the
// lowest rate, ARGV[5] the time to live, ARGV[6] 1 if the attempt held a
// slot of slow start. It returns the rate in force.
//
// A throttle of an attempt paced at the rate in force (or before the key
// engaged) cuts the rate to 0.7 times it, the first cut at least as far
// as 0.9 times the rate the fleet is still accepted at, later cuts no
// further than that; a throttle of an attempt paced before the last cut
// cuts nothing: one cut answers one burst, whichever process saw it.
// Successes grow the rate back along CUBIC's curve, never beyond 1.25
// times the rate the fleet was measured sending at over the last whole
// second. In slow start an answer opens one slot more, and a throttle
// ends it.
var feedbackScript = redis.NewScript(common + `
local class, attemptGen, hint, minRate = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if ARGV[6] == '1' and inflight > 0 then
  inflight = inflight - 1
  if class == 'ok' then window = window + 1 end
end
local elapsed = math.max((now - since) / 1000000, 0.01)
local acc = accepted
if ok >= 8 then acc = math.max(acc, ok / elapsed) end
if class == 'ok' then
  ok = ok + 1
  if rate > 0 then
    local tt = (now - cut) / 1000000
    local k = (wmax * 0.3 / 0.4) ^ (1 / 3)
    local cubic = 0.4 * (tt - k) ^ 3 + wmax
    local cap = math.max(rate, 1.25 * measured)
    if cubic > rate then rate = math.min(cubic, cap) end
  end
elseif class == 'throttled' and (rate == 0 or attemptGen == gen) then
  local base = rate
  if rate == 0 then base = math.max(measured, sent / elapsed) end
  local new = base * 0.7
  if acc > 0 then
    if rate == 0 then new = math.min(new, 0.9 * acc) else new = math.max(new, 0.9 * math.min(acc, base)) end
  end
  new = math.max(new, minRate)
  wmax, cut, gen, rate, ss = base, now, gen + 1, new, 0
  tat = now + math.floor(1000000 / rate)
end
if hint >= 0 then
  if rate == 0 then rate = math.max(measured, minRate) end
  if now + hint > tat then tat = now + math.floor(hint) end
  gen, ss = gen + 1, 0
end
save()
redis.call('PEXPIRE', key, ARGV[5])
return tostring(rate)
`)

// cancelScript gives back a turn that will not be used: its slot of slow
// start (ARGV[2] is 1 if it held one), or its place in the schedule if no
// later turn was handed out since (ARGV[1] is the tat the turn set).
var cancelScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'rate', 'tat', 'inflight')
local rate, tat, inflight = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 0
if ARGV[2] == '1' and inflight > 0 then
  redis.call('HSET', KEYS[1], 'inflight', inflight - 1)
elseif rate > 0 and tat == tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'tat', tat - math.floor(1000000 / rate))
end
return 0
`)
