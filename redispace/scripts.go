package redispace

import "github.com/redis/go-redis/v9"

// The state of a key is one Redis hash, changed only by these scripts, so
// that every change is atomic across the fleet. Times are Redis's own
// (TIME, in microseconds): the processes' clocks never meet.
//
// Fields: rate (requests per second; 0: not engaged, no pacing), tat (the
// theoretical arrival time of the next turn, GCRA), gen (the rate's
// generation, +1 on every cut or pause), wmax and cut (the rate cut from
// and when, for the cubic growth), and the measurement of the current
// bucket: since, sent, ok, with the smoothed rates measured and accepted.

// common is the prologue of every script: it reads the hash and rolls the
// measurement bucket over when a second has passed.
const common = `
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', key, 'rate', 'tat', 'gen', 'wmax', 'cut', 'since', 'sent', 'ok', 'measured', 'accepted')
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
local bucket = 1000000
if now - since >= bucket then
  local sec = (now - since) / 1000000
  if measured == 0 and accepted == 0 then
    measured, accepted = sent / sec, ok / sec
  else
    measured = 0.8 * sent / sec + 0.2 * measured
    accepted = 0.8 * ok / sec + 0.2 * accepted
  end
  since, sent, ok = now, 0, 0
end
`

// reserveScript takes a turn: ARGV[1] is the key's time to live in
// milliseconds. It returns the wait in microseconds, the generation,
// whether the key is engaged, and the theoretical arrival time it set (for
// cancelScript). Times are whole microseconds, exact in Lua's numbers.
var reserveScript = redis.NewScript(common + `
sent = sent + 1
local wait = 0
if rate > 0 then
  local start = math.max(now, tat)
  wait = start - now
  tat = start + math.floor(1000000 / rate)
end
redis.call('HSET', key, 'tat', tat, 'since', since, 'sent', sent, 'ok', ok, 'measured', measured, 'accepted', accepted)
redis.call('PEXPIRE', key, ARGV[1])
return {wait, gen, rate > 0 and 1 or 0, tat}
`)

// feedbackScript learns from an outcome: ARGV[1] is "ok" or "throttled",
// ARGV[2] the generation the attempt was paced at, ARGV[3] the wait the
// server asked for in microseconds (-1: none), ARGV[4] the lowest rate,
// ARGV[5] the time to live. It returns the rate in force.
//
// A throttle of an attempt paced at the rate in force (or before any)
// cuts the rate to 0.7 times it, the first cut at least as far as 0.9
// times the rate the fleet is accepted at, later cuts no further than
// that; a throttle of an attempt paced before the last cut cuts nothing:
// one cut answers one burst, whichever process saw it. Successes grow the
// rate back along CUBIC's curve, never beyond 1.25 times the rate the
// fleet was measured sending at.
var feedbackScript = redis.NewScript(common + `
local class, attemptGen, hint, minRate = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local elapsed = math.max((now - since) / 1000000, 0.01)
local acc = accepted
if ok >= 8 then acc = math.max(acc, ok / elapsed) end
if class == 'ok' then
  ok = ok + 1
  if rate > 0 then
    local tt = (now - cut) / 1000000
    local k = (wmax * 0.3 / 0.4) ^ (1 / 3)
    local cubic = 0.4 * (tt - k) ^ 3 + wmax
    local cap = math.max(rate, 1.25 * math.max(measured, sent / elapsed))
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
  wmax, cut, gen, rate = base, now, gen + 1, new
  tat = now + math.floor(1000000 / rate)
end
if hint >= 0 then
  if rate == 0 then rate = math.max(measured, minRate) end
  if now + hint > tat then tat = now + math.floor(hint) end
  gen = gen + 1
end
redis.call('HSET', key, 'rate', rate, 'tat', tat, 'gen', gen, 'wmax', wmax, 'cut', cut,
  'since', since, 'sent', sent, 'ok', ok, 'measured', measured, 'accepted', accepted)
redis.call('PEXPIRE', key, ARGV[5])
return tostring(rate)
`)

// cancelScript gives back a turn that will not be used, if no later one
// was handed out since: ARGV[1] is the tat the turn set.
var cancelScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'rate', 'tat')
local rate, tat = tonumber(h[1]) or 0, tonumber(h[2]) or 0
if rate > 0 and tat == tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'tat', tat - math.floor(1000000 / rate))
end
return 0
`)
