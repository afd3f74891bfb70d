--[[ Sliding-log decision for one identity and one action, in one atomic call,
with the identity's penalties and offence counting in the same call.

KEYS[1]  sorted set: the log of admitted actions (score = Redis time in
         microseconds, member = a unique token sent by the caller)
KEYS[2]  integer: offences (refused attempts) in the current offence window
KEYS[3]  hash: penalties in force, mirrored from the database; field = action
         name or "*" (all actions), value = "<ends_at_us>|<details>"
KEYS[4]  string: a pending escalation (its value names the offence run)
KEYS[5]  sorted set, only when the count is per target: the identity's targets
         of this action (member = the target as in KEYS[1], score = a recent
         admission), so a reset can find and forget every one of them
         Every key carries the identity's hash tag, so the call lands on one
         Redis Cluster slot.

ARGV[1]  mode and cost: "c<n>" decides and records n entries, "p<n>" decides
         and writes nothing
ARGV[2]  member token, unique per call; entry j > 1 gets the suffix ".j";
         also the name of an offence run this call starts
ARGV[3]  the action (its field in KEYS[3])
ARGV[4]  "<offence window s> <threshold> <pending s>", read only on a refusal;
         threshold 0 = this identity is never escalated
ARGV[5], ARGV[6], ...  pairs of (period seconds, max_count), one per window
ARGV[#ARGV]  with KEYS[5] only: the target (its member in KEYS[5])

Reply    { allowed (1|0), limit, remaining, retry_after_us, reset_after_us,
           offences, crossing, penalty }
         crossing (1) is sent only after a crossing, penalty (the KEYS[3]
         value, with crossing 0) only when a penalty refuses: a shorter reply
         is cheaper to parse on every decision.
         limit/remaining belong to the binding window: the refusing window with
         the longest wait, or, when admitted, the window with least room left.
         remaining is how many more actions would be admitted now (after this
         one when "c" records it). When a penalty refuses, limit and
         remaining are 0 and retry_after_us is the time to its end.
         offences counts this identity's refusals in the offence window; an
         admission reports 0 (it does not read the counter: a cheaper call).

Its content variant (sliding_log_content) judges a post's content in the same call, once
every window admits, and records it with the entry (see _content.lua).

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
  idle identity costs nothing (Architecture › Bounded memory). KEYS[5]
  outlives every log it lists and holds only targets that may still count
  (see list_target in the prelude; Architecture › Resetting every target).
]]

-- @prelude

local periods, maxes = {}, {}
local longest, li = 0, 1
for i = 1, nwin do
  periods[i] = tonumber(ARGV[3 + 2 * i]) * 1000000
  maxes[i] = tonumber(ARGV[4 + 2 * i])
  if periods[i] > longest then longest, li = periods[i], i end
end

local log = KEYS[1]
local record = mode == 'c'

local counts = {}
local allowed = 1
for i = 1, nwin do
  counts[i] = redis.call('ZCOUNT', log, '(' .. int(now - periods[i]), '+inf')
  if counts[i] + cost > maxes[i] then allowed = 0 end
end
-- @content-judge

local limit, remaining, retry = 0, nil, 0
if allowed == 1 then
  -- remaining: how many more the member may do now (after this one, if recorded)
  local taken = record and cost or 0
  for i = 1, nwin do
    local left = maxes[i] - counts[i] - taken
    if remaining == nil or left < remaining then
      remaining, limit = left, maxes[i]
    end
  end
  if record then
    -- Per target: listed in KEYS[5] by the first entry of each half window.
    local listed = tindex and (counts[li] == 0
      or redis.call('ZCOUNT', log, int(half_start(longest)), '+inf') == 0)
    -- Entries older than the longest window count nowhere: trimmed only when
    -- writing, so a refusal costs no more commands than an admission.
    redis.call('ZREMRANGEBYSCORE', log, '-inf', int(now - longest))
    local score = int(now)
    redis.call('ZADD', log, score, ARGV[2])
    for j = 2, cost do
      redis.call('ZADD', log, score, ARGV[2] .. '.' .. j)
    end
    redis.call('PEXPIRE', log, int(longest / 1000))
    if listed then
      list_target(longest, counts[li] == 0)
    end
    -- @content-record
    -- The newest entry is the one just added: the log is empty a longest window from now.
    if c_held then return { 1, limit, remaining, 0, longest, 0, 0, 0, c_held, 1 } end
    return { 1, limit, remaining, 0, longest, 0 }
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

local reset = 0
local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
if newest[2] then
  reset = math.max(0, tonumber(newest[2]) + longest - now)
end

if record then
  local offences, crossing = offend()
  if crossing == 1 then
    return { 0, limit, remaining, math.ceil(retry), math.ceil(reset), offences, 1 }
  end
  return { 0, limit, remaining, math.ceil(retry), math.ceil(reset), offences }
end
-- A peek reports the offences so far and writes nothing.
return { allowed, limit, remaining, math.ceil(retry), math.ceil(reset),
         tonumber(redis.call('GET', KEYS[2]) or '0') }
