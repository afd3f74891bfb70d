--[[ Token-bucket (GCRA) decision for one identity and one action, in one
atomic call, with the identity's penalties and offence counting in the same
call. Constant memory whatever the limit.

Each window (period P, max_count N) is a bucket of N tokens refilled evenly,
one every T = P/N: N at once, then one every T (the generic cell rate
algorithm, as redis-cell's CL.THROTTLE and Redisson's RRateLimiter do). Its
state is how full the bucket's debt is, as a level in tokens: a request of
cost c is admitted when level + c <= N, and the level drains by one token
every T. (A level is the GCRA's theoretical arrival time divided by T, kept
as a small number so that T = P/N needs no rounding.)

KEYS[1]  string: "<t_us>,<level_1>,<level_2>,..." the Redis time of the last
         write and each window's level then, in ARGV order; absent = every
         bucket full. Its TTL ends when the last bucket is full again, so an
         idle identity costs nothing.
KEYS[2]  integer: offences (refused attempts) in the current offence window
KEYS[3]  hash: penalties in force (see sliding_log.lua)
KEYS[4]  string: a pending escalation (its value names the offence run)
KEYS[5]  sorted set, only when the count is per target: the identity's targets
         of this action (see sliding_log.lua), kept by admissions and refunds
         Every key carries the identity's hash tag (one Redis Cluster slot).

ARGV[1]  mode and cost: "c<n>" decides and takes n tokens, "p<n>" decides and
         writes nothing, "r<n>" gives n tokens back to every window (refund)
ARGV[2]  a token unique per call: the name of an offence run this call starts;
         in a refund ("r"), the change channel, on which "refund <KEYS[1]>" is
         published so that every process forgets the refusals it remembers of
         this bucket (Architecture › Floods answered locally)
ARGV[3]  the action (its field in KEYS[3])
ARGV[4]  "<offence window s> <threshold> <pending s>", read only on a refusal
ARGV[5], ARGV[6], ...  pairs of (period seconds, max_count), one per window
ARGV[#ARGV]  with KEYS[5] only: the target (its member in KEYS[5])

Reply    as sliding_log.lua: { allowed, limit, remaining, retry_after_us,
           reset_after_us, offences, crossing, penalty } with the same
           optional tail; a refund
           replies { 1 }.
         remaining: whole tokens left in the binding window now (after this
         request when "c" takes them); reset_after_us: time until every
         bucket is full again.

Its content variant (token_bucket_content) judges a post's content in the same call, once
every window admits, and records it with the entry (see _content.lua).

Guarantees
- Time is Redis TIME (Architecture › One clock). A penalty refuses first and writes nothing.
- All windows are judged before anything is written; a request refused by
  one window takes tokens from none (Architecture › All-or-nothing windows).
- retry_after_us is the exact time until the binding window has c tokens:
  never negative (Architecture › Honest Retry-After).
- Levels are kept to 17 significant digits (exact for a double), so no
  rounding drifts the rate; comparisons allow 1e-9 of a token.
- A bucket admits at most N at once and N per P thereafter: in any window of
  length P at most 2N-1 (a full bucket, then its refill).
- A window's debt never exceeds P: a policy edited to a shorter period or a
  smaller max_count does not lock a member out for the old, longer time.
- KEYS[5] outlives every bucket it lists and holds only targets whose bucket
  may not be full (see list_target in the prelude); a refund that fills the
  bucket again takes its target out.
]]

-- @prelude

local raw = redis.call('GET', KEYS[1])
local elapsed, stored, since = 0, {}, nil
if raw then
  local levels
  since, levels = string.match(raw, '^(%d+),(.*)$')
  since = tonumber(since)
  elapsed = math.max(0, now - since)
  if nwin == 1 then
    stored[1] = tonumber(levels)
  else
    for v in string.gmatch(levels, '[^,]+') do stored[#stored + 1] = tonumber(v) end
  end
end

-- Per window: period (µs), max_count, and the level now (drained since the
-- last write; never above N, should a policy have been edited downwards).
local periods, maxes, levels = {}, {}, {}
local longest = 0
for i = 1, nwin do
  local period = tonumber(ARGV[3 + 2 * i]) * 1000000
  local n = tonumber(ARGV[4 + 2 * i])
  periods[i], maxes[i] = period, n
  if period > longest then longest = period end
  local level = (stored[i] or 0) - elapsed * n / period
  if level < 0 then level = 0 elseif level > n then level = n end
  levels[i] = level
end

local EPS = 1e-9

-- The levels after this call are written with the time; the key lives until
-- the last bucket is full again (its level drained to zero).
local new
if mode ~= 'p' then
  new = {}
  local full, parts = 0, { int(now) }
  for i = 1, nwin do
    local level = (mode == 'r') and math.max(0, levels[i] - cost) or levels[i] + cost
    new[i] = level
    parts[i + 1] = string.format('%.17g', level)
    local drain = level * periods[i] / maxes[i]
    if drain > full then full = drain end
  end
  new.full, new.value = full, table.concat(parts, ',')
end

if mode == 'r' then
  if new.full < 1 then
    redis.call('DEL', KEYS[1])
    -- Per target: a bucket given back whole counts no more, so its index forgets it.
    if tindex then redis.call('ZREM', tindex, ARGV[at]) end
  else
    redis.call('SET', KEYS[1], new.value, 'PX', int(math.ceil(new.full / 1000)))
    -- Per target: a refund's write moves the time the next write compares with, so it lists too.
    if tindex and (not raw or since < half_start(longest)) then
      list_target(longest, not raw)
    end
  end
  redis.call('PUBLISH', ARGV[2], 'refund ' .. KEYS[1])
  return { 1 }
end

local allowed = 1
local limit, remaining, retry = 0, nil, 0
for i = 1, nwin do
  local excess = levels[i] + cost - maxes[i]
  if excess > EPS then
    -- Microseconds until enough of the level has drained.
    local wait = excess * periods[i] / maxes[i]
    if allowed == 1 or wait > retry then
      -- The binding refusal: the longest wait.
      retry, limit = wait, maxes[i]
      remaining = math.floor(maxes[i] - levels[i] + EPS)
    end
    allowed = 0
  end
end
-- @content-judge

if allowed == 1 then
  local taken = (mode == 'c') and cost or 0
  for i = 1, nwin do
    -- Whole tokens left: how many more requests of cost 1 fit now.
    local left = math.floor(maxes[i] - levels[i] - taken + EPS)
    if remaining == nil or left < remaining then
      remaining, limit = left, maxes[i]
    end
  end
  if mode == 'c' then
    redis.call('SET', KEYS[1], new.value, 'PX', int(math.ceil(new.full / 1000)))
    -- Per target: listed in KEYS[5] by the first write of each half window.
    if tindex and (not raw or since < half_start(longest)) then
      list_target(longest, not raw)
    end
    -- @content-record
    if c_held then return { 1, limit, remaining, 0, math.ceil(new.full), 0, 0, 0, c_held, 1 } end
    return { 1, limit, remaining, 0, math.ceil(new.full), 0 }
  end
end

local reset = 0
for i = 1, nwin do
  local drain = levels[i] * periods[i] / maxes[i]
  if drain > reset then reset = drain end
end

if mode == 'c' then
  local offences, crossing = offend()
  if crossing == 1 then
    return { 0, limit, math.max(0, remaining), math.ceil(retry), math.ceil(reset), offences, 1 }
  end
  return { 0, limit, math.max(0, remaining), math.ceil(retry), math.ceil(reset), offences }
end
return { allowed, limit, math.max(0, remaining), math.ceil(retry), math.ceil(reset),
         tonumber(redis.call('GET', KEYS[2]) or '0') }
