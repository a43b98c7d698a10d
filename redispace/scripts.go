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
//   - gen: the rate's generation, +1 on every cut or pause, and when the
//     test of shedding changes the rate or the key goes back to idle;
//   - wmax, cut, win: the rate cut from, which the cubic growth climbs
//     back to, when the cut was, and the seconds the growth takes back to
//     it;
//   - strike: when a lone throttle was let pass (0: none since the cut);
//   - slow start, as package pace's Pacer has it for a key new to it: ss
//     (1 while in it), ssEnd (when it ends at the latest), inflight (the
//     attempts holding a slot) and window (the slots);
//   - the measurement of the current one-second bucket: since, sent, ok,
//     refused, the smoothed rates measured (sent) and accepted, and
//     prevOk, the rate accepted over the bucket before (-1: none), from
//     which the rate accepted over the last second is read at any time (a
//     sliding window, as sliding-window limiters count); prevOkN and
//     prevRef, that bucket's successes and refusals; sends, the turns
//     taken since the key's state began;
//   - susp: an idle key's CUSUM of its answers (see suspect in
//     feedbackScript; absent: a new key's, coldSuspicion);
//   - share: the share of refusals found not to depend on the rate (0:
//     none), and the chain of cuts under the test of shedding, read and
//     written by feedbackScript alone: chainRate (0: no chain), chainGen,
//     lowRate, limit, hiN/hiK and loN/loK (outcomes and refusals before
//     the chain's first cut and at its low rate), deep (the second
//     stage), epN/epK (since the last cut), at and atSent (when the
//     test's stage began, and sends then), and the curve saved by the
//     second stage (svRate, svWmax, svCut, svWin);
//   - outages, also feedbackScript's alone: okOnce (1 once anything was
//     accepted), lastOk (the last success, or the key's engaging), cutsOk
//     (cuts since), stAcc and stAfter (the rate accepted before the
//     streak of cuts, and okOnce then), oBase (the rate its first cut
//     set) and holding (1 while the rate is held, nothing ever
//     accepted).

