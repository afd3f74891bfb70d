--[[ Add a process's count of an action to the site-wide count of the current window, and read the
previous window's (a surge trigger's counting; see Raids › Surges a policy starts itself).

KEYS[1]  hash: the action's count per window of ARGV[1] seconds (field: the window's number)

ARGV[1]  the window's length in seconds
ARGV[2]  how many to add

Reply    { count of the current window, count of the previous window, ms since the current window began }

Guarantees
- Windows are numbered from Redis's clock (TIME): every process counts into the same one.
- Only the current and the previous window are kept; the hash expires two windows after its last write.
]]

local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local length = tonumber(ARGV[1]) * 1000
local window = math.floor(ms / length)
local current = redis.call('HINCRBY', KEYS[1], string.format('%d', window), ARGV[2])
local previous = tonumber(redis.call('HGET', KEYS[1], string.format('%d', window - 1)) or '0')
if redis.call('HLEN', KEYS[1]) > 2 then
  for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
    if tonumber(field) < window - 1 then
      redis.call('HDEL', KEYS[1], field)
    end
  end
end
redis.call('PEXPIRE', KEYS[1], 2 * length)
return { current, previous, ms - window * length }
