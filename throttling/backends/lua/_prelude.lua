-- Shared by every decision script (spliced in where a script says "-- @prelude"):
-- Redis time, the mode and cost, the penalty check and the offence bookkeeping.
-- KEYS[2..5] and ARGV[1..4] mean the same in every decision script; a content variant adds its own
-- keys and argument last (see _content.lua).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode = string.sub(ARGV[1], 1, 1)
local cost = tonumber(string.sub(ARGV[1], 2))
-- A call with a target index (KEYS[5]) names the target after the windows (ARGV[at]).
local nwin = (#ARGV - #KEYS) / 2
local tindex, at = KEYS[5], #ARGV
-- A content variant's match held for review, not refused (its kind: 1 the member's own, 2 a wave):
-- admitted and recorded, and said in a longer reply (see _content.lua).
local c_held = false
-- @content-layout

-- Numbers above 1e14 lose digits in Lua's default tostring; format them whole.
local function int(x)
  return string.format('%.0f', x)
end

-- A penalty in force (this action's or all actions') refuses first; the one
-- ending last decides the wait. Expired fields linger until the hash's TTL
-- (the end of its longest penalty) and are ignored here. Writes nothing.
if mode ~= 'r' then
  local pen = redis.call('HMGET', KEYS[3], ARGV[3], '*')
  if pen[1] or pen[2] then
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
      return { 0, 0, 0, wait, wait, 0, 0, pen_value }
    end
  end
end

-- A refused "check": one more offence in the offence window; crossing = 1
-- when this one made the identity a repeat offender and no escalation was
-- pending (SET NX with a TTL), so the caller enqueues exactly one.
local function offend()
  local offences = redis.call('INCR', KEYS[2])
  local window, threshold, pending = string.match(ARGV[4], '^(%d+) (%d+) (%d+)$')
  if offences == 1 then
    redis.call('EXPIRE', KEYS[2], window)
  end
  threshold = tonumber(threshold)
  if threshold > 0 and offences >= threshold
      and redis.call('SET', KEYS[4], ARGV[2], 'NX', 'EX', pending) then
    return offences, 1
  end
  return offences, 0
end

-- Counted per target (`tindex`, KEYS[5]): the identity's targets index lists this target, so a reset finds
-- every target (Architecture › Resetting every target). A script lists it on the target's first
-- write in each half of the longest window (fixed boundaries: half_start() is when this half
-- began), so a busy target costs its index nothing: its score is then within half a window of the
-- target's last write, and the index lives a longest window and a half from its own last write,
-- longer than any target it lists. A target written again after a longest window without a write
-- (`fresh`) drops those whose last write has left every window. Made only for a call with a
-- targets index: a per-member decision builds no closure for it.
local half_start, list_target
if tindex then
  half_start = function(longest)
    return now - now % (longest / 2)
  end
  list_target = function(longest, fresh)
    if fresh then
      redis.call('ZREMRANGEBYSCORE', tindex, '-inf', int(now - 1.5 * longest))
    end
    redis.call('ZADD', tindex, int(now), ARGV[at])
    redis.call('PEXPIRE', tindex, int(1.5 * longest / 1000))
  end
end