// common is the prologue of every script: it reads the hash and rolls the
// measurement bucket over when a second has passed.
const common = `
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local fields = {'rate', 'head', 'gen', 'wmax', 'cut', 'since', 'sent', 'ok', 'measured', 'accepted',
  'ss', 'ssEnd', 'inflight', 'window', 'win', 'strike', 'prevOk', 'headAt', 'tail',
  'refused', 'prevRef', 'prevOkN', 'sends', 'share', 'susp', 'okOnce'}
local h = redis.call('HMGET', key, unpack(fields))
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
local refused = tonumber(h[20]) or 0
local prevRef = tonumber(h[21]) or 0
local prevOkN = tonumber(h[22]) or 0
local sends = tonumber(h[23]) or 0
local share = tonumber(h[24]) or 0
-- A new key's sum starts at 4.6 - 3 ln 2: three refusals in a row among
-- its first answers engage it (see suspect in feedbackScript).
local susp = tonumber(h[25]) or 2.5205584583201643
local okOnce = tonumber(h[26]) or 0
if now - since >= 1000000 then
  local sec = (now - since) / 1000000
  prevOk, prevOkN, prevRef = -1, 0, 0
  if sec < 2 then prevOk, prevOkN, prevRef = ok / sec, ok, refused end
  -- Idle, the share of refusals found not to depend on the rate follows
  -- buckets refused less often down (only down: a limit's refusals, as
  -- they grow, would pass for it), and is forgotten once negligible.
  if share > 0 and rate == 0 and ok + refused >= 16 then
    share = math.min(share, 0.2 * share + 0.8 * refused / (ok + refused))
    if share < 0.001 then share = 0 end
  elseif share == 0 and rate == 0 and ok + refused >= 32 and refused > 0 and refused <= 0.25 * (ok + refused) then
    -- An idle key's bucket refused no more than a quarter: refusals that
    -- engage nothing (see suspect), the share found not to depend on the
    -- rate, as package pace's idleBucket takes it. A key that met 10 %
    -- shedding and then a limit cut on every random refusal without it.
    share = refused / (ok + refused)
  end
  if measured == 0 and accepted == 0 then
    measured, accepted = sent / sec, ok / sec
  else
    measured = 0.8 * sent / sec + 0.2 * measured
    accepted = 0.8 * ok / sec + 0.2 * accepted
  end
  since, sent, ok, refused = now, 0, 0, 0
end
if ss == 1 and now >= ssEnd then ss = 0 end
-- changed appends to args each of names whose value in vals differs from
-- the one read (was), so that a script writes only what it changed: an
-- attempt of an idle key changes a few counters of some fifty fields.
local function changed(args, names, was, vals)
  for i = 1, #names do
    if was[i] == false or tonumber(was[i]) ~= vals[i] then
      args[#args + 1] = names[i]
      args[#args + 1] = vals[i]
    end
  end
  return args
end
local function save(more)
  local args = changed(more or {}, fields, h, {rate, head, gen, wmax, cut, since, sent, ok, measured, accepted,
    ss, ssEnd, inflight, window, win, strike, prevOk, headAt, tail,
    refused, prevRef, prevOkN, sends, share, susp, okOnce})
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
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

// queue gives reserveScript and cancelScript the turns given back from
// the middle of the queue (see cancelScript).
const queue = `
-- freeTurns returns the turns given back from the middle of the queue
-- that are still to come (field free, numbers separated by spaces).
local function freeTurns()
  local out = {}
  local s = redis.call('HGET', key, 'free')
  if s then
    for m in string.gmatch(s, '%S+') do
      local v = tonumber(m)
      if v and v > head and v < tail then out[#out + 1] = v end
    end
  end
  return out
end
local function setFree(list)
  if #list == 0 then
    redis.call('HDEL', key, 'free')
  else
    redis.call('HSET', key, 'free', table.concat(list, ' '))
  end
end
`

// reserveScript takes a turn: ARGV[1] is the key's time to live in
// milliseconds, ARGV[2] the initial window of slow start (0: none),
// ARGV[3] the longest the caller can wait in microseconds (-1: any). It
// returns the wait in microseconds (-1: no slot of slow start is free,
// ask again shortly; -2: the turn would come past the caller's deadline,
// and none was taken; -3: so would it, but the rate is held through an
// outage, ask again later), the generation, whether the turn holds a
// slot of slow start (for -2 and -3: the wait), and the turn's number in
// the schedule (-1: none; for checkScript and cancelScript).
var reserveScript = redis.NewScript(common + queue + `
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
  -- A turn given back from the middle of the queue (see cancelScript) is
  -- taken first, while it is still to come; then the tail.
  local free, kept, take = freeTurns(), {}, nil
  for _, m in ipairs(free) do
    if take == nil or m < take then
      if take ~= nil then kept[#kept + 1] = take end
      take = m
    else
      kept[#kept + 1] = m
    end
  end
  wait = waitFor(take or tail)
  local within = tonumber(ARGV[3]) or -1
  if within >= 0 and wait > within then
    -- Past the caller's deadline: no turn taken (given back later, it
    -- would stay spent whenever another was taken meanwhile). While the
    -- rate is held through an outage (see feedbackScript), the wait is
    -- a probe's, no forecast: the caller asks again until the hold ends.
    save()
    if redis.call('HGET', key, 'holding') == '1' then return {-3, gen, wait, -1} end
    return {-2, gen, wait, -1}
  end
  if take ~= nil then
    n = take
    setFree(kept)
  else
    n, tail = tail, tail + 1
  end
end
sent, sends = sent + 1, sends + 1
save()
redis.call('PEXPIRE', key, ARGV[1])
return {wait, gen, slot, n}
`)

// checkScript tells a turn that waited how much longer it waits, at the
// rate in force now (0: go; -1: the key restarted in slow start, take a
// slot instead): ARGV[1] is its number, ARGV[2] the key's time to live.
// It returns that wait in microseconds and the generation.
var checkScript = redis.NewScript(common + `
if rate == 0 and ss == 1 then return {-1, gen} end
if rate == 0 then return {0, gen} end
drain()
save()
redis.call('PEXPIRE', key, ARGV[2])
return {waitFor(tonumber(ARGV[1])), gen}
`)

// binomial gives the scripts the binomial tails of package pace's test
// of shedding: atLeast(k, n, p) is the probability that a share p
// refuses k or more of n outcomes, atMost(k, n, p) k or fewer. The sums
// run from k away from the mean, so that the terms fall, until they no
// longer add to the sum; the log-factorials are exact sums below 16 and
// Stirling's series (to 1/(360 z³), within 1e-10) above.
const binomial = `
local function lf(x)
  if x < 16 then
    local s = 0
    for i = 2, x do s = s + math.log(i) end
    return s
  end
  local z = x + 1
  return (z - 0.5) * math.log(z) - z + 0.91893853320467274 + 1 / (12 * z) - 1 / (360 * z * z * z)
end
local function binomSum(k, n, p, step)
  local term = math.exp(lf(n) - lf(k) - lf(n - k) + k * math.log(p) + (n - k) * math.log(1 - p))
  local sum, i = 0, k
  while i >= 0 and i <= n and term > 1e-12 * sum do
    sum = sum + term
    if step > 0 then
      term = term * (n - i) / (i + 1) * p / (1 - p)
    else
      term = term * i / (n - i + 1) * (1 - p) / p
    end
    i = i + step
  end
  return sum
end
local function atLeast(k, n, p)
  if k <= 0 then return 1 end
  if k > n or p <= 0 then return 0 end
  if p >= 1 then return 1 end
  if k < n * p then return math.max(0, 1 - binomSum(k - 1, n, p, -1)) end
  return math.min(1, binomSum(k, n, p, 1))
end
local function atMost(k, n, p) return 1 - atLeast(k + 1, n, p) end
`

// feedbackHead is feedbackScript's opening, up to an idle key's short
// path: the rest (the test of shedding and its binomial tails, outages)
// is read and defined only for a throttle, a hint or an engaged key.
const feedbackHead = `
local class, attemptGen, hint, minRate = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if ARGV[6] == '1' and inflight > 0 then
  inflight = inflight - 1
  if class == 'ok' then window = window + 1 end
end
if class ~= 'throttled' and rate == 0 and hint < 0 then
  -- An idle key's success (or a slot's other answer) counts, and
  -- changes nothing else: the chain and the outage are the engaged key's.
  if class == 'ok' then
    -- Each success takes ln 1.5 from the key's CUSUM (see suspect),
    -- which stops at zero.
    ok, okOnce, susp = ok + 1, 1, math.max(0, susp - 0.4054651081081644)
  end
  save()
  redis.call('PEXPIRE', key, ARGV[5])
  return tostring(rate)
end
`

// feedbackScript learns from an outcome: ARGV[1] is "ok", "throttled" or
// "other", ARGV[2] the generation the attempt was paced at, ARGV[3] the
// wait the server asked for in microseconds (-1: none), ARGV[4] the
// lowest rate, ARGV[5] the time to live, ARGV[6] 1 if the attempt held a
// slot of slow start. It returns the rate in force.
//
// A throttle engages a key not engaged once Page's CUSUM of the key's
// answers, comparing a share of 0.5 refused against 0.25, reaches 4.6,
// about ln 100 (see suspect): seven refusals in a row, or half refused
// over about twenty answers; three in a row for a new key. A refusal now
// and then, or refusals at random up to a quarter or so, are retried as
// without a Pacer, cheaper than paced. It engages the key at 0.7 times
// the rate the fleet was sending at (over a tenth of a second at least
// for a burst's share, so that slow start's first burst does not read as
// a huge rate) or 0.9 times the rate it is accepted at, whichever is
// lower; but a throttle with 0.4 of the
// bucket's answers or fewer refused (the server answering a quarter of
// the attempts or more) is no such burst: the fleet is near the server's
// capacity or refused at random, its rate is read over a millisecond at
// least, and the cut goes to 0.9 times the share accepted, if that is
// less of a cut. Once it is engaged, a throttle of an attempt paced at
// the rate in force cuts if it is the second within a strike window (a
// second, or 20 intervals at slow rates): a lone one is taken for
// jitter, two turns the schedule spaced by the interval that reached the
// server closer together after the processes' timers and the network (a
// limiter without burst, such as nginx's limit_req, refuses those), and
// a cut for it costs seconds of growth. Such a cut takes the rate to 0.9
// times it, or, when the fleet is accepted at a rate below that (over
// the last second), down to that rate but by half at most. A throttle of
// an attempt paced before the last cut cuts nothing: one cut answers one
// burst, whichever process saw it. Successes grow the rate back along
// CUBIC's curve, scaled to the rate: it returns to the rate cut from in
// (drop / (0.15 × that rate))^(1/3) seconds (1.26 s after a cut to 0.7
// times, 0.87 s after one to 0.9), and never goes beyond 1.25 times the
// rate the fleet is measured sending at (over the last whole second, or
// the current one once it counts 8 turns). In slow start an answer opens
// one slot more, and a throttle ends it.
//
// A chain of cuts is tested for shedding, as package pace's Pacer tests
// it (its shedding type has the reasons and the figures): refusals that
// do not depend on the rate (a load balancer shedding at random, a flaky
// backend) are refused as often at a lower rate, where a limit's fall.
// The chain's first cut records its rate (chainRate) and the outcomes
// and refusals that led to it (hiN, hiK). At 0.7 times that rate or less
// (or the rate of a moderate first cut, lowRate), the outcomes of
// attempts paced at the rate in force are counted apart (loN, loK), and
// each throttle there is judged instead of cut: from three refusals on,
// a share no more than the first share plus two standard errors, at
// least half the first less two standard errors, and of every outcome so
// far at most 0.4, passes the first stage; the test goes on (deep) below
// what a limit accepted at that rate (0.9 of it, no lower than half the
// rate), where the share must be as high as the first's less two
// standard errors. Both passed, the key goes back to idle, its waiting
// turns go, the rates it measured while paced are forgotten, and it
// remembers the share; from then on a throttle engages it again, or cuts
// its rate, only when the share refused over the current bucket and the
// one before is well above it (twice it, or halfway to all, whichever
// is less, and three standard deviations). A share at the lower rate
// clearly higher or lower than the first (a binomial test at 1 %), or
// undecided after twelve refusals, is a limit's: the chain ends, and the
// throttle cuts; so does one while the fleet sends at less than 1/1.5 of
// the rate in force (by the current bucket, or over the stage once it has
// lasted 4 intervals), as two rates it does not send at cannot be told
// apart. A success ends the chain once the share at the lower rate has
// clearly fallen (and a second stage's rate goes back to the first's).
// Shares are counted without the refusal that stopped their count
// ((k-1)/(n-1): a count that ends at a refusal overstates the share).
//
// Outages, as package pace's Pacer tells them from a limit (outageOver
// and restart below): a success after two cuts or more, a second and a
// half since the last success and ten times the usual spacing of
// successes before the cuts, ends an outage, and the key starts afresh
// in slow start (ARGV[7] is the initial window, 0: none), instead of
// growing back from the rate the outage's refusals cut it to. A key
// refused from its first attempt on, nothing ever accepted, holds its
// rate at a quarter of the rate its first cut set, probing, instead of
// being cut on to the lowest rate.
var feedbackScript = redis.NewScript(common + feedbackHead + binomial + `
local chainFields = {'chainRate', 'chainGen', 'lowRate', 'limit', 'hiN', 'hiK', 'loN', 'loK', 'deep',
  'epN', 'epK', 'at', 'atSent', 'svRate', 'svWmax', 'svCut', 'svWin',
  'lastOk', 'cutsOk', 'oBase', 'holding', 'stAcc', 'stAfter',
  'drained', 'drOk', 'drRef', 'cycSt', 'cycOk', 'refSince'}
local c = redis.call('HMGET', key, unpack(chainFields))
local chainRate = tonumber(c[1]) or 0
local chainGen = tonumber(c[2]) or 0
local lowRate = tonumber(c[3]) or 0
local limit = tonumber(c[4]) or 0
local hiN = tonumber(c[5]) or 0
local hiK = tonumber(c[6]) or 0
local loN = tonumber(c[7]) or 0
local loK = tonumber(c[8]) or 0
local deep = tonumber(c[9]) or 0
local epN = tonumber(c[10]) or 0
local epK = tonumber(c[11]) or 0
local at = tonumber(c[12]) or now
local atSent = tonumber(c[13]) or 0
local svRate = tonumber(c[14]) or 0
local svWmax = tonumber(c[15]) or 0
local svCut = tonumber(c[16]) or 0
local svWin = tonumber(c[17]) or 0
local lastOk = tonumber(c[18]) or now
local cutsOk = tonumber(c[19]) or 0
local oBase = tonumber(c[20]) or 0
local holding = tonumber(c[21]) or 0
local stAcc = tonumber(c[22]) or 0
local stAfter = tonumber(c[23]) or 0
local drained = tonumber(c[24]) or 0
local drOk = tonumber(c[25]) or 0
local drRef = tonumber(c[26]) or 0
local cycSt = tonumber(c[27]) or 0
local cycOk = tonumber(c[28]) or 0
local refSince = tonumber(c[29]) or 0
local initial = tonumber(ARGV[7]) or 0
local span = math.max((now - since) / 1000000, 0)
local elapsed = math.max(span, 0.01)
-- acc: the rate accepted over the last second, the bucket before weighted
-- by the part of it still in that second; over the first bucket, the
-- bucket so far once it counts 8 successes, else the smoothed rate.
local acc = accepted
if prevOk >= 0 then
  acc = ok + prevOk * math.max(1 - elapsed, 0)
elseif ok >= 8 then
  acc = math.max(acc, ok / elapsed)
end
-- Once the key's first throttle found the server's bucket empty, and
-- while the fleet keeps it empty (over 0.75 of the answers since
-- refused), the successes since come at the rate it refills: for a second
-- after that throttle, acc is no more than theirs (8 at least) over the
-- time since, as package pace's acceptedRate bounds it. A fixed window's
-- quota, spent at once, was otherwise read as accepted over the bucket so
-- far (20/t against 20 a second), and the rate fell as 18/t through the
-- silence: 100 to 130 refusals in the first second.
-- With no other measure (the key's first bucket, fewer than 8
-- successes in it), that bound is the measure: a fleet engaged at
-- hundreds a second by its first refusals otherwise came down by 0.9
-- a cut, two refusals each, to a limit of 20 a second.
if drained > 0 and now > drained and now - drained < 1000000 and drRef > 0.75 * (drOk + drRef) then
  local bound = math.max(drOk, 8) / ((now - drained) / 1000000)
  if acc > 0 then acc = math.min(acc, bound) else acc = bound end
end

-- The chain of cuts and its test of shedding.
local function low()
  if lowRate > 0 then return lowRate end
  return 0.7 * chainRate
end
local function need()
  if limit == 1 then return 16 end
  return 8
end
local function stopped(k, n)
  if n < 2 then return 0 end
  return math.max(k - 1, 0) / (n - 1)
end
-- hiErr: two standard errors of the first share, at least one refusal's
-- worth.
local function hiErr(hi)
  if hiN < 1 then return 1 end
  local p = math.max(hi, 1 / hiN)
  return 2 * math.sqrt(p * (1 - p) / hiN)
end
local function limitShare()
  local hi = stopped(hiK, hiN)
  return hi - hiErr(hi) > 0.4
end
local function testing()
  return chainRate > 0 and rate > 0 and hiN >= need() and not limitShare() and rate <= low()
end
local function beginChain(base, n, k, lim)
  chainRate, chainGen, lowRate, limit = base, gen, 0, lim
  at, atSent = now, sends
  hiN, hiK, loN, loK, deep = n, k, 0, 0, 0
end
local function endChain()
  chainRate, chainGen, lowRate, limit = 0, 0, 0, 0
  hiN, hiK, loN, loK, deep = 0, 0, 0, 0, 0
end
-- noteCut notes a cut from rate base: the first of a chain records the
-- refusals that led to it (the bucket's before the key engaged, those
-- since the last cut after); a chain with too few outcomes before its
-- low rate begins again here, keeping them; one whose first share was a
-- limit's begins again from the outcomes since, weighed over twice as
-- many.
local function noteCut(base)
  if base <= 0 then
  elseif chainRate == 0 then
    if rate == 0 then beginChain(base, ok + refused, refused, 0) else beginChain(base, epN, epK, 0) end
  elseif hiN < 8 then
    beginChain(base, hiN + loN, hiK + loK, limit)
  elseif hiN < need() then
    hiN, hiK, loN, loK = hiN + loN, hiK + loK, 0, 0
  elseif limitShare() and loN >= 8 then
    beginChain(base, loN, loK, 1)
  elseif limitShare() and hiN >= 16 then
    beginChain(base, epN, epK, 1)
  end
  epN, epK = 0, 0
end
-- paceHolds: whether the fleet sends at 1/1.5 of the rate in force or
-- more, by the current bucket's turns (from 10 ms into it) or the
-- smoothed rate, and over the test's stage once it has lasted 4
-- intervals.
local function paceHolds()
  local s = measured
  if span >= 0.01 then s = math.max(s, sent / span) end
  if s > 0 and rate > 1.5 * s then return false end
  local stage = (now - at) / 1000000
  if stage < 4 / rate then return true end
  return rate <= 1.5 * (sends - atSent) / stage
end
-- verdict judges a throttle of an attempt paced at the rate in force,
-- while testing: 'cut', 'hold' or 'indep' (not the rate's doing).
local function verdict()
  if loN == 0 or not paceHolds() then return 'cut' end
  local hi, lo = stopped(hiK, hiN), stopped(loK, loN)
  local e = hiErr(hi)
  if loK >= 2 and atLeast(loK - 1, loN - 1, hi + e) < 0.01 then
    endChain()
    return 'cut'
  end
  if loK >= 3 and lo <= hi + e and (deep == 1 and lo >= hi - e or deep == 0 and 2 * lo >= hi - e) and
      stopped(hiK + loK, hiN + loN) <= 0.4 then
    return 'indep'
  end
  if atMost(loK - 1, loN - 1, hi - e) < 0.01 or loK >= 12 then
    endChain()
    return 'cut'
  end
  return 'hold'
end
-- deepen goes on with the test below what a limit accepted at the low
-- rate, saving the curve for a limit found there.
local function deepen()
  local lo = loK / loN
  local to = math.max(0.9 * (1 - lo) * rate, 0.5 * rate, minRate)
  hiN, hiK, loN, loK = hiN + loN, hiK + loK, 0, 0
  svRate, svWmax, svCut, svWin = rate, wmax, cut, win
  drain()
  chainGen, lowRate, deep, at, atSent = gen, to, 1, now, sends
  wmax, cut, win, rate, gen, strike = to, now, 0, to, gen + 1, 0
end
-- disengage returns the key to idle, remembering the share: that at the
-- low rate, or half the whole chain's if more.
local function disengage()
  share = math.max(loK / loN, (hiK + loK) / (hiN + loN) / 2)
  endChain()
  rate, gen, headAt = 0, gen + 1, now
  wmax, cut, win, strike, epN, epK = 0, 0, 0, 0, 0, 0
  refused, prevRef, measured, accepted = 0, 0, 0, 0
  prevOkN, ok, prevOk, sent, since = prevOkN + ok, 0, -1, 0, now
  drained, drOk, drRef, cycSt, cycOk, refSince = 0, 0, 0, 0, 0, 0
  susp = 0
end
-- heldOut: whether the stage has had the outcomes that would bring 16
-- refusals at the first share (one refusal's worth at least), or has
-- lasted a second: until then, the rate does not grow above the stage's
-- (see growth below). A fast client's growth would otherwise take the
-- rate above the stage's before the stage's first refusals, and the test
-- would never weigh one; held longer, a limit above the stage's rate
-- whose first share a burst had diluted (1 refusal of 22) would hold the
-- fleet there for seconds.
local function heldOut()
  return math.max(stopped(hiK, hiN), 1 / hiN) * loN >= 16 or now - at >= 1000000
end
-- testSuccess ends the chain once the share at the low rate has clearly
-- fallen below the first: a limit's, and the rate is below it.
local function testSuccess()
  if not testing() or loN == 0 then return end
  local hi, lo = stopped(hiK, hiN), loK / loN
  if not (atMost(loK, loN, hi - hiErr(hi)) < 0.01 or heldOut() and 2 * lo < hi) then return end
  if deep == 1 then
    drain()
    rate, wmax, cut, win, gen = math.max(svRate, minRate), svWmax, svCut, svWin, gen + 1
  end
  endChain()
end
-- noise: whether the refusals of the current bucket and the one before
-- are no more than the share found not to depend on the rate would bring.
local function noise()
  if share == 0 then return false end
  local k = refused + prevRef
  local n = k + ok + prevOkN
  local mean = n * share
  return k <= mean + math.min(mean, (n - mean) / 2) or k <= mean + 3 * math.sqrt(mean * (1 - share)) + 2
end
-- suspect weighs a throttle of an idle key and reports whether the key
-- engages: Page's CUSUM of the log-likelihood ratio of its answers, a
-- share of 0.5 refused against 0.25, reaches 4.6 (ln 100, as package
-- pace's engageAlarm; less a hair, so that the three ln 2 of a new key
-- reach it whatever the rounding). Each throttle adds
-- ln 2 and each success takes ln 1.5 away (see feedbackHead), the sum
-- never below zero: seven refusals in a row engage, or half refused over
-- about twenty answers; 5 and 10 % refused at random never do, a
-- quarter rarely and late, as package pace's suspect. Before, a
-- throttle engaged on the key's eighth answer or later, and a moderate
-- share cut the fleet's rate and ran the test of shedding for nothing.
local function suspect()
  susp = susp + 0.6931471805599453
  return susp >= 4.6 - 1e-9
end
-- sendingRate: the rate the fleet was sending at, for a key about to
-- engage: smoothed, or over the bucket so far (floor seconds at least).
-- The answers count among the attempts sent: turns taken before a
-- restart (or before the key went idle) are answered after it, when the
-- bucket has counted none of them, and a rate of 0 engaged the key at the
-- lowest rate on a curve that never grows.
local function sendingRate(floor)
  return math.max(measured, math.max(sent, ok + refused) / math.max(span, floor))
end
-- aim sets the curve that growth climbs from the rate new back to top:
-- top (wmax), from when (cut), and the seconds it takes (win), CUBIC's
-- (drop / (0.15 × top))^(1/3).
local function aim(top, new)
  wmax, cut, win = top, now, (math.max(top - new, 0) / (0.15 * top)) ^ (1 / 3)
end
local function cutRate()
  strike = 0
  local base, fs = rate, 1
  if rate == 0 then
    local answered = ok + refused
    if answered > 0 and 4 * answered >= sent then fs = refused / answered end
    -- The rate is read over a tenth of a second at least once the share
    -- is clearly a burst's (over 0.4, by a binomial test at 10 %: 3 of
    -- 3, 4 of 5, 5 of 7), 10 ms while it may be a share refused at
    -- random (2 of 4 are a quarter's as often as a limit's: read over a
    -- tenth of a second, the first cut of 40 clients sending 2500 a
    -- second went to 70 a second, and their requests failed waiting for
    -- turns), a millisecond at 0.4 or less. At 5 %, 3 of 3 and 4 of 5
    -- were read over 10 ms: slow start's first ten attempts read as 1000
    -- a second, once the CUSUM engaged the key on them (see suspect),
    -- and a fleet of 100 clients against nginx's 100/s was refused 64 to
    -- 117 times for 300 requests where it had been 15 to 30.
    local floor = 0.01
    if fs <= 0.4 then
      floor = 0.001
    elseif atLeast(refused, answered, 0.4) < 0.1 then
      floor = 0.1
    end
    base = sendingRate(floor)
  end
  noteCut(base)
  if rate == 0 then
    lastOk, cutsOk, holding = now, 0, 0
    -- The bucket is empty (see acc), and the successes so far begin the
    -- first cycle (see resume).
    drained, drOk, drRef = now, 0, 0
    cycSt, cycOk, refSince = since, ok, 1
  end
  if cutsOk == 0 then
    -- The rate accepted before the streak: over the last second, or,
    -- with none measured (a key engaged again after it went idle, its
    -- rates forgotten), the successes counted since over the time.
    stAcc, stAfter = acc, okOnce
    if stAcc <= 0 then stAcc = (ok + prevOkN) / (span + 1) end
  end
  cutsOk = cutsOk + 1
  local new = base * 0.9
  if rate == 0 then new = base * 0.7 end
  if rate == 0 and fs <= 0.4 then
    new = math.max(new, 0.9 * (1 - fs) * base)
    lowRate = math.max(new, minRate)
  elseif acc > 0 then
    if rate == 0 then
      new = math.min(new, 0.9 * acc)
    else
      new = math.min(new, math.max(acc, 0.5 * base))
    end
  end
  if stAfter == 1 then
  elseif cutsOk == 1 then
    oBase = new
  elseif new < 0.25 * oBase then
    new, holding = 0.25 * oBase, 1
  end
  new = math.max(new, minRate)
  if rate == 0 then engage() else drain() end
  aim(base, new)
  gen, rate, ss = gen + 1, new, 0
end

-- outageOver: whether a success ends an outage: two cuts or more since
-- the last success (or the key's engaging), a second and a half since,
-- and ten times the usual spacing of successes before the streak (at the
-- rate accepted over the second before its first cut). A limiter that
-- admits its quota at the start of each one-second window is silent for
-- most of it: against one of 20 a second, a fleet restarted by half a
-- second of silence (package pace's outageTime) restarted every window
-- and was refused four times as often. With no success before the
-- streak, the second and a half is enough.
local function outageOver()
  local gap = (now - lastOk) / 1000000
  if gap < 1.5 or cutsOk < 2 then return false end
  if stAfter == 0 then return true end
  return gap * stAcc >= 10
end
-- silenceOver: whether a success ends a silence: 12 refusals or more in
-- a row, 3 cuts or more, and no test of shedding under way (package
-- pace's silenceOver; refused at random as often as 40 % of the time,
-- twelve in a row come once in 60,000 attempts).
local function silenceOver()
  return cutsOk >= 3 and refSince >= 12 and not testing()
end
-- resume, on the success that ends a silence: a fixed window limiter
-- accepts its quota at the start of each window and refuses the rest,
-- and each paced refusal of the silence cuts. The successes since the
-- last silence ended (or since the key's first bucket) over the time
-- since are what the limiter accepts, window and silence together: the
-- rate comes back to 0.9 of that, if it is lower, on a curve that grows
-- back to it, as package pace's resume does.
local function resume()
  local d, n = (now - cycSt) / 1000000, cycOk
  cycSt, cycOk = now, 0
  if d <= 0 or n < 8 then return end
  local r = n / d
  local new = 0.9 * r
  if new <= rate then return end
  drain()
  aim(r, new)
  rate = math.max(new, minRate)
end
-- restart forgets what the key learned: after an outage the rate its
-- refusals cut to says nothing of the server that answers again, and
-- growth back from it would take seconds (a fleet of 8 workers after 2 s
-- of 503s, against a limit of 200/s: 20/s, 47 successes in the 2 s after
-- against 420 allowed). The key starts afresh, in slow start.
local function restart()
  endChain()
  rate, gen, headAt = 0, gen + 1, now
  wmax, cut, win, strike, epN, epK = 0, 0, 0, 0, 0, 0
  refused, prevRef, measured, accepted = 0, 0, 0, 0
  prevOkN, ok, prevOk, sent, since = 0, 1, -1, 0, now
  lastOk, cutsOk, holding = now, 0, 0
  drained, drOk, drRef, cycSt, cycOk, refSince = 0, 0, 0, 0, 0, 0
  -- The key has been throttled before: its first refusal now is its
  -- limit's (a storm's backlog meeting the server as it returns), and
  -- engages it, whatever the successes of the server's burst.
  susp = 1e9
  if initial > 0 then ss, ssEnd, inflight, window = 1, now + 1000000, 0, initial end
end

local throttled = class == 'throttled'
if class == 'ok' or throttled then
  local k = 0
  if throttled then k = 1 end
  refused = refused + k
  if rate > 0 then
    epN, epK = epN + 1, epK + k
    refSince = refSince + k
    if drained > 0 then drOk, drRef = drOk + 1 - k, drRef + k end
    if chainRate == 0 then
    elseif attemptGen ~= gen then
      -- Sent before the chain's first cut (or the test's stage), answered
      -- after it: one more outcome at the chain's rate.
      if attemptGen <= chainGen then hiN, hiK = hiN + 1, hiK + k end
    elseif rate > low() then
      hiN, hiK = hiN + 1, hiK + k
    else
      loN, loK = loN + 1, loK + k
    end
  end
end
if class == 'ok' then
  ok, okOnce = ok + 1, 1
  if rate > 0 and outageOver() then
    restart()
  elseif rate > 0 then
    if silenceOver() then resume() end
    testSuccess()
  end
  if rate > 0 then
    local tt = (now - cut) / 1000000
    local cubic = 0.15 * wmax * (tt - win) ^ 3 + wmax
    local sending = measured
    if sent >= 8 then sending = math.max(sending, sent / elapsed) end
    local cap = math.max(rate, 1.25 * sending)
    if testing() and not heldOut() then cap = math.min(cap, math.max(rate, low())) end
    if cubic > rate then
      drain()
      rate = math.min(cubic, cap)
    end
  end
elseif throttled and hint < 0 and noise() and not testing() then
  -- Refused no more often than the share found not to depend on the
  -- rate: pacing, or pacing slower, would not help.
elseif throttled and hint < 0 and rate == 0 and not suspect() then
  -- Refusals not yet clearly over a limit's share: retried as without
  -- a Pacer until the answers say which it is.
elseif throttled and rate > 0 and holding == 1 then
  -- Refused again and again, nothing ever accepted: an outage, or a
  -- quota spent. The rate in force probes until a success.
elseif throttled and rate > 0 and attemptGen == gen and testing() then
  local v = verdict()
  if v == 'indep' and deep == 0 then
    deepen()
  elseif v == 'indep' then
    disengage()
  elseif v == 'cut' then
    cutRate()
  end
elseif throttled and rate > 0 and attemptGen == gen and now - strike > math.max(1000000, 20000000 / rate) then
  -- A lone throttle of a key engaged is taken for the jitter of the
  -- fleet's clocks (two turns sent closer than their interval); a second
  -- within the strike window cuts.
  strike = now
elseif throttled and (rate == 0 or attemptGen == gen) then
  cutRate()
end
if class == 'ok' and rate > 0 then
  lastOk, cutsOk, holding, refSince = now, 0, 0, 0
  if cycSt == 0 then cycSt = now end
  cycOk = cycOk + 1
end
if hint >= 0 then
  if rate == 0 then
    engage()
    -- Smoothed alone, the sending rate is 0 over a key's first second,
    -- after a restart or after the key went idle, and the key engaged at
    -- MinRate on a curve scaled to it (seconds to grow back).
    rate = math.max(sendingRate(0.1), minRate)
    -- Growth starts from here: with no cut yet, CUBIC's curve would
    -- otherwise be scaled to a rate of 0 and never rise.
    wmax, cut, win = rate, now, 0
  else
    drain()
  end
  if now + hint > headAt then headAt = now + math.floor(hint) end
  gen, ss = gen + 1, 0
end
save(changed({}, chainFields, c, {chainRate, chainGen, lowRate, limit, hiN, hiK, loN, loK, deep,
  epN, epK, at, atSent, svRate, svWmax, svCut, svWin,
  lastOk, cutsOk, oBase, holding, stAcc, stAfter,
  drained, drOk, drRef, cycSt, cycOk, refSince}))
redis.call('PEXPIRE', key, ARGV[5])
return tostring(rate)
`)

// cancelScript gives back a turn that will not be used: its slot of slow
// start (ARGV[2] is 1 if it held one), or its place in the schedule
// (ARGV[1] is its number, -1 for none): the tail's, or, from the middle
// of the queue, for the next turn taken to take while it is to come.
var cancelScript = redis.NewScript(common + queue + `
local n = tonumber(ARGV[1])
if ARGV[2] == '1' and inflight > 0 then
  inflight = inflight - 1
elseif rate > 0 and n >= 0 and tail == n + 1 then
  drain()
  tail = n
  head = math.min(head, tail)
elseif rate > 0 and n >= 0 and n < tail then
  -- From the middle of the queue: the next turn taken takes it, while
  -- it is still to come. Left spent, such turns (attempts that a cut
  -- pushed past their deadlines) held the queue out of every caller's
  -- deadline until they drained: a fleet of 16 workers sent nothing for
  -- 1.4 s after an outage.
  drain()
  local free = freeTurns()
  if n > head then free[#free + 1] = n end
  setFree(free)
else
  return 0
end
save()
return 0
`)
