-- The sliding-log script of release 0.1, kept only as the benchmark's reference row.
--[[ Sliding-log decision for one identity and one action, in one atomic call,
with the identity's penalties and offence counting in the same call.

KEYS[1]  sorted set: the log of admitted actions (score = Redis time in
         microseconds, member = a unique token sent by the caller)
KEYS[2]  integer: offences (refused attempts) in the current offence window
KEYS[3]  hash: penalties in force, mirrored from the database; field = action
         name or "*" (all actions), value = "<ends_at_us>|<details>"
KEYS[4]  string: a pending escalation (its value names the offence run)
         Every key carries the identity's hash tag, so the call lands on one
         Redis Cluster slot.

ARGV[1]  "check" (decide and record) or "peek" (decide, write nothing)
ARGV[2]  cost: entries this action takes (>= 1, <= every window's max)
ARGV[3]  member token, unique per call; entry j > 1 gets the suffix ".j";
         also the name of an offence run this call starts
ARGV[4]  the action (its field in KEYS[3])
ARGV[5]  offence window in seconds
ARGV[6]  offence threshold; 0 = this identity is never escalated
ARGV[7]  seconds an escalation stays pending before another may start
ARGV[8], ARGV[9], ...  pairs of (period seconds, max_count), one per window

Reply    { allowed (1|0), limit, remaining, retry_after_us, reset_after_us,
           offences, crossing, penalty }
         crossing (1) is sent only after a crossing, penalty (the KEYS[3]
         value, with crossing 0) only when a penalty refuses: a shorter reply
         is cheaper to parse on every decision.
         limit/remaining belong to the binding window: the refusing window with
         the longest wait, or, when admitted, the window with least room left.
         remaining is how many more actions would be admitted now (after this
         one when "check" records it). When a penalty refuses, limit and
         remaining are 0 and retry_after_us is the time to its end.
         crossing = 1 when this refusal made the identity a repeat offender
         and no escalation was pending: the caller enqueues exactly one.

Guarantees
- Time is Redis TIME; the caller's clock never decides a window (Architecture › One clock).
- A penalty in force refuses before anything else and writes nothing: it is
  not an offence, and it never consumes quota.
- All windows are counted before anything is written; a request refused by
  one window is recorded in none (Architecture › All-or-nothing windows).
- An entry at time t counts in a window of period p while now < t + p; the
  wait is the time until enough of the oldest entries of the binding window
  leave it, so it is exact and never negative (Architecture › Honest Retry-After).
- Refused attempts are not entries: they only increment KEYS[2] (Architecture › Counting what did not happen).
- At most one escalation is pending per identity and action (SET NX with a
  TTL); the caller deletes KEYS[2] and KEYS[4] once the rung is applied, so
  the next one needs a fresh run of offences.
- The log's TTL is its longest window, refreshed on every admission, so an
  idle identity costs nothing (Architecture › Bounded memory).
]]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode = ARGV[1]
local cost = tonumber(ARGV[2])
local nwin = (#ARGV - 7) / 2

-- Numbers above 1e14 lose digits in Lua's default tostring; format them whole.
local function int(x)
  return string.format('%.0f', x)
end

-- A penalty in force (this action's or all actions') refuses first; the one
-- ending last decides the wait. Expired fields linger until the hash's TTL
-- (the end of its longest penalty) and are ignored here.
local pen = redis.call('HMGET', KEYS[3], ARGV[4], '*')
local pen_end, pen_value = 0, nil
for i = 1, 2 do
  if pen[i] then
    local ends = tonumber(string.match(pen[i], '^(%d+)|'))
    if ends and ends > now and ends > pen_end then
      pen_end, pen_value = ends, pen[i]
    end
  end
end
if pen_value then
  local wait = pen_end - now
  return { 0, 0, 0, wait, wait, tonumber(redis.call('GET', KEYS[2]) or '0'), 0, pen_value }
end

local periods, maxes = {}, {}
local longest = 0
for i = 1, nwin do
  periods[i] = tonumber(ARGV[6 + 2 * i]) * 1000000
  maxes[i] = tonumber(ARGV[7 + 2 * i])
  if periods[i] > longest then longest = periods[i] end
end

local log = KEYS[1]
if mode == 'check' then
  redis.call('ZREMRANGEBYSCORE', log, '-inf', int(now - longest))
end

local counts = {}
local allowed = 1
for i = 1, nwin do
  if mode == 'check' and periods[i] == longest then
    -- The trim above left only entries inside the longest window.
    counts[i] = redis.call('ZCARD', log)
  else
    counts[i] = redis.call('ZCOUNT', log, '(' .. int(now - periods[i]), '+inf')
  end
  if counts[i] + cost > maxes[i] then allowed = 0 end
end

local limit, remaining, retry = 0, nil, 0
if allowed == 1 then
  -- remaining: how many more the member may do now (after this one, if recorded)
  local taken = (mode == 'check') and cost or 0
  for i = 1, nwin do
    local left = maxes[i] - counts[i] - taken
    if remaining == nil or left < remaining then
      remaining, limit = left, maxes[i]
    end
  end
else
  for i = 1, nwin do
    local excess = counts[i] + cost - maxes[i]
    if excess > 0 then
      -- The excess-th oldest entry inside the window must leave it first.
      local e = redis.call('ZRANGEBYSCORE', log, '(' .. int(now - periods[i]),
                           '+inf', 'WITHSCORES', 'LIMIT', excess - 1, 1)
      local wait = tonumber(e[2]) + periods[i] - now
      if remaining == nil or wait > retry then
        retry, limit = wait, maxes[i]
        remaining = math.max(0, maxes[i] - counts[i])
      end
    end
  end
end

local offences
local crossing = 0
if mode == 'check' then
  if allowed == 1 then
    local score = int(now)
    redis.call('ZADD', log, score, ARGV[3])
    for j = 2, cost do
      redis.call('ZADD', log, score, ARGV[3] .. '.' .. j)
    end
    redis.call('PEXPIRE', log, int(longest / 1000))
    offences = tonumber(redis.call('GET', KEYS[2]) or '0')
  else
    offences = redis.call('INCR', KEYS[2])
    if offences == 1 then
      redis.call('EXPIRE', KEYS[2], ARGV[5])
    end
    local threshold = tonumber(ARGV[6])
    if threshold > 0 and offences >= threshold
        and redis.call('SET', KEYS[4], ARGV[3], 'NX', 'EX', ARGV[7]) then
      crossing = 1
    end
  end
else
  offences = tonumber(redis.call('GET', KEYS[2]) or '0')
end

local reset = 0
if mode == 'check' and allowed == 1 then
  reset = longest  -- the newest entry is the one just added, at now
else
  local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  if newest[2] then
    reset = math.max(0, tonumber(newest[2]) + longest - now)
  end
end

if crossing == 1 then
  return { allowed, limit, remaining, math.ceil(retry), math.ceil(reset), offences, 1 }
end
return { allowed, limit, remaining, math.ceil(retry), math.ceil(reset), offences }
